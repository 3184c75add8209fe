"""`livecam video --cluster` from the command line: what is refused before any cluster starts,
and one real run on a local Ray cluster (`--cluster local`) with the embedded models."""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.videos import make_clip, probe


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("cli") / "in.mp4", frames=30, size=(160, 120), fps=30)


def _ray_runs_here() -> bool:
    """Whether a Ray head (its gcs_server) runs on this machine: `--cluster auto` finds it."""
    import psutil

    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] == "gcs_server":
            return True
    return False


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_fps_with_a_cluster_is_refused_before_anything_starts(tmp_path: Path, clip: Path,
                                                              isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(clip), str(out), "--source", str(clip), "--fps", "24", "--cluster", "local"],
                   env=isolated_env)
    assert proc.returncode == 2
    assert "--fps cannot be combined with --cluster" in _one_line(proc.stderr)
    assert not out.exists()


def test_cluster_options_without_a_cluster_are_a_usage_error(tmp_path: Path, clip: Path,
                                                             isolated_env: dict[str, str]) -> None:
    env = {k: v for k, v in isolated_env.items() if k != "LIVECAM_CLUSTER"}
    proc = run_cli(["video", str(clip), str(tmp_path / "out.mp4"), "--source", str(clip), "--workers", "2"], env=env)
    assert proc.returncode == 2
    assert "--workers applies to --cluster runs only" in proc.stderr
    proc = run_cli(["video", str(clip), str(tmp_path / "out.mp4"), "--source", str(clip), "--ship-input", "chunks"],
                   env=env)
    assert proc.returncode == 2
    assert "--ship-input applies to --cluster runs only" in proc.stderr
    # --segment-seconds, which has a default, was taken and ignored where the other three were refused
    proc = run_cli(["video", str(clip), str(tmp_path / "out.mp4"), "--source", str(clip), "--segment-seconds", "5"],
                   env=env)
    assert proc.returncode == 2 and "--segment-seconds applies to --cluster runs only" in proc.stderr, proc.stderr
    proc = run_cli(["video", str(clip), str(tmp_path / "out.mp4"), "--source", str(clip), "--workers", "2",
                    "--ship-input", "chunks"], env=env)
    assert proc.returncode == 2 and "--workers and --ship-input apply to --cluster runs only" in proc.stderr
    assert not (tmp_path / "out.mp4").exists()


@pytest.mark.parametrize("command", [["video", "in.mp4", "out.mp4", "--source", "face.jpg"], ["doctor"]],
                         ids=lambda c: c[0])
@pytest.mark.parametrize("address", ["", "  "], ids=["empty", "blank"])
def test_an_empty_cluster_address_is_a_usage_error(command: list[str], address: str, tmp_path: Path,
                                                   isolated_env: dict[str, str]) -> None:
    """`--cluster "$ADDR"` with ADDR unset ran on this machine without a word."""
    proc = run_cli([*command, "--cluster", address], env=isolated_env, cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_line(proc.stderr)
    assert "'--cluster': the address is empty; give local, auto, ray://HOST:PORT" in line, line
    assert "none to run on this machine" in line and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install '.[ray]')")
