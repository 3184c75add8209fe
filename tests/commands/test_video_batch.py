"""`livecam video FOLDER FOLDER`: a broken file among good ones, resuming with --skip-existing,
Ctrl-C/SIGTERM mid-batch (real CLI in subprocesses, the engine replaced by a model-free one), and
the one bar's total, --frame-range and --fps per file (in-process)."""

from __future__ import annotations

import signal
import threading
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import livecam.commands.video as video
from livecam.errors import EXIT_USAGE, InputError, LivecamError
from livecam.faces.face import Face
from livecam.frame import FramePacket
from livecam.pipeline.progress import Parts
from livecam.settings import C2paSettings, ClusterSettings, ProcessingSettings, RuntimeSettings, VideoJob
from tests.doubles import FlipEngine
from tests.conftest import REPO_ROOT, run_cli, wait_for_file
from tests.videos import count_frames, make_audio_only, make_clip, probe, read_index

# The real CLI with a model-free engine that inverts a patch; it touches MARKER once MARK_AT
# frames (counted over all files) were processed and is slow from then on, so a signal sent on
# seeing the marker lands inside the file being processed.
_PATCHED_CLI = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
import livecam.commands.video as video

from tests.doubles import NoModels

class FlipEngine(NoModels):
    tracks = False
    seen = 0
    def analyse(self, packet, track):
        packet.faces = []
    def process(self, packet):
        FlipEngine.seen += 1
        if FlipEngine.seen == {mark_at}:
            Path({marker!r}).touch()
        time.sleep(0.3 if FlipEngine.seen >= {mark_at} else 0)
        packet.image[100:108, :8] = 255 - packet.image[100:108, :8]

