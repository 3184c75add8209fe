"""Batch mode in-process: the plan of a folder, the local runner with a fake engine, one bar over
every file, the summary and its exit code."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from livecam.errors import EXIT_FAILURE, EXIT_USAGE, InputError, LivecamError, OutputError
from livecam.faces.analyser import FaceAnalyser, ModelNames
from livecam.faces.face import Face
from livecam.faces.tracking import FaceTracker
from livecam.frame import FramePacket
from livecam.pipeline.batch import FileOutcome, is_folder_run, plan_folder, run_batch, summarize
from livecam.pipeline.file import RunStats
from livecam.pipeline.engine import Engine
from livecam.pipeline.progress import Parts, Progress
from livecam.settings import AnalysisSettings, ProcessingSettings, RuntimeSettings, VideoJob
from tests.doubles import CPU, FlipEngine
from tests.videos import make_clip, probe, read_index


def _template(folder: Path, out: Path, **kw: object) -> VideoJob:
    processing = ProcessingSettings(sources=(folder / "face.jpg",), runtime=RuntimeSettings(quiet=True))
    return VideoJob(input=folder, output=out, processing=processing, watermark=False, **kw)  # type: ignore[arg-type]


def _files(folder: Path, sizes: dict[str, int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, size in sizes.items():
        (folder / name).write_bytes(b"x" * size)


def test_plan_takes_the_video_files_largest_first_with_their_own_container_or_mp4(tmp_path: Path) -> None:
    clips, out = tmp_path / "clips", tmp_path / "out"
    _files(clips, {"small.mp4": 10, "BIG.MOV": 300, "old.avi": 200, "cam.mts": 100, "web.webm": 50,
                   ".hidden.mp4": 999, "notes.txt": 999, "cover.gif": 999})
    (clips / "sub").mkdir()
    (clips / "sub" / "deep.mp4").write_bytes(b"x" * 999)
    plan = plan_folder(_template(clips, out), None, skip_existing=False)
    assert [(j.input.name, j.output) for j in plan.jobs] == [
        ("BIG.MOV", out / "BIG.MOV"), ("old.avi", out / "old.mp4"), ("cam.mts", out / "cam.mp4"),
        ("web.webm", out / "web.webm"), ("small.mp4", out / "small.mp4")]
    assert plan.decided == ()
    assert all(j.processing == plan.jobs[0].processing and not j.watermark for j in plan.jobs)  # the template's settings


def test_pattern_chooses_file_names_and_a_folder_with_nothing_to_do_is_one_clear_error(tmp_path: Path) -> None:
    clips, out = tmp_path / "clips", tmp_path / "out"
    _files(clips, {"a.mp4": 1, "b.mkv": 1, "c.gif": 1})
    assert [j.input.name for j in plan_folder(_template(clips, out), "*.gif", skip_existing=False).jobs] == ["c.gif"]
    assert [j.output.name for j in plan_folder(_template(clips, out), "*.gif", skip_existing=False).jobs] == ["c.mp4"]
    with pytest.raises(InputError, match=r"no files matching '\*.mov' in .*clips; check the pattern") as exc:
        plan_folder(_template(clips, out), "*.mov", skip_existing=False)
    assert "give --pattern" not in str(exc.value)  # it was given
    with pytest.raises(InputError, match=r"--pattern is case-sensitive: 'b.mkv' differs only in case"):
        plan_folder(_template(clips, out), "*.MKV", skip_existing=False)
    with pytest.raises(InputError, match="not paths; subfolders are not searched"):
        plan_folder(_template(clips, out), "sub/*.mp4", skip_existing=False)
    with pytest.raises(InputError, match="is the input folder"):
        plan_folder(_template(clips, clips), None, skip_existing=False)


def test_two_inputs_for_one_output_and_skip_existing_are_decided_in_the_plan(tmp_path: Path) -> None:
    clips, out = tmp_path / "clips", tmp_path / "out"
    _files(clips, {"x.mp4": 20, "x.avi": 10, "y.mkv": 5})
    _files(out, {"y.mkv": 1})
    plan = plan_folder(_template(clips, out), None, skip_existing=True)
    assert [j.input.name for j in plan.jobs] == ["x.mp4"]
    clash, skipped = plan.decided
    assert clash.job.input.name == "x.avi" and clash.failed
    assert clash.error is not None and "x.avi and x.mp4 would both be written to" in clash.error.message
    assert skipped.job.input.name == "y.mkv" and skipped.skipped and not skipped.failed


def test_a_folder_input_needs_a_folder_output(tmp_path: Path) -> None:
    clips = tmp_path / "clips"
    _files(clips, {"a.mp4": 1})
    assert is_folder_run(_template(clips, tmp_path / "new"))  # created later
    assert is_folder_run(_template(clips, tmp_path / "take.v2"))  # a folder name with a dot
    with pytest.raises(InputError, match="is a folder, so the output must be a folder too, not a file like"):
        is_folder_run(_template(clips, tmp_path / "out.mp4"))
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(InputError, match="must be a folder too"):
        is_folder_run(_template(clips, tmp_path / "file"))
    assert not is_folder_run(replace(_template(clips, tmp_path / "o"), input=clips / "a.mp4"))


def test_parts_set_their_counts_so_a_restarted_part_counts_once() -> None:
    bar = Progress(100, quiet=True)
    parts = Parts(bar)
    parts.report("a", 30)
    parts.report("b", 10)
    parts.report("b", 4)  # b started again (a retried segment)
    counter = parts.counter("c")
    counter.advance()
    counter.advance(2)
    assert bar.done == 30 + 4 + 3 and bar.total == 100


def test_run_batch_goes_on_after_a_broken_file_on_one_bar(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clips, out = tmp_path / "clips", tmp_path / "out"
    clips.mkdir()
    out.mkdir()
    make_clip(clips / "a.mp4", frames=12, stamp=True)
    make_clip(clips / "b.mkv", frames=8, stamp=True, audio=False)
    make_clip(clips / "c.mp4", frames=10, stamp=True)
    plan = plan_folder(_template(clips, out), None, skip_existing=False)
    data = (clips / "c.mp4").read_bytes()
    (clips / "c.mp4").write_bytes(data[: len(data) // 3])  # broken after its checks
    bar = Progress(30, quiet=True)
    outcomes = run_batch(plan.jobs, FlipEngine(), parts=Parts(bar))
    by_name = {o.job.input.name: o for o in outcomes}
    assert [o.frames for o in outcomes if not o.failed] == [12, 8]
    assert by_name["c.mp4"].failed and isinstance(by_name["c.mp4"].error, InputError)
    assert "c.mp4" in by_name["c.mp4"].error.message
    assert sorted(p.name for p in out.iterdir()) == ["a.mp4", "b.mkv"]  # nothing of c, no temporary file
    for name, frames in (("a.mp4", 12), ("b.mkv", 8)):
        info = probe(out / name)
        assert [read_index(img) for img in info["images"]] == list(range(frames))
        assert all(img[100:108, :8, 1].mean() < 80 for img in info["images"])  # green ~214 inverted: the engine ran
    assert bar.done == 20  # every frame written, once, on the one bar
    caplog.set_level(logging.INFO, logger="livecam")
    error = summarize(outcomes, seconds=1.0)
    assert error is not None and error.exit_code == EXIT_USAGE  # a bad input, as for one file
    assert error.message.startswith(f"2 of 3 files written to {out} (20 frames in 1.0 s")
    assert error.message.endswith(", 1 failed")
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lines) == 1 and lines[0].startswith("error: cannot read ") and lines[0].count("c.mp4") == 1, lines


def test_summary_names_each_failed_file_once_and_counts_it(caplog: pytest.LogCaptureFixture) -> None:
    clips, out = Path("clips"), Path("out")
    job = replace(_template(clips, out), input=clips / "a.mp4", output=out / "a.mp4")
    read = FileOutcome(job, error=InputError(f"cannot read {clips / 'a.mp4'} as a video; give a video file"))
    link = FileOutcome(job, error=InputError("a.mp4 is a link to nowhere.mp4, which does not exist"))
    disk = FileOutcome(job, error=OutputError(f"writing {out / 'a.mp4'} failed: the disk is full"))
    caplog.set_level(logging.INFO, logger="livecam")
    error = summarize([read, link, disk], 1.0)
    assert error is not None and error.message.endswith(", 3 failed")
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert lines == [f"error: cannot read {clips / 'a.mp4'} as a video; give a video file",
                     "error: a.mp4 is a link to nowhere.mp4, which does not exist",
                     # the output's path ends in the same name but is not the input: the input is named first
                     f"error: a.mp4: writing {out / 'a.mp4'} failed: the disk is full"], lines


@pytest.mark.parametrize("reason, named", [
    # by its path as given, absolute, or its bare name: as is
    ("cannot read clips/a.mp4 as a video", True),
    ("cannot read {absolute} as a video", True),
    ("a.mp4: no video stream", True),
    # the same name in another folder is another file (was taken for the input, named nowhere then):
    # a linked output's target, the output in another spelling, a copy under the input's folder
    ("writing /mnt/backup/a.mp4 failed: the disk is full", False),
    ("writing ../out/a.mp4 failed: the disk is full", False),
    ("cannot replace out/clips/a.mp4", False),
    ("a file data.mp4 is in the way", False),  # a longer name ending in it
])
def test_a_failed_file_is_named_once_whatever_its_reason_says(reason: str, named: bool,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    clips, out = Path("clips"), Path("out")
    job = replace(_template(clips, out), input=clips / "a.mp4", output=out / "a.mp4")
    message = reason.format(absolute=(clips / "a.mp4").absolute())
    caplog.set_level(logging.INFO, logger="livecam")
    summarize([FileOutcome(job, error=InputError(message))], 1.0)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert lines[0] == (f"error: {message}" if named else f"error: a.mp4: {message}"), lines


def test_summary_exit_codes() -> None:
    job = _template(Path("clips"), Path("out"))
    ok = FileOutcome(job, RunStats(frames=5))
    skipped = FileOutcome(job, skipped=True)
    assert summarize([ok, skipped], 1.0) is None
    bad = FileOutcome(job, error=InputError("broken"))
    disk = FileOutcome(job, error=OutputError("disk full"))
    mixed = summarize([ok, bad, disk], 1.0)
    assert mixed is not None and mixed.exit_code == EXIT_FAILURE  # kinds differ: "other"
    only_output = summarize([ok, disk], 1.0)
    assert only_output is not None and only_output.exit_code == OutputError("x").exit_code
    assert isinstance(mixed, LivecamError) and "1 skipped" not in mixed.message
    assert "1 skipped (output already there)" in (summarize([skipped, bad], 1.0) or LivecamError("")).message


class TrackingEngine(FlipEngine):
    """A face at one place in every frame, smoothed by the real FaceTracker; keeps the track ids."""

    tracks = True

    def __init__(self) -> None:
        self.tracker = FaceTracker(smoothing=0.5)
        self.ids: list[int | None] = []
        self.resets: list[int] = []  # len(ids) at each reset_tracking()

    def reset_tracking(self) -> None:
        self.resets.append(len(self.ids))
        self.tracker.reset()

    def detect(self, packet: FramePacket) -> None:
        packet.faces = [Face(bbox=[40, 20, 72, 44], score=0.9, kps=np.full((5, 2), 50.0))]

    def track(self, packet: FramePacket) -> None:
        assert packet.pts is not None
        packet.faces = self.tracker.update(packet.faces, packet.pts)

    def process(self, packet: FramePacket) -> None:
        self.ids.append(packet.faces[0].track_id)


def test_each_file_starts_with_no_tracks_even_when_its_range_starts_later(tmp_path: Path) -> None:
    """The second file's first processed frame (1 s in) is later than the first file's last
    (0.13 s): without a fresh start its face would continue, and be smoothed towards, the first
    file's track."""
    clips, out = tmp_path / "clips", tmp_path / "out"
    clips.mkdir()
    out.mkdir()
    first = make_clip(clips / "first.mp4", frames=5, audio=False)
    second = make_clip(clips / "second.mp4", frames=36, audio=False)
    template = _template(clips, out)
    jobs = [replace(template, input=first, output=out / "first.mp4"),
            replace(template, input=second, output=out / "second.mp4", frame_range=(30, None))]
    engine = TrackingEngine()
    outcomes = run_batch(jobs, engine)
    assert not any(o.failed for o in outcomes)
    assert engine.resets == [0, 5]  # the engine is told before each file, through the contract
    assert engine.ids[:5] == [engine.ids[0]] * 5 and len(engine.ids) == 11
    assert engine.ids[5] != engine.ids[0] and engine.ids[5:] == [engine.ids[5]] * 6