def test_a_local_cluster_run_from_the_environment_ignores_ray_address(tmp_path: Path, faces_dir: Path,
                                                                      isolated_env: dict[str, str]) -> None:
    """LIVECAM_CLUSTER=local starts Ray here; a stray RAY_ADDRESS is not used (it would fail)."""
    src = make_clip(tmp_path / "biden.mp4", frames=60, size=(320, 240), fps=30, audio=True,
                    source_image=faces_dir / "biden.jpg", moving_crop=True)
    out = tmp_path / "swapped.mp4"
    env = {**isolated_env, "LIVECAM_CLUSTER": "local", "RAY_ADDRESS": "192.0.2.1:6379"}
    proc = run_cli(["video", str(src), str(out), "--source", str(faces_dir / "obama.jpg"), "--swap-model", "mesh",
                    "--execution-threads", "1", "--segment-seconds", "1", "--no-label", "--no-c2pa"],
                   env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "WARNING" not in proc.stderr, proc.stderr
    # the faces swapped, summed over the segments, as `video` without --cluster counts them
    assert f"wrote {out}: 60 frames (60 faces swapped) on the cluster local in " in proc.stderr, proc.stderr
    a, b = probe(src), probe(out)
    assert b["frames"] == a["frames"] == 60
    assert b["times"] == a["times"]
    assert b["audio_duration"] == pytest.approx(a["audio_duration"], abs=1 / 30)
    face = np.abs(a["images"][45][60:160, 120:230].astype(int) - b["images"][45][60:160, 120:230]).mean()
    assert face > 8  # swapped in the second segment too


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install '.[ray]')")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])  # SIGTERM: Ray's core had taken it (abort, 134)
def test_ctrl_c_on_a_cluster_run_leaves_no_output(tmp_path: Path, faces_dir: Path,
                                                  isolated_env: dict[str, str], stop: signal.Signals) -> None:
    src = make_clip(tmp_path / "biden.mp4", frames=90, size=(320, 240), fps=30, audio=True,
                    source_image=faces_dir / "biden.jpg", moving_crop=True)
    work = tmp_path / "work"
    work.mkdir()
    out = work / "swapped.mp4"
    proc = subprocess.Popen([sys.executable, "-m", "livecam", "video", str(src), str(out), "--source",
                             str(faces_dir / "obama.jpg"), "--swap-model", "mesh", "--execution-threads", "1",
                             "--segment-seconds", "1", "--cluster", "local", "--no-c2pa"],
                            env=isolated_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # progress lines: the workers are running segments
        seen.append(line)
        if " frames (" in line:
            break
    proc.send_signal(stop)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + rest
    assert "no output written" in _one_line(rest)
    assert list(work.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install '.[ray]')")
@pytest.mark.parametrize("address, says", [("127.0.0.1:1", "cannot reach the Ray cluster at 127.0.0.1:1"),
                                           ("auto", "no Ray cluster runs on this machine and RAY_ADDRESS is not set")])
def test_doctor_on_a_cluster_that_is_not_there_says_so_in_one_line(address: str, says: str,
                                                                   isolated_env: dict[str, str]) -> None:
    if address == "auto" and _ray_runs_here():
        pytest.skip("a Ray cluster runs on this machine (another test run's?): `auto` would rightly join it")
    env = {k: v for k, v in isolated_env.items() if k != "RAY_ADDRESS"}
    proc = run_cli(["doctor", "--cluster", address], env=env, timeout=120)
    assert proc.returncode == 2
    assert says in _one_line(proc.stderr)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install '.[ray]')")
def test_ctrl_c_with_keep_partial_keeps_the_leading_segments(tmp_path: Path, faces_dir: Path,
                                                             isolated_env: dict[str, str]) -> None:
    # 240 frames, interrupted past 75: the run is then far from its end (progress lines come about
    # once a second and jump by whole segments, so a shorter clip could finish before any line >= 75)
    src = make_clip(tmp_path / "biden.mp4", frames=240, size=(320, 240), fps=30, audio=True,
                    source_image=faces_dir / "biden.jpg", moving_crop=True)
    out = tmp_path / "swapped.mp4"
    proc = subprocess.Popen([sys.executable, "-m", "livecam", "video", str(src), str(out), "--source",
                             str(faces_dir / "obama.jpg"), "--swap-model", "mesh", "--execution-threads", "1",
                             "--segment-seconds", "1", "--cluster", "local", "--no-c2pa", "--keep-partial"],
                            env=isolated_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # wait until most of it is done: the first segment then surely is
        seen.append(line)
        done = re.search(r"(\d+)/\d+ frames \(", line)
        if done and int(done.group(1)) >= 75:
            break
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + rest
    assert f"partial videos kept: {out}" in _one_line(rest)
    kept = probe(out)
    assert kept["frames"] in range(30, 240, 30)  # whole leading segments
    assert kept["times"] == probe(src)["times"][:kept["frames"]]
    assert kept["audio_duration"] == pytest.approx(kept["frames"] / 30, abs=0.05)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install '.[ray]')")
def test_a_cluster_run_says_once_what_the_output_leaves_out(tmp_path: Path, faces_dir: Path,
                                                            isolated_env: dict[str, str]) -> None:
    """An MP4 with cover art (an attached file MP4 outputs cannot hold), in two segments: the
    one note a run without --cluster gives, once for the file; --cluster said nothing of it."""
    from tests.videos import cover_first, make_timed_clip

    src = cover_first(make_timed_clip(tmp_path / "covered.mp4", frames=40, cover=(64, 64)))
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(src), str(out), "--source", str(faces_dir / "obama.jpg"), "--swap-model", "mesh",
                    "--execution-threads", "1", "--segment-seconds", "1", "--no-c2pa", "--cluster", "local"],
                   env=isolated_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "not copied" in line]
    assert notes == ["livecam: note: the output has the input's video and its audio; not copied: 1 attached file "
                     "(cover.jpg): MP4 outputs leave them out; write a .mkv output to keep them"], proc.stderr
    assert probe(out)["frames"] == 40