video.create_engine = lambda job: FlipEngine()
from livecam.cli import main
sys.argv = ["livecam", *sys.argv[1:]]
main()
"""

FAST = ["--source", "face.jpg", "--no-watermark", "--no-c2pa"]


def _cli(args: list[str], tmp_path: Path, env: dict[str, str], mark_at: int = 10 ** 9) -> subprocess.Popen[str]:
    script = _PATCHED_CLI.format(root=str(REPO_ROOT), marker=str(tmp_path / "marker"), mark_at=mark_at)
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _run(args: list[str], tmp_path: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    proc = _cli(args, tmp_path, env)
    _, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr
    return proc.returncode, [line for line in stderr.splitlines() if line.strip()]


@pytest.fixture()
def clips(tmp_path: Path) -> Path:
    """a.mp4 (30 frames, with audio: the largest), b.mkv (20 frames), broken.mp4 (cut in half)."""
    folder = tmp_path / "clips"
    folder.mkdir()
    make_clip(folder / "a.mp4", frames=30, stamp=True)
    make_clip(folder / "b.mkv", frames=20, stamp=True, audio=False)
    data = (folder / "a.mp4").read_bytes()
    (folder / "broken.mp4").write_bytes(data[: len(data) // 2])
    return folder


def _stamps(path: Path) -> list[int]:
    return [read_index(img) for img in probe(path)["images"]]


def test_a_broken_file_is_named_the_others_are_written_and_skip_existing_resumes(
        tmp_path: Path, clips: Path, isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out" / "new"  # created, parents too
    code, lines = _run(["video", str(clips), str(out), *FAST], tmp_path, isolated_env)
    assert code == EXIT_USAGE  # the one failure is a bad input, as for one file
    errors = [line for line in lines if line.startswith("livecam: error:")]
    assert len(errors) == 2, lines
    # named once, by the reason itself ("broken.mp4: cannot read .../broken.mp4" named it twice)
    assert errors[0].startswith(f"livecam: error: cannot read {clips / 'broken.mp4'}: "), errors[0]
    assert errors[0].count("broken.mp4") == 1, errors[0]
    assert "its index (the moov box a recorder writes last) is missing" in errors[0]
    assert errors[1].startswith(f"livecam: error: 2 of 3 files written to {out} (50 frames in ")
    assert errors[1].endswith(", 1 failed")
    assert sorted(p.name for p in out.iterdir()) == ["a.mp4", "b.mkv"]
    assert _stamps(out / "a.mp4") == list(range(30)) and _stamps(out / "b.mkv") == list(range(20))
    assert probe(out / "a.mp4")["audio_codec"] == "aac"  # each file as for one file: audio kept

    before = {name: (out / name).stat().st_mtime_ns for name in ("a.mp4", "b.mkv")}
    code, lines = _run(["-q", "video", str(clips), str(out), *FAST], tmp_path, isolated_env)  # no --skip-existing
    assert code == EXIT_USAGE and len(lines) == 4, lines  # three refusals and the total, nothing else with -q
    assert sum("exists; add --force" in line and "--skip-existing keeps it" in line for line in lines) == 2
    assert {name: (out / name).stat().st_mtime_ns for name in before} == before

    (out / "b.mkv").unlink()  # as if the first run had stopped before b
    code, lines = _run(["video", str(clips), str(out), *FAST, "--skip-existing"], tmp_path, isolated_env)
    assert code == EXIT_USAGE
    assert lines[-1].startswith(f"livecam: error: 1 of 3 files written to {out} (20 frames in ")
    assert lines[-1].endswith(", 1 skipped (output already there), 1 failed")
    assert (out / "a.mp4").stat().st_mtime_ns == before["a.mp4"]  # skipped, not rewritten
    assert _stamps(out / "b.mkv") == list(range(20))  # written again
    assert sorted(p.name for p in out.iterdir()) == ["a.mp4", "b.mkv"]


def test_sigterm_mid_batch_keeps_the_finished_files_and_nothing_of_the_current_one(
        tmp_path: Path, clips: Path, isolated_env: dict[str, str]) -> None:
    (clips / "broken.mp4").unlink()
    out = tmp_path / "out"
    proc = _cli(["-q", "video", str(clips), str(out), *FAST], tmp_path, isolated_env, mark_at=35)  # 5 frames into b
    wait_for_file(tmp_path / "marker", proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("livecam: error: b.mkv: interrupted after ")
    assert lines[0].endswith(f"no output written; 1 of 2 files was written to {out} before it")  # was "were"
    assert sorted(p.name for p in out.iterdir()) == ["a.mp4"]  # no b, no temporary file
    assert count_frames(out / "a.mp4") == 30


def _folder_job(clips: Path, out: Path, **kw: object) -> VideoJob:
    processing = ProcessingSettings(sources=(clips / "face.jpg",), runtime=RuntimeSettings(quiet=True))
    return VideoJob(input=clips, output=out, processing=processing, watermark=False,  # type: ignore[arg-type]
                    c2pa=C2paSettings(enabled=False), **kw)


@pytest.fixture()
def one_bar(monkeypatch: pytest.MonkeyPatch) -> list[Parts]:
    """The fake engine, and the folder run's bar kept for the test to read."""
    bars: list[Parts] = []
    make = video.batch_progress

    def keep(*args: object) -> Parts:
        bars.append(make(*args))  # type: ignore[arg-type]
        return bars[-1]

    monkeypatch.setattr(video, "create_engine", lambda job: FlipEngine())
    monkeypatch.setattr(video, "batch_progress", keep)
    return bars


def test_one_bar_counts_every_frame_of_every_file(tmp_path: Path, one_bar: list[Parts]) -> None:
    clips = tmp_path / "clips"
    clips.mkdir()
    make_clip(clips / "a.mp4", frames=30, audio=False)
    make_clip(clips / "b.mov", frames=20, audio=False)
    make_clip(clips / "c.mkv", frames=12, audio=False)
    make_audio_only(clips / "tone.mp4")  # no video stream: refused up front, not counted
    with pytest.raises(LivecamError, match="3 of 4 files written"):
        video.run_video(_folder_job(clips, tmp_path / "out"))
    (bar,) = one_bar
    assert bar.progress.total == 30 + 20 + 12 == bar.progress.done
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.mp4", "b.mov", "c.mkv"]


def test_the_bar_of_a_folder_with_one_video_says_1_file(tmp_path: Path) -> None:
    """Its status lines began "1 files: 20/20 frames"."""
    job = _folder_job(tmp_path, tmp_path / "out")
    one = video.batch_progress(job, [replace(job, input=tmp_path / "a.mp4")], 20).progress
    assert one.status_line().startswith("1 file: 0/20 frames"), one.status_line()
    two = video.batch_progress(job, [job, job], 20).progress
    assert two.status_line().startswith("2 files: 0/20 frames"), two.status_line()