class WidthDetector:
    """A still face whose place follows the frame's width: 8 px further right in a clip 8 px
    wider, near enough that a track left over from the narrower clip would take it."""

    def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
        shift = float(image.shape[1] - 160)
        kps = np.array([[52, 40], [76, 40], [64, 52], [55, 64], [73, 64]], np.float32) + [shift, 0.0]
        return [Face(bbox=np.array([40 + shift, 24, 88 + shift, 80], np.float32), score=0.9, kps=kps)]


class FaceLog:
    """A processor that keeps (frame width, face) for every processed frame."""

    name = "face_log"

    def __init__(self) -> None:
        self.seen: list[tuple[int, Face]] = []

    def prepare(self, sources: object) -> None:
        pass

    def process(self, packet: FramePacket) -> None:
        self.seen.append((packet.image.shape[1], packet.faces[0]))


def test_the_real_engine_forgets_the_first_files_smoothed_track(tmp_path: Path) -> None:
    """Engine.reset_tracking through the analyser's FaceTracker: the second file's first face
    (1 s in, later than the first file's last) is a new track at its detected place, not the
    first file's track smoothed towards it."""
    clips, out = tmp_path / "clips", tmp_path / "out"
    clips.mkdir()
    out.mkdir()
    first = make_clip(clips / "first.mp4", frames=5, size=(160, 120), audio=False)
    second = make_clip(clips / "second.mp4", frames=36, size=(168, 120), audio=False)
    template = _template(clips, out)
    jobs = [replace(template, input=first, output=out / "first.mp4"),
            replace(template, input=second, output=out / "second.mp4", frame_range=(30, None))]
    analysis = AnalysisSettings(smoothing=0.9)
    log = FaceLog()
    engine = Engine(replace(template.processing, analysis=analysis),
                    FaceAnalyser(WidthDetector(), analysis, names=ModelNames("fake"), tracker=FaceTracker(0.9)),
                    [log], [], providers=CPU, swap_model=None)
    assert engine.tracks
    outcomes = run_batch(jobs, engine)
    assert not any(o.failed for o in outcomes)
    firsts = {face.track_id for width, face in log.seen if width == 160}
    seconds = [face for width, face in log.seen if width == 168]
    assert len(firsts) == 1 and len(seconds) == 6
    assert seconds[0].track_id not in firsts
    detected = WidthDetector().detect(np.zeros((120, 168, 3), np.uint8))[0]
    assert all(np.allclose(face.kps, detected.kps, atol=1e-3) for face in seconds)


