"""`livecam run` end to end on a generated clip, and its early errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

from tests.conftest import run_cli
from tests.videos import count_frames, make_clip, read_index, stalling_server


@pytest.fixture
def biden_clip(tmp_path: Path, faces_dir: Path) -> Path:
    """A short clip of a moving crop of biden.jpg, each frame's index stamped in its top-left corner."""
    return make_clip(tmp_path / "clip.mp4", frames=24, size=(320, 240), fps=12, audio=False,
                     source_image=faces_dir / "biden.jpg", stamp=True)


def test_run_on_a_clip_with_the_mesh_swapper_writes_stats_and_summary(
        tmp_path: Path, faces_dir: Path, biden_clip: Path, isolated_env: dict[str, str]) -> None:
    stats = tmp_path / "s.jsonl"
    rec = tmp_path / "rec.mp4"
    proc = run_cli(["run", "--camera", str(biden_clip), "--output", str(rec), "--stats-json", str(stats),
                    "--swap-model", "mesh", "--source", str(faces_dir / "obama.jpg")],
                   env=isolated_env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [json.loads(line) for line in stats.read_text().splitlines()]
    summary = lines[-1]["summary"]
    assert {"frames", "fps", "latency_ms_p50", "latency_ms_p95", "dropped", "degradations"} <= summary.keys()
    assert summary["stop_reason"] == "end of stream"
    assert "no face was found" not in proc.stderr
    assert summary["frames"] >= 1 and summary["frames"] + summary["dropped"] == summary["captured"] == 24
    assert all("fps" in r and "latency_ms_p95" in r for r in lines[:-1])
    with av.open(str(rec)) as container:
        assert container.metadata.get("synthetic") == "true"
        recorded = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    assert len(recorded) == summary["frames"]
    # Every recorded frame has its face swapped: against the clip frame it came from (found by the
    # stamped index), one 20x20 block (the face) changed far more than the re-encoding noise
    # elsewhere. The bottom rows, where the label is, are left out.
    with av.open(str(biden_clip)) as container:
        clip = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    for frame in recorded:
        diff = np.abs(frame.astype(int) - clip[read_index(frame)]).mean(axis=2)[:200]
        blocks = diff.reshape(10, 20, 16, 20).mean(axis=(1, 3))
        assert blocks.max() > 12 and blocks.max() > 3 * np.median(blocks), (read_index(frame), blocks.max())


def test_missing_camera_file_is_a_usage_error(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    proc = run_cli(["run", "--camera", str(tmp_path / "nope.mp4"), "--output", "none", "--source", "x.jpg"],
                   env=isolated_env)
    assert proc.returncode == 2
    assert "no such camera index, file or URL" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="device nodes are checked on Linux")
def test_a_camera_index_without_a_device_is_reported_before_the_models_load(
        faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # It used to be found only after the models had loaded (their lines printed first).
    proc = run_cli(["run", "--camera", "97", "--output", "none", "--source", str(faces_dir / "obama.jpg")],
                   env=isolated_env)
    assert proc.returncode == 2  # bad input another --camera fixes (it was 1, as a device failing mid-run)
    assert proc.stderr.splitlines() == [
        proc.stderr.strip()] and "camera 97: there is no /dev/video97" in proc.stderr, proc.stderr
    assert "give --camera another index or a video file" in proc.stderr


@pytest.mark.parametrize("output", ["auto", "window"])
def test_no_display_is_an_input_error_for_auto_and_window_alike(tmp_path: Path, isolated_env: dict[str, str],
                                                                 output: str) -> None:
    # One cause, one code: a display this machine lacks is bad input that another --output fixes
    # (exit 2), like a missing camera; it was 1, the code of a device failing mid-run.
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    env = {k: v for k, v in isolated_env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = run_cli(["run", "--camera", str(clip), "--source", "x.jpg", "--output", output], env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"livecam: error: --output {output}: ") and len(proc.stderr.splitlines()) == 1
    assert "DISPLAY" in proc.stderr and "--output none" in proc.stderr


@pytest.mark.skipif(Path("/sys/module/v4l2loopback").exists(), reason="this machine has a virtual camera device")
def test_no_virtual_camera_is_an_input_error_as_no_display_is(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    # pyvirtualcam missing, or no device for it: fixed by installing or by another --output (exit 2),
    # as a missing display; it was 1, the code of a device failing mid-run.
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    proc = run_cli(["run", "--camera", str(clip), "--source", "x.jpg", "--output", "virtual-camera"],
                   env=isolated_env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("livecam: error: ") and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "pyvirtualcam" in proc.stderr or "no virtual camera device" in proc.stderr


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="needs /dev/stdout")
def test_stats_json_to_dev_stdout_appended_to_a_file_by_the_shell(tmp_path: Path, faces_dir: Path,
                                                                  isolated_env: dict[str, str]) -> None:
    # `livecam run --stats-json /dev/stdout >> stats.jsonl` was refused: "/dev/stdout: the file
    # exists; add --force" (it points at the shell's file), and with --force replaced what it held.
    clip = make_clip(tmp_path / "c.mp4", frames=6, size=(96, 64), audio=False)
    out = tmp_path / "stats.jsonl"
    out.write_text('{"earlier": "run"}\n')
    with out.open("a") as stdout:
        proc = subprocess.run([sys.executable, "-m", "livecam", "run", "--camera", str(clip), "--no-realtime",
                               "--output", "none", "--swap-model", "mesh", "--stats-json", "/dev/stdout",
                               "--source", str(faces_dir / "obama.jpg")],
                              env=isolated_env, cwd=tmp_path, stdout=stdout, stderr=subprocess.PIPE, text=True,
                              timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0] == {"earlier": "run"} and lines[-1]["summary"]["frames"] == 6


@pytest.mark.parametrize("stats", ["-", "/dev/stdout"])
def test_stats_json_to_stdout_cut_short_by_its_reader_exits_quietly_with_the_recording_kept(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], stats: str) -> None:
    # `livecam run --stats-json - | head -1` ended "error: --stats-json -: its reader closed it
    # (broken pipe); keep the reader open", exit 1: stdout's reader going away is 141 without a
    # line, as for every command (README's exit codes); the recording is finished all the same
    from livecam.errors import EXIT_BROKEN_PIPE

    if stats != "-" and not Path(stats).exists():
        pytest.skip(f"needs {stats}")
    clip = make_clip(tmp_path / "c.mp4", frames=45, size=(96, 64), fps=15, audio=False)  # 3 s in real time
    rec = tmp_path / "rec.mp4"
    read_end, write_end = os.pipe()
    os.close(read_end)  # as head after its first line
    try:
        proc = subprocess.run([sys.executable, "-m", "livecam", "run", "--camera", str(clip), "--output", str(rec),
                               "--swap-model", "mesh", "--stats-json", stats, "--no-c2pa",
                               "--source", str(faces_dir / "obama.jpg")],
                              env=isolated_env, cwd=tmp_path, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=300)
    finally:
        os.close(write_end)
    assert proc.returncode == EXIT_BROKEN_PIPE, proc.stderr
    assert "livecam: error" not in proc.stderr and "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert count_frames(rec) > 0


@pytest.mark.parametrize("stats", ["-", "/dev/stdout"])
def test_stats_json_to_a_closed_stdout_is_refused_before_the_models_load(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], stats: str) -> None:
    # `livecam run --stats-json - >&-` loaded the models and ran, writing its lines to whatever file
    # took descriptor 1 (the --camera file, read-only here), and ended "writing failed (Bad file
    # descriptor); free space on that disk"; /dev/stdout was "not writable by this user"
    clip = make_clip(tmp_path / "c.mp4", frames=6, size=(96, 64), audio=False)
    before = clip.read_bytes()
    proc = subprocess.run(["sh", "-c", 'exec "$0" "$@" >&-', sys.executable, "-m", "livecam", "run", "--camera",
                           str(clip), "--no-realtime", "--output", "none", "--swap-model", "mesh", "--stats-json",
                           stats, "--source", str(faces_dir / "obama.jpg")],
                          env=isolated_env, cwd=tmp_path, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [f"livecam: error: --stats-json {stats}: standard output is closed (the "
                                        f"command was started with >&-); give a file name such as stats.jsonl"]
    assert clip.read_bytes() == before


def test_a_stats_file_name_ending_in_a_slash_is_refused(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    # `--stats-json s.jsonl/` (a folder, by its slash) wrote the file s.jsonl: Path drops the slash
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    proc = run_cli(["run", "--camera", str(clip), "--output", "none", "--source", "x.jpg",
                    "--stats-json", "s.jsonl/"], env=isolated_env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "ends in a slash, which means a folder; give the file name without it (s.jsonl)" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and not (tmp_path / "s.jsonl").exists()


def test_existing_recording_is_refused_without_force(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    existing = tmp_path / "rec.mp4"
    existing.write_bytes(b"keep me")
    proc = run_cli(["run", "--camera", str(clip), "--output", str(existing), "--source", "x.jpg"], env=isolated_env)
    assert proc.returncode == 2 and "--force" in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("livecam: error: ") and "rec.mp4" in lines[0], proc.stderr
    assert existing.read_bytes() == b"keep me"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGINT, getattr(signal, "SIGHUP", signal.SIGINT)])
def test_ctrl_c_stops_the_cli_with_130_and_a_complete_recording(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], sig: int) -> None:
    # SIGHUP (the terminal or SSH session closed) once killed the run: no recording, its temp file left
    clip = make_clip(tmp_path / "long.mp4", frames=240, size=(160, 120), fps=12, audio=False,
                     source_image=faces_dir / "biden.jpg")
    stats = tmp_path / "s.jsonl"
    rec = tmp_path / "rec.mp4"
    proc = subprocess.Popen([sys.executable, "-m", "livecam", "run", "--camera", str(clip), "--output", str(rec),
                             "--stats-json", str(stats), "--swap-model", "mesh", "--source",
                             str(faces_dir / "obama.jpg")], env=isolated_env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if stats.is_file() and stats.read_text().count("\n") >= 1:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()[1]
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert elapsed < 2.0 + 1.0
    assert "interrupted" in err and "Traceback" not in err
    summary = json.loads(stats.read_text().splitlines()[-1])["summary"]
    assert summary["stop_reason"] == "interrupted"
    with av.open(str(rec)) as container:
        assert sum(1 for _ in container.decode(video=0)) == summary["frames"] >= 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_recording_carries_the_visible_label_unless_no_label(tmp_path: Path, faces_dir: Path,
                                                              isolated_env: dict[str, str]) -> None:
    # A faceless clip: the label is the only change the recording may show.
    clip = make_clip(tmp_path / "c.mp4", frames=3, size=(320, 240), audio=False)

    def change(args: list[str], name: str) -> tuple[float, float]:
        """The largest change in the bottom-right corner, and the mean change above it."""
        rec = tmp_path / name
        proc = run_cli(["run", "--camera", str(clip), "--no-realtime", "--output", str(rec), "--swap-model", "mesh",
                        "--source", str(faces_dir / "obama.jpg"), *args], env=isolated_env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        with av.open(str(clip)) as a, av.open(str(rec)) as b:
            before = next(a.decode(video=0)).to_ndarray(format="bgr24").astype(int)
            after = next(b.decode(video=0)).to_ndarray(format="bgr24").astype(int)
        diff = abs(after - before).sum(axis=2)
        return float(diff[-30:, -110:].max()), float(diff[:-40].mean())

    corner, rest = change([], "labelled.mp4")
    assert corner > 150 and rest < 10  # a label drawn in the bottom-right corner, nothing else changed
    corner, _ = change(["--no-label"], "plain.mp4")
    assert corner < 60


def test_a_recording_never_replaces_a_file_that_appeared_during_the_run(tmp_path: Path,
                                                                        isolated_env: dict[str, str]) -> None:
    # `run --output` checked at the start only and then renamed over whatever was there: a file
    # put there meanwhile (or a second run's result) was destroyed, with exit 0.
    from livecam.samples import sample_path

    clip = make_clip(tmp_path / "c.mp4", frames=36, size=(96, 64), fps=12, audio=False)  # 3 s in real time
    rec = tmp_path / "rec.mp4"
    proc = subprocess.Popen([sys.executable, "-m", "livecam", "run", "--camera", str(clip), "--output", str(rec),
                             "--swap-model", "mesh", "--source", str(sample_path("astronaut"))],
                            env=isolated_env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".livecam-*.part.mp4")):  # the recording has started
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the recording never started"
        time.sleep(0.01)
    rec.write_bytes(b"someone else's file")
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr  # as when --force cannot replace the old file (it was 2)
    assert rec.read_bytes() == b"someone else's file"
    kept = tmp_path / "rec.livecam-1.mp4"
    assert f"the result was kept as {kept}" in stderr and "Traceback" not in stderr
    with av.open(str(kept)) as container:
        assert sum(1 for _ in container.decode(video=0)) > 0
    assert not list(tmp_path.glob(".livecam-*"))


def test_a_recording_from_a_fifo_camera_is_finished(tmp_path: Path, faces_dir: Path,
                                                               isolated_env: dict[str, str]) -> None:
    # The C2PA signer opened the --camera file again to take it as the recording's parent
    # ingredient: a FIFO, read once and closed by its writer, waited for another writer, so the
    # run hung after its last frame and left a hidden part file when killed.
    import threading

    clip = make_clip(tmp_path / "clip.ts", frames=8, size=(160, 120), audio=False)
    fifo = tmp_path / "camera.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as writer:
            writer.write(clip.read_bytes())

    threading.Thread(target=feed, daemon=True).start()
    rec = tmp_path / "rec.mp4"
    proc = run_cli(["run", "--camera", str(fifo), "--no-realtime", "--output", str(rec), "--no-watermark",
                    "--swap-model", "mesh", "--source", str(faces_dir / "obama.jpg")],
                   env=isolated_env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert count_frames(rec) == 8
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_recording_without_any_face_is_said_so(tmp_path: Path, faces_dir: Path,
                                                 isolated_env: dict[str, str]) -> None:
    # `video` warns that nothing was swapped; `run` recorded the clip unchanged without a word, exit 0
    clip = make_clip(tmp_path / "noface.mp4", frames=6, size=(160, 120), fps=12, audio=False)
    rec = tmp_path / "rec.mp4"
    proc = run_cli(["run", "--camera", str(clip), "--output", str(rec), "--no-realtime", "--swap-model", "mesh",
                    "--source", str(faces_dir / "obama.jpg")], env=isolated_env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("livecam: warning: no face was found in any of the 6 frames shown; none was swapped"
            in proc.stderr.splitlines()), proc.stderr
    assert count_frames(rec) == 6


def test_a_camera_url_that_goes_quiet_mid_run_ends_in_its_own_line_keeping_the_recording(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # The pipeline's 2 s stall check came before the URL's 5 s read timeout, the read still
    # blocked: "stages still running 2 s after the stop: livecam-capture" and "... not released:
    # its read is still blocked" were printed with the error
    clip = make_clip(tmp_path / "live.ts", frames=60, size=(160, 120), fps=30, audio=False,
                     source_image=faces_dir / "biden.jpg")
    rec = tmp_path / "rec.mp4"
    with stalling_server(clip.read_bytes()) as url:
        proc = run_cli(["run", "--camera", url, "--output", str(rec), "--no-watermark", "--no-c2pa",
                        "--swap-model", "mesh", "--source", str(faces_dir / "obama.jpg")],
                       env=isolated_env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (f"livecam: error: {url} stopped sending data (nothing for 5 s): "
                                                    f"check that the stream is still live"), proc.stderr
    assert "still running" not in proc.stderr and "not released" not in proc.stderr, proc.stderr
    assert count_frames(rec) >= 1  # what came before is kept


def test_a_duration_that_ends_while_a_camera_url_read_waits_exits_0_keeping_the_recording(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # The capture thread, left inside FFmpeg's read of the quiet stream, crashed the exit: its
    # interrupt callback asked for the finalised interpreter ("Segmentation fault", exit 139, after
    # the summary); and "stages still running" and "not released" came before
    clip = make_clip(tmp_path / "live.ts", frames=60, size=(160, 120), fps=30, audio=False,
                     source_image=faces_dir / "biden.jpg")
    rec = tmp_path / "rec.mp4"
    with stalling_server(clip.read_bytes()) as url:  # half the clip: about 1 s of frames, then nothing
        proc = run_cli(["run", "--camera", url, "--output", str(rec), "--duration", "2", "--no-watermark",
                        "--no-c2pa", "--swap-model", "mesh", "--source", str(faces_dir / "obama.jpg")],
                       env=isolated_env, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("dropped (duration)"), proc.stderr
    assert "still running" not in proc.stderr and "not released" not in proc.stderr, proc.stderr
    assert count_frames(rec) >= 1


@pytest.mark.parametrize("output", ["none", "rec.mp4"])
def test_a_camera_file_cut_short_is_said_once_with_what_the_output_loses_only_where_one_is_made(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], output: str) -> None:
    # `run --no-realtime --output none` on a cut recording warned "...; the output stops there" of an
    # output it does not make; it says where the input ends, and a recording still hears what it loses
    whole = make_clip(tmp_path / "whole.mkv", frames=60, size=(96, 64), fps=24, audio=False)
    data = whole.read_bytes()
    clip = tmp_path / "cut.mkv"
    clip.write_bytes(data[:len(data) // 2])
    proc = run_cli(["run", "--camera", str(clip), "--no-realtime", "--output", output, "--swap-model", "mesh",
                    "--no-c2pa", "--source", str(faces_dir / "obama.jpg")], env=isolated_env, cwd=tmp_path,
                   timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "cut.mkv ended at" in line]
    assert len(said) == 1 and "(damaged or cut short)" in said[0], proc.stderr
    if output == "none":
        assert said[0].endswith("could be read") and "output stops there" not in proc.stderr, proc.stderr
    else:
        assert said[0].endswith("could be read; the output stops there"), proc.stderr