def test_a_broken_link_is_a_failed_file_not_left_out(tmp_path: Path, one_bar: list[Parts],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    # It was skipped without a word: "1 of 1 files written" for a folder of two videos.
    clips = tmp_path / "clips"
    clips.mkdir()
    make_clip(clips / "a.mp4", frames=6, audio=False)
    (clips / "moved.mp4").symlink_to(tmp_path / "elsewhere" / "moved.mp4")
    with caplog.at_level("ERROR", logger="livecam"):
        with pytest.raises(LivecamError, match="1 of 2 files written"):
            video.run_video(_folder_job(clips, tmp_path / "out"))
    assert any("moved.mp4 is a link to" in r.getMessage() and "does not exist" in r.getMessage()
               for r in caplog.records)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["a.mp4"]


def test_frame_range_and_fps_apply_to_each_file(tmp_path: Path, one_bar: list[Parts]) -> None:
    clips = tmp_path / "clips"
    clips.mkdir()
    make_clip(clips / "long.mp4", frames=30, fps=30, audio=False)
    make_clip(clips / "short.mp4", frames=9, fps=30, audio=False)
    job = _folder_job(clips, tmp_path / "out", fps=15.0, frame_range=(6, None))
    with pytest.raises(LivecamError, match=r"1 of 2 files written") as failed:
        video.run_video(job)
    assert failed.value.exit_code == EXIT_USAGE  # short.mp4 has about 5 frames at 15 fps: refused alone
    assert count_frames(tmp_path / "out" / "long.mp4") == 15  # 30 frames at 30 fps retimed to 15
    assert one_bar[0].progress.total == 15 == one_bar[0].progress.done


@pytest.mark.parametrize("case", ["folder_to_file", "force_and_skip"])
def test_mismatched_arguments_are_one_line(tmp_path: Path, clips: Path, case: str) -> None:
    out, extra, text = tmp_path / "out", ["--skip-existing", "--force"], "--force and --skip-existing exclude each other"
    if case == "folder_to_file":
        out, extra, text = tmp_path / "out.mp4", [], "is a folder, so the output must be a folder too"
    result = run_cli(["video", str(clips), str(out), "--source", "face.jpg", *extra])
    assert result.returncode == EXIT_USAGE
    assert result.stderr.startswith("livecam: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert text in result.stderr and not out.exists()


def test_one_file_with_skip_existing_keeps_its_output_and_pattern_needs_a_folder(tmp_path: Path,
                                                                                one_bar: list[Parts]) -> None:
    clip = make_clip(tmp_path / "in.mp4", frames=3, audio=False)
    out = tmp_path / "out.mp4"
    out.write_bytes(b"earlier result")
    job = replace(_folder_job(tmp_path, out, skip_existing=True), input=clip)
    video.run_video(job)  # no error, nothing written
    assert out.read_bytes() == b"earlier result"
    with pytest.raises(InputError, match="--pattern chooses the files of a folder input, but .*in.mp4 is not a folder"):
        video.run_video(replace(job, pattern="*.mp4"))


class LaneEngine(FlipEngine):
    """A FlipEngine that keeps the names of the threads it processed frames on."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def process(self, packet: FramePacket) -> None:
        self.threads.append(threading.current_thread().name)
        super().process(packet)


class LanedEngine(LaneEngine):
    """contracts.FileEngine with two lanes, built once (counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.built: list[LaneEngine] = []
        self.asked = 0

    def lanes(self) -> list[LaneEngine]:  # type: ignore[override]
        self.asked += 1
        if not self.built:
            self.built = [LaneEngine(), LaneEngine()]
        return self.built


def test_the_engines_lanes_are_the_workers_of_one_file_and_of_a_folder(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """What FileEngine.lanes() gives is what `livecam video` runs its workers on (lane i on
    thread livecam-lane-i); the engine itself processes nothing, and a folder asks once."""
    clips = tmp_path / "clips"
    clips.mkdir()
    make_clip(clips / "a.mp4", frames=12, audio=False)
    make_clip(clips / "b.mp4", frames=8, audio=False)
    engines: list[LanedEngine] = []
    monkeypatch.setattr(video, "create_engine", lambda job: engines.append(LanedEngine()) or engines[-1])
    video.run_video(replace(_folder_job(clips, tmp_path / "one.mp4"), input=clips / "a.mp4"))
    video.run_video(_folder_job(clips, tmp_path / "out"))
    for engine, frames in zip(engines, (12, 20)):
        assert engine.asked == 1 and not engine.threads
        threads = [name for lane in engine.built for name in lane.threads]
        assert len(threads) == frames
        for k, lane in enumerate(engine.built):
            assert set(lane.threads) <= {f"livecam-lane-{k}"}
    assert count_frames(tmp_path / "one.mp4") == 12
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.mp4", "b.mp4"]


@pytest.mark.parametrize("name, frames, rate", [("trip.h264", 12, 10), ("door.mjpeg", 3, 25)])
def test_a_folder_of_camera_recordings_is_a_batch_at_their_own_rates(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], name: str, frames: int, rate: int) -> None:
    """A dashcam's folder of .h264 files, or an IP camera's of .mjpeg (JPEGs one after another,
    which `livecam video` reads as a clip), was "no files with a video extension"; each is written
    as .mp4 at the rate its stream declares (10 fps here, not FFmpeg's 25 fps default; MJPEG has
    none: 25)."""
    from tests.videos import make_raw_h264

    folder = tmp_path / "camera"
    folder.mkdir()
    if name.endswith(".h264"):
        make_raw_h264(folder / name, frames=frames, fps=rate)
    else:
        (folder / name).write_bytes((faces_dir / "obama.jpg").read_bytes() * frames)
    out = tmp_path / "out"
    code, lines = _run(["video", str(folder), str(out), *FAST], tmp_path, isolated_env)
    assert code == 0, lines
    written = Path(name).stem + ".mp4"
    assert [p.name for p in out.iterdir()] == [written]
    info = probe(out / written)
    assert info["frames"] == frames and info["rate"] == rate


class OneFaceEngine(FlipEngine):
    """A FlipEngine that finds one face big enough to change in every frame (40 px between the
    eyes) and changes it."""

    def analyse(self, packet: FramePacket, track: bool) -> None:
        kps = np.array([[50, 50], [90, 50], [70, 65], [55, 80], [85, 80]], np.float32)
        packet.faces = [Face(bbox=np.array([30.0, 20.0, 110.0, 100.0], np.float32), score=0.9, kps=kps)]


def test_the_folder_summary_counts_the_faces_swapped_in_every_file(tmp_path: Path, one_bar: list[Parts],
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A folder run's total says how many faces were swapped, as one file's summary does ('20
    faces swapped'); it gave the frames only."""
    monkeypatch.setattr(video, "create_engine", lambda job: OneFaceEngine())
    clips = tmp_path / "clips"
    clips.mkdir()
    make_clip(clips / "a.mp4", frames=12, audio=False)
    make_clip(clips / "b.mp4", frames=8, audio=False)
    out = tmp_path / "out"
    with caplog.at_level("INFO", logger="livecam"):
        video.run_video(_folder_job(clips, out))
    said = [r.getMessage() for r in caplog.records]
    total = [line for line in said if line.startswith(f"2 of 2 files written to {out} (20 frames in ")]
    assert len(total) == 1, said
    assert total[0].endswith(" fps, 20 faces swapped)"), total


@pytest.mark.parametrize("cluster", [None, ClusterSettings(address="local")], ids=["here", "cluster"])
def test_a_folder_run_that_writes_nothing_leaves_no_folder_it_made(tmp_path: Path, clips: Path,
                                                                    one_bar: list[Parts],
                                                                    cluster: ClusterSettings | None) -> None:
    """Every file failed: the output folder the run created (parents too) was left behind
    empty. It is removed; a folder that was there before stays, empty or not."""
    for name in ("a.mp4", "b.mkv"):
        (clips / name).unlink()  # broken.mp4 is left: it fails its checks, before any worker starts
    made = tmp_path / "made" / "out"
    with pytest.raises(LivecamError, match="0 of 1 files written"):
        video.run_video(_folder_job(clips, made), cluster)
    assert not (tmp_path / "made").exists()
    there = tmp_path / "there"
    there.mkdir()
    with pytest.raises(LivecamError, match="0 of 1 files written"):
        video.run_video(_folder_job(clips, there), cluster)
    assert there.is_dir() and not list(there.iterdir())