def test_reset_tracking_reaches_every_lane(tmp_path: Path, faces_dir: Path, standin_models: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine.reset_tracking forgets the tracks of the run's analyser and of each lane's (their
    own FaceTrackers): the same face, tracked again later, starts a new track everywhere."""
    import cv2

    from livecam.runtime import sessions
    from tests.runtime.test_lanes import settings, small

    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    source = small(faces_dir, "biden.jpg", tmp_path)
    engine = Engine.create(settings(standin_models, source, lanes=True, threads=2, smoothing=0.5),
                           live=False, progress=False)
    engines = [engine, *engine.lanes()]
    assert len(engines) == 3
    image = cv2.imread(str(source))

    def track_ids(pts: float) -> list[int | None]:
        ids = []
        for one in engines:
            packet = FramePacket(index=0, image=image.copy(), pts=pts)
            one.analyse(packet, track=True)
            ids.append(packet.faces[0].track_id)
        return ids

    try:
        first, kept = track_ids(0.0), track_ids(0.04)
        assert kept == first  # without a reset the face goes on with its track
        engine.reset_tracking()
        again = track_ids(0.08)
    finally:
        sessions.clear_pool()  # the stand-ins' sessions go with this test
    assert all(a != b for a, b in zip(again, first)), (first, again)


@pytest.mark.parametrize("skip_existing", [False, True])
def test_a_folder_where_a_files_output_goes_fails_that_file_with_a_fix_it_can_take(
        tmp_path: Path, skip_existing: bool) -> None:
    # check_job said "give a file name such as out/x.mp4/x.mp4", which a folder run cannot take;
    # --skip-existing counted the folder as x.mp4's finished output and skipped it
    clips, out = tmp_path / "clips", tmp_path / "out"
    _files(clips, {"x.mp4": 20, "y.mkv": 5})
    (out / "x.mp4").mkdir(parents=True)
    plan = plan_folder(_template(clips, out), None, skip_existing=skip_existing)
    assert [j.input.name for j in plan.jobs] == ["y.mkv"]
    (folder,) = plan.decided
    assert folder.failed and not folder.skipped and folder.error is not None
    assert folder.error.message == f"{out / 'x.mp4'} is a folder where the output of x.mp4 goes; move or rename that folder"
