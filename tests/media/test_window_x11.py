"""--output window for real: OpenCV's own window on a virtual X display, driven by key presses.

The other window tests use a fake cv2; this one needs Xvfb and xdotool (Debian: `apt-get install
xvfb xdotool`) and skips, saying so, where they are absent (as in CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.videos import make_clip

pytestmark = pytest.mark.skipif(
    shutil.which("Xvfb") is None or shutil.which("xdotool") is None,
    reason="needs Xvfb and xdotool for a real X display (apt-get install xvfb xdotool)")


@pytest.fixture
def x_display(x_server: tuple[dict[str, str], subprocess.Popen[bytes]]) -> dict[str, str]:
    """The environment that points livecam at a private Xvfb server."""
    return x_server[0]


@pytest.fixture
def x_server(isolated_env: dict[str, str]) -> Iterator[tuple[dict[str, str], subprocess.Popen[bytes]]]:
    """A private Xvfb server; yields the environment that points livecam at it, and the server."""
    # -displayfd: the server picks a free display number and writes it once it accepts clients
    read_fd, write_fd = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                              pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        number = pipe.readline().strip()
    if not number:
        server.kill()
        pytest.skip("Xvfb did not start")
    env = {**isolated_env, "DISPLAY": f":{number}"}
    env.pop("WAYLAND_DISPLAY", None)
    try:
        yield env, server
    finally:
        server.terminate()
        server.wait(timeout=10)


def find_window(env: dict[str, str], proc: subprocess.Popen[str], timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"livecam exited before its window appeared: {proc.communicate()}")
        found = subprocess.run(["xdotool", "search", "--name", "^livecam"], env=env, capture_output=True, text=True)
        if found.stdout.split():
            return found.stdout.split()[0]
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("no livecam window appeared")


def start_window_run(tmp_path: Path, faces_dir: Path,
                     env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    """`livecam run --output window` on 20 s of camera-paced video (a face in it) with its stats
    file: the run ends early only through the window."""
    clip = make_clip(tmp_path / "cam.mp4", frames=600, size=(320, 240), fps=30, audio=False,
                     source_image=faces_dir / "biden.jpg")
    stats = tmp_path / "stats.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "livecam", "run", "--camera", str(clip), "--output", "window",
         "--swap-model", "mesh", "--stats-json", str(stats), "--source", str(faces_dir / "obama.jpg")],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, stats


def press(env: dict[str, str], window: str, key: str) -> None:
    subprocess.run(["xdotool", "key", "--window", window, key], env=env, check=True, capture_output=True)


def test_window_shows_the_stream_and_obeys_its_keys(tmp_path: Path, faces_dir: Path,
                                                    x_display: dict[str, str]) -> None:
    # 20 s of camera-paced video: the run can only end early through the window's `q`
    proc, stats = start_window_run(tmp_path, faces_dir, x_display)
    try:
        window = find_window(x_display, proc)
        time.sleep(1.0)  # let frames reach the window
        for key in ("space", "space", "e", "q"):
            press(x_display, window, key)
            time.sleep(0.3)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    if any(Path(d).is_dir() for d in ("/usr/share/fonts", "/usr/local/share/fonts")):
        assert "QFontDatabase" not in err  # opencv-python's Qt looked for fonts it no longer ships
    assert "paused" in err and "resumed" in err  # space, twice
    assert "the face enhancer is not running" in err  # e without the enhancer says why nothing happened
    summary = json.loads(stats.read_text().splitlines()[-1])["summary"]
    assert summary["stop_reason"] == "quit"
    assert 0 < summary["captured"] < 600
    assert summary["frames"] >= 1
