"""Device and environment faults: a full disk under every writing command, SIGTERM during the
demo, a camera that stops or changes its frame size while a recording is in progress."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from livecam.errors import DeviceError
from livecam.media.sinks import FileRecorderSink
from livecam.pipeline.live import LiveRun, run_live_pipeline
from livecam.samples import sample_path
from tests.conftest import wait_for_file
from tests.doubles import SyntheticSource
from tests.pipeline.test_live import FakeEngine, livecam_threads, opts
from tests.videos import count_frames, make_clip, probe

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX resource limits and signals")

FILE_LIMIT = 60_000  # bytes: RLIMIT_FSIZE stands in for a full disk


def limited(env: dict[str, str], args: list[str], cwd: Path, limit: int = FILE_LIMIT) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run([sys.executable, "-m", "livecam", *args], env=dict(env, PYTHONDONTWRITEBYTECODE="1"),
                          cwd=cwd, preexec_fn=cap, capture_output=True, text=True, timeout=180)


@pytest.fixture
def clip(tmp_path: Path, faces_dir: Path) -> Path:
    return make_clip(tmp_path / "in.mp4", frames=40, size=(320, 240), source_image=faces_dir / "obama.jpg")


@pytest.mark.parametrize("command", ["video", "run", "image"])
def test_disk_full_is_a_clear_error_and_leaves_nothing(command: str, tmp_path: Path, clip: Path, faces_dir: Path,
                                                       isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    source = str(sample_path("astronaut"))
    args = {
        "video": ["video", str(clip), str(out / "o.mp4"), "--video-quality", "0"],
        "run": ["run", "--camera", str(clip), "--no-realtime", "--output", str(out / "rec.mp4")],
        "image": ["image", str(faces_dir / "obama.jpg"), str(out / "o.png")],
    }[command]
    result = limited(isolated_env, [*args, "-s", source, "--swap-model", "mesh"], tmp_path)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("livecam: error: ") and "Traceback" not in result.stderr
    assert "too large" in last.lower() or "size limit" in last or "disk full" in last, last
    assert os.listdir(out) == []  # neither the output nor a temporary file



def test_sigterm_stops_the_demo_like_ctrl_c_and_removes_its_files(tmp_path: Path,
                                                                   isolated_env: dict[str, str]) -> None:
    out = tmp_path / "new" / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "livecam", "demo", str(out)], env=isolated_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the clip is made; the swap is starting or running
        wait_for_file(out / "target.mp4", proc, timeout=120)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "new").exists()  # the folders it made are gone with the files


class StoppingSource(SyntheticSource):
    """A camera that delivers `good` frames and then blocks (unplugged, driver hang)."""

    def __init__(self, good: int, **kw: object) -> None:
        super().__init__(width=96, height=64, fps=60, **kw)  # type: ignore[arg-type]
        self.good = good
        self.release = threading.Event()

    def read(self) -> np.ndarray | None:
        if self._index >= self.good:
            self.release.wait(10)
            return None
        return super().read()


class GrowingSource(SyntheticSource):
    """A camera that switches to a larger mode mid-stream."""

    def read(self) -> np.ndarray | None:
        if self._index == 15:
            self.width, self.height = 160, 120
        return super().read()


def _options(**kw: object) -> LiveRun:
    return opts(**kw)


def test_a_camera_that_stops_mid_recording_is_named_and_the_recording_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "rec.mp4"
    source = StoppingSource(good=20)
    sink = FileRecorderSink(out, fps=30)
    try:
        with pytest.raises(DeviceError, match="stopped delivering frames"):
            run_live_pipeline(FakeEngine(), source, sink, _options(stall_timeout_s=0.5, join_timeout_s=0.3))
    finally:
        source.release.set()
    # Finalised: every frame shown before the camera stopped (a live source may drop a few).
    assert 1 <= sink.written <= 20 and count_frames(out) == sink.written  # (under load a live source drops more)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.mp4"]
    deadline = time.monotonic() + 3
    while livecam_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert livecam_threads() == []


def test_a_frame_size_change_mid_recording_keeps_one_size(tmp_path: Path) -> None:
    out = tmp_path / "rec.mp4"
    run_live_pipeline(FakeEngine(), GrowingSource(width=96, height=64, frames=30, live=False, realtime=False),
                      FileRecorderSink(out, fps=30), _options())
    info = probe(out)
    assert info["frames"] == 30 and info["size"] == (96, 64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.mp4"]
