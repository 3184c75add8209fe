"""A video in segments, in this process (no Ray): the joined output equals the whole-file run.

The engine is a fake whose output depends on the past (a running mean of the frames, reset when
time goes back, like the tracker's smoothing), so a segment without its warm-up would differ.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Callable

import av
import numpy as np
import pytest

from livecam.errors import InputError
from livecam.faces.analyser import FaceAnalyser, ModelNames
from livecam.faces.face import Face
from livecam.faces.tracking import FaceTracker
from livecam.frame import FramePacket
from livecam.pipeline.engine import Engine
from livecam.media.video_writer import encoder_available
from livecam.pipeline.file import RunStats, process_video
from livecam.pipeline.segments import SegmentResult, default_overlap_seconds, joined_stats, plan_job, process_segmented
from livecam.settings import AnalysisSettings, ProcessingSettings, RuntimeSettings, VideoJob
from tests.doubles import NoModels
from tests.pipeline.test_file_smoothing import CPU, Marker
from tests.videos import (_write_tone, cut_short_lines, label_corners, make_clip, make_offset_mkv, make_vfr_clip, probe,
                          read_index,
                          stamp_index, synthetic_frame, video_end)


class SmoothingEngine(NoModels):
    """contracts.FileEngine with a memory: track() keeps a running mean of the frame's grey (a
    new one after reset_tracking() or when time goes back), process() paints it as a block, so
    every output frame depends on the frames before it."""

    tracks = True

    def __init__(self) -> None:
        self.state: float | None = None
        self.last: float | None = None

    def analyse(self, packet: FramePacket, track: bool) -> None:
        packet.faces = []

    def detect(self, packet: FramePacket) -> None:
        packet.faces = []

    def reset_tracking(self) -> None:
        self.state = self.last = None

    def track(self, packet: FramePacket) -> None:
        assert packet.pts is not None
        if self.last is not None and packet.pts < self.last:
            self.state = None
        self.last = packet.pts
        if packet.image.shape[0] < 16:  # no picture (no face, for the tracker): only the clock moves
            return
        grey = float(packet.image[..., 0].mean())
        self.state = grey if self.state is None else 0.5 * self.state + 0.5 * grey
        packet.faces = []
        packet.timings["state"] = self.state

    def process(self, packet: FramePacket) -> None:
        value = int(round(packet.timings.get("state", 0.0)))
        packet.image[16:40, 40:80] = value


def make_coded_clip(path: Path, *, codec: str, options: dict[str, str], frames: int = 90, fps: int = 30,
                    audio_codec: str | None = "aac", size: tuple[int, int] = (160, 120)) -> Path:
    rate = Fraction(fps)
    with av.open(str(path), "w") as out:
        vs = out.add_stream(codec, rate=rate)
        vs.width, vs.height = size
        vs.pix_fmt = "yuv420p"
        vs.codec_context.options = options
        audio = None
        if audio_codec is not None:
            audio = out.add_stream(audio_codec, rate=48000)
            audio.layout = "mono"
        for i in range(frames):
            img = synthetic_frame(i, size)
            stamp_index(img, i)
            frame = av.VideoFrame.from_ndarray(img, format="bgr24")
            frame.pts, frame.time_base = i, 1 / rate
            for packet in vs.encode(frame):
                out.mux(packet)
        for packet in vs.encode():
            out.mux(packet)
        if audio is not None:
            _write_tone(out, audio, frames / fps, 48000)
    return path


def job_for(clip: Path, output: Path, encoder: str, **changes: object) -> VideoJob:
    runtime = RuntimeSettings(execution_threads=2, quiet=True)
    # quality 4: near-lossless, so the encoder's own differences at the cuts (each part starts
    # with a keyframe) stay under a grey level and what is compared is the processing; libx264
    # lossless (0): its lossy output differs from run to run under load (its threaded look-ahead
    # with the input's millisecond timestamps), by up to 6 levels at quality 4
    job = VideoJob(input=clip, output=output, processing=ProcessingSettings(sources=(), runtime=runtime),
                   encoder=encoder, quality=0 if encoder == "libx264" else 4, watermark=False, label=False)
    return replace(job, **changes)  # type: ignore[arg-type]


CASES = {
    # B-frames, one keyframe in 3 s: cuts fall between keyframes, warm-ups seek back to one
    "h264-bframes-long-gop": ("libx264", {"preset": "ultrafast", "bf": "3", "g": "90", "crf": "18",
                                          "x264-params": "scenecut=0"}, "aac", ".mp4", "libx264"),
    "hevc-open-gop": ("libx265", {"preset": "ultrafast", "crf": "18",
                                  "x265-params": "open-gop=1:keyint=40:min-keyint=40:bframes=3:log-level=error"},
                      "aac", ".mp4", "libx265"),
    "vp9-opus-webm": ("libvpx-vp9", {"deadline": "realtime", "cpu-used": "8", "g": "45", "crf": "20", "b": "0"},
                      "libopus", ".webm", "libvpx-vp9"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_segments_joined_equal_the_whole_file_run(tmp_path: Path, case: str) -> None:
    codec, options, audio_codec, suffix, encoder = CASES[case]
    if not encoder_available(codec):
        pytest.skip(f"this FFmpeg cannot encode {codec}")
    clip = make_coded_clip(tmp_path / f"in{suffix}", codec=codec, options=options, audio_codec=audio_codec)
    whole = job_for(clip, tmp_path / f"whole{suffix}", encoder)
    process_video(whole, SmoothingEngine(), quiet=True)
    split = job_for(clip, tmp_path / f"split{suffix}", encoder)
    plan, results = process_segmented(split, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.5)
    assert len(plan.segments) == 3

    a, b = probe(whole.output), probe(split.output)
    assert b["frames"] == a["frames"] == 90
    assert b["times"] == a["times"]
    assert b["audio_duration"] == pytest.approx(a["audio_duration"], abs=1e-6)
    assert b["audio_codec"] == a["audio_codec"]
    assert b["metadata"].get("comment") == a["metadata"].get("comment")
    for i, (x, y) in enumerate(zip(a["images"], b["images"])):
        # the painted block carries the running mean: equal only when the warm-up worked
        assert abs(float(x[16:40, 40:80].mean()) - float(y[16:40, 40:80].mean())) <= 1.0, i
        assert abs(float(x.mean()) - float(y.mean())) <= 1.0, i  # the frame's grey level
        # pixel by pixel: only the encoder's own noise (the parts start with their own keyframes)
        assert float(np.abs(x.astype(int) - y.astype(int)).mean()) <= 2.0, i


def test_without_warm_up_the_segments_start_elsewhere(tmp_path: Path) -> None:
    """The fake's memory is what the warm-up is for: with no overlap the second segment's
    first frame differs from the whole run's (so the test above can fail)."""
    codec, options, _, _, encoder = CASES["h264-bframes-long-gop"]
    clip = make_coded_clip(tmp_path / "in.mp4", codec=codec, options=options, audio_codec=None)
    whole = job_for(clip, tmp_path / "whole.mp4", encoder)
    process_video(whole, SmoothingEngine(), quiet=True)
    split = job_for(clip, tmp_path / "split.mp4", encoder)
    plan, _ = process_segmented(split, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.0)
    first = plan.segments[1].first
    a, b = probe(whole.output)["images"][first], probe(split.output)["images"][first]
    assert abs(float(a[16:40, 40:80].mean()) - float(b[16:40, 40:80].mean())) > 2


def test_frame_range_counts_in_the_whole_file(tmp_path: Path) -> None:
    codec, options, _, _, encoder = CASES["h264-bframes-long-gop"]
    clip = make_coded_clip(tmp_path / "in.mp4", codec=codec, options=options, audio_codec=None)
    whole = job_for(clip, tmp_path / "whole.mp4", encoder, frame_range=(20, 70))
    process_video(whole, SmoothingEngine(), quiet=True)
    split = job_for(clip, tmp_path / "split.mp4", encoder, frame_range=(20, 70))
    process_segmented(split, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.5)
    a, b = probe(whole.output)["images"], probe(split.output)["images"]
    assert len(a) == len(b) == 90
    for i, (x, y) in enumerate(zip(a, b)):
        assert abs(float(x[16:40, 40:80].mean()) - float(y[16:40, 40:80].mean())) <= 1.0, i
    # outside the range nothing was painted: the synthetic frame's own pixels stay
    assert abs(float(b[5][16:40, 40:80].mean()) - float(b[50][16:40, 40:80].mean())) > 2


def test_fps_with_a_cluster_is_refused(tmp_path: Path) -> None:
    job = job_for(tmp_path / "in.mp4", tmp_path / "out.mp4", "libx264", fps=24.0)
    with pytest.raises(InputError, match="--fps cannot be combined with --cluster"):
        plan_job(job, 60.0, None)


def test_default_overlap_follows_the_smoothing() -> None:
    assert default_overlap_seconds(0.0) == 0.0
    # the default strength's still cut-off is 0.3 Hz: a time constant of 0.53 s
    assert 2.0 < default_overlap_seconds(0.5) < 3.5
    assert default_overlap_seconds(0.8) > default_overlap_seconds(0.5)


@pytest.mark.parametrize("case", list(CASES))
def test_segments_from_chunks_equal_the_segments_from_the_path(tmp_path: Path, case: str) -> None:
    """A worker without the input decodes its segment's stream-copied packets: the joined output
    is the path-based one (same frames, times, audio; the same encoder input)."""
    codec, options, audio_codec, suffix, encoder = CASES[case]
    if not encoder_available(codec):
        pytest.skip(f"this FFmpeg cannot encode {codec}")
    clip = make_coded_clip(tmp_path / f"in{suffix}", codec=codec, options=options, audio_codec=audio_codec)
    by_path = job_for(clip, tmp_path / f"path{suffix}", encoder)
    process_segmented(by_path, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.5)
    by_chunk = job_for(clip, tmp_path / f"chunks{suffix}", encoder)
    process_segmented(by_chunk, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.5, chunks=True)
    a, b = probe(by_path.output), probe(by_chunk.output)
    assert b["frames"] == a["frames"] == 90
    assert b["times"] == a["times"]
    assert b["audio_duration"] == pytest.approx(a["audio_duration"], abs=1e-6)
    for i, (x, y) in enumerate(zip(a["images"], b["images"])):
        assert int(np.abs(x.astype(int) - y.astype(int)).max()) <= 1, i


def test_chapters_are_copied_by_a_segmented_run_too(tmp_path: Path) -> None:
    from tests.pipeline.test_file import _chapters
    from tests.videos import clip_with_chapters

    clip = clip_with_chapters(tmp_path / "chapters.mkv")
    split = job_for(clip, tmp_path / "split.mkv", "libx264")
    process_segmented(split, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.5)
    assert _chapters(split.output) == [("Intro", 0.0, 1.0), ("Main", 1.0, 2.0)]


def test_subtitles_are_copied_by_a_segmented_run_too(tmp_path: Path) -> None:
    from tests.pipeline.test_file import _CUES, _cues, _with_subtitles
    from tests.videos import make_timed_clip

    base = make_timed_clip(tmp_path / "base.mkv", frames=60, size=(64, 48), audio_codec=None)
    clip = _with_subtitles(base, tmp_path / "subs.mkv", tmp_path, shift=0.0)
    split = job_for(clip, tmp_path / "split.mp4", "libx264")
    process_segmented(split, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.5)
    assert _cues(split.output) == ("mov_text", _CUES, ("eng", "English"))


class FaceInTheCorner(NoModels):
    """contracts.FileEngine that finds one face, in the bottom-right corner, from 0.5 s to 0.8 s
    (no smoothing: the warm-up has nothing to warm but the label), and changes no pixel."""

    tracks = False
    box = np.array([100.0, 70.0, 160.0, 120.0])

    def analyse(self, packet: FramePacket, track: bool) -> None:
        from livecam.faces.face import Face

        assert packet.pts is not None
        kps = np.array([[115, 85], [145, 85], [130, 95], [118, 108], [142, 108]], np.float32)
        face = Face(bbox=self.box.astype(np.float32), score=0.9, kps=kps)
        packet.faces = [face] if 0.5 - 1e-6 <= packet.pts <= 0.8 + 1e-6 else []

    def detect(self, packet: FramePacket) -> None:
        self.analyse(packet, track=False)

    def track(self, packet: FramePacket) -> None:
        pass

    def process(self, packet: FramePacket) -> None:
        pass


@pytest.mark.parametrize("smoothing", [0.5, 0.0])  # 0: no warm-up for the tracker, one for the label
def test_the_label_does_not_jump_at_a_segment_join(tmp_path: Path, smoothing: float) -> None:
    """A face near the bottom-right corner just before a join moved the label away; the next
    segment started bottom-right again (each segment had its own placement from scratch), so the
    label jumped there while the whole-file run kept it away."""
    codec, options, _, _, encoder = CASES["h264-bframes-long-gop"]
    clip = make_coded_clip(tmp_path / "in.mp4", codec=codec, options=options, audio_codec=None)
    whole = job_for(clip, tmp_path / "whole.mp4", encoder, label=True)
    whole = replace(whole, processing=replace(whole.processing, analysis=replace(
        whole.processing.analysis, smoothing=smoothing)))
    process_video(whole, FaceInTheCorner(), quiet=True)
    split = replace(whole, output=tmp_path / "split.mp4")
    plan, _ = process_segmented(split, FaceInTheCorner(), segment_seconds=1.0)  # the default overlap
    join = plan.segments[1].first
    assert join == 30
    plain = probe(clip)["images"]
    a = label_corners(probe(whole.output)["images"], plain)
    b = label_corners(probe(split.output)["images"], plain)
    assert b == a  # the segmented run places it as the whole-file run does, across the joins too
    # away from the face from 0.5 s over the join, back a second after the face left (0.8 s)
    assert a[0] == "bottom-right" and a[join - 1] == a[join] == "bottom-left" and a[-1] == "bottom-right"
    assert sum(x != y for x, y in zip(a, a[1:])) == 2


def test_the_joined_output_keeps_the_inputs_start_timecode(tmp_path: Path) -> None:
    """The join writes the input's timecode once, as the whole-file run does (a tmcd track in a MOV)."""
    if int(av.__version__.split(".")[0]) < 18:
        pytest.skip(f"PyAV {av.__version__} writes no timecode for a stream added from a template")
    clip = make_clip(tmp_path / "in.mov", frames=60, size=(96, 64), timecode="01:00:00:00")
    split = job_for(clip, tmp_path / "split.mov", "libx264")
    plan, _ = process_segmented(split, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.5)
    assert len(plan.segments) == 2
    with av.open(str(split.output)) as c:
        assert c.streams.video[0].metadata.get("timecode") == "01:00:00:00"
        assert [s.metadata.get("timecode") for s in c.streams if s.type == "data"] == ["01:00:00:00"]


@pytest.mark.parametrize("kind", ["faststart.mp4", "mkv"])
def test_a_cut_short_input_is_said_once_by_a_segmented_run_too(tmp_path: Path, kind: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    # A whole-file run says how much of a cut recording could be read; a segmented run (its one
    # demux pass, no decoding on the driver) wrote the frames before the cut without a word.
    import logging

    from tests.pipeline.test_file import _cut_recording
    from tests.videos import read_index

    cut = _cut_recording(tmp_path, kind)
    out = tmp_path / "out.mkv"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        _, results = process_segmented(job_for(cut, out, "libx264"), SmoothingEngine(), segment_seconds=0.4)
    written = [read_index(image) for image in probe(out)["images"]]
    assert written == list(range(len(written))) and 10 < len(written) < 60
    said = [r.getMessage() for r in caplog.records if "could be read" in r.getMessage()]
    assert len(said) == 1 and f"{len(written)} " in said[0] and said[0].endswith("; the output stops there"), said


def test_a_ts_cut_before_its_first_keyframe_is_split_from_that_keyframe_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The plan counted the frames before the first keyframe, which no decoder gives: "segment 1 of
    # 4 (frames 0-12): decoded 0 frames where the plan has 13; the file is damaged there".
    import logging

    from tests.videos import make_headless_ts, read_index

    cut = make_headless_ts(tmp_path / "cut.ts", frames=60, gop=15, cut=2)
    out = tmp_path / "out.mp4"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        process_segmented(job_for(cut, out, "libx264"), SmoothingEngine(), segment_seconds=0.5)
    got, given = probe(out), probe(cut)
    assert [read_index(image) for image in got["images"]] == list(range(15, 60))
    # frame 15 comes as long after the sound's start as in the input
    assert got["times"][0] - got["audio_start"] == pytest.approx(given["times"][0] - given["audio_start"], abs=1 / 60)
    said = [r.getMessage() for r in caplog.records if "keyframe" in r.getMessage()]
    assert len(said) == 1 and "its first 13 frames (0.43 s)" in said[0], said


def test_a_joined_files_counts_are_every_field_of_its_segments_summed() -> None:
    """joined_stats summed RunStats' fields by hand, one by one: seconds, stage_ms and interrupted
    were left out, as any field added later would have been. Every field is set here."""
    from dataclasses import fields

    from livecam.media.join import EncodedPart

    def stats(n: int) -> RunStats:
        made = RunStats()
        for f in fields(RunStats):
            value = getattr(made, f.name)
            setattr(made, f.name, True if isinstance(value, bool) else {"swap": float(n), f"own{n}": 1.0}
                    if isinstance(value, dict) else type(value)(n))
        return made

    part = EncodedPart(data=b"", format="matroska", time_base=Fraction(1, 30), times=())
    joined = joined_stats([SegmentResult(part, stats(2)), SegmentResult(part, stats(3))])
    for f in fields(RunStats):
        value = getattr(joined, f.name)
        if isinstance(value, bool):
            assert value is True, f.name
        elif isinstance(value, dict):
            assert value == {"swap": 5.0, "own2": 1.0, "own3": 1.0}, f.name
        else:
            assert value == 5, f.name
    assert RunStats.total([]) == RunStats()


class Appearing(SmoothingEngine):
    """Puts someone else's file at `path` while frame 45 is processed (mid-run)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def process(self, packet: FramePacket) -> None:
        if packet.index == 45:
            self.path.write_bytes(b"someone else's file")
        super().process(packet)


@pytest.mark.parametrize("force", [False, True])
def test_a_file_that_appears_at_the_output_during_a_segmented_run_is_kept(tmp_path: Path, force: bool) -> None:
    """The join opened the output only at the end: a file that appeared during the run failed it
    with 'exists; add --force' (exit 2, every segment's work lost), and with --force was replaced
    though it was not there when the run started. A whole-file run keeps that file and the
    result beside it (OutputConflictError, exit 1); so does a segmented one now."""
    from livecam.atomic import OutputConflictError

    codec, options, _, _, encoder = CASES["h264-bframes-long-gop"]
    clip = make_coded_clip(tmp_path / "in.mp4", codec=codec, options=options, audio_codec=None)
    job = job_for(clip, tmp_path / "out.mp4", encoder, force=force)
    with pytest.raises(OutputConflictError) as conflict:
        process_segmented(job, Appearing(job.output), segment_seconds=1.0, overlap_seconds=0.5)
    assert conflict.value.exit_code == 1
    assert job.output.read_bytes() == b"someone else's file"
    kept = tmp_path / "out.livecam-1.mp4"
    assert conflict.value.kept == kept and f"the result was kept as {kept}" in conflict.value.message
    assert probe(kept)["frames"] == 90
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "out.livecam-1.mp4", "out.mp4"]


def test_a_cut_short_matroska_input_is_said_as_a_whole_file_run_says_it(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A Matroska file cut in half (no frame count; its header's duration says 3 s): a whole-file
    run warns that it ended early and the output stops there; a segmented run (the segments read
    with frames_from, which checks no end) wrote the shorter video without a word."""
    whole_clip = make_clip(tmp_path / "whole.mkv", frames=90, size=(96, 64), audio=True)
    data = whole_clip.read_bytes()
    clip = tmp_path / "half.mkv"
    clip.write_bytes(data[: len(data) // 2])

    def warnings() -> list[str]:
        said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        caplog.clear()
        return said

    with caplog.at_level("WARNING", logger="livecam"):
        here = process_video(job_for(clip, tmp_path / "here.mkv", "libx264"), SmoothingEngine(), quiet=True)
        said_here = warnings()
        plan, _ = process_segmented(job_for(clip, tmp_path / "split.mkv", "libx264"), SmoothingEngine(),
                                    segment_seconds=1.0, overlap_seconds=0.5)
        said_split = warnings()
    ended = [line for line in said_here if "ended at" in line]
    assert ended == ["warning: half.mkv ended at 1.50 s of the 3.00 s its header announces (damaged or cut short): "
                     "45 frames could be read; the output stops there"], said_here
    assert said_split == ended  # once, not once a segment
    assert plan.frames == here.stats.frames == 45


def test_an_mkv_whose_audio_starts_before_its_video_is_not_called_cut_short(tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Audio from 0 s, video from 1 s to 3 s: the container's duration (3 s, from the timeline's
    0) was taken as the video's and added to its 1 s start, so both a whole-file run and a
    segmented one warned 'ended at 3.00 s of the 4.00 s its header announces (damaged or cut short)'."""
    from livecam.media.video_reader import VideoReader

    clip = make_offset_mkv(tmp_path / "late.mkv", frames=60, size=(96, 64), video_start=1.0, tone_start=0.0,
                           tone_seconds=3.0, sample_rate=48000)
    with VideoReader(clip) as reader:
        assert reader.info.start_time == pytest.approx(1.0, abs=0.01)
        assert reader.info.expected_frames in (60, 61)  # 2 s of video (and the AAC tail), not 3
    with caplog.at_level("WARNING", logger="livecam"):
        here = process_video(job_for(clip, tmp_path / "here.mkv", "libx264"), SmoothingEngine(), quiet=True)
        process_segmented(job_for(clip, tmp_path / "split.mkv", "libx264"), SmoothingEngine(), segment_seconds=1.0,
                          overlap_seconds=0.5)
    assert here.stats.frames == 60
    assert not [r.getMessage() for r in caplog.records if "ended at" in r.getMessage()]


class RankFlipAtTheJoin:
    """Two faces a pixel apart in size: the left one larger, but for frames 28-31 (around the
    join at frame 30) the right one, as when a face turns away for a moment."""

    def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
        flipped = 28 <= read_index(image) <= 31

        def at(x: float, size: float) -> Face:
            kps = np.array([[x + 0.3 * size, 40], [x + 0.7 * size, 40], [x + 0.5 * size, 55],
                            [x + 0.35 * size, 65], [x + 0.65 * size, 65]], np.float32)
            return Face(bbox=np.array([x, 20, x + size, 20 + size], np.float32), score=0.9, kps=kps)

        return [at(0, 60 if flipped else 61), at(80, 61 if flipped else 60)]


def test_the_one_face_is_kept_across_a_segment_join_at_smoothing_0(tmp_path: Path) -> None:
    """At --smoothing 0 the default overlap was 0: a segment chose "the one" face on its first
    frame alone, so a moment's rank flip at the join switched faces where the whole-file run
    kept the face it had (selection.keep_previous)."""
    codec, options, _, _, encoder = CASES["h264-bframes-long-gop"]
    clip = make_coded_clip(tmp_path / "in.mp4", codec=codec, options=options, audio_codec=None)

    def chosen(run: Callable[[VideoJob, Engine], object], output: str) -> list[float]:
        job = job_for(clip, tmp_path / output, encoder)
        analysis = AnalysisSettings(smoothing=0.0)
        job = replace(job, processing=replace(job.processing, analysis=analysis))
        marker = Marker()
        analyser = FaceAnalyser(RankFlipAtTheJoin(), analysis, names=ModelNames("fake"), tracker=FaceTracker(0.0))
        run(job, Engine(job.processing, analyser, [marker], [], providers=CPU, swap_model=None))
        return [float(f.bbox[0]) for i in range(90) for f in marker.faces[i]]

    whole = chosen(lambda job, engine: process_video(job, engine, quiet=True), "whole.mp4")
    split = chosen(lambda job, engine: process_segmented(job, engine, segment_seconds=1.0), "split.mp4")
    assert whole == [0.0] * 90  # the whole-file run keeps the left face through the flip
    assert split == whole, [i for i, (a, b) in enumerate(zip(whole, split)) if a != b]


@pytest.mark.parametrize("fmt,chunks", [("mkv", False), ("mp4", True)], ids=["mkv", "mp4-chunks"])
def test_a_variable_rate_clip_split_ends_where_it_does_whole(tmp_path: Path, fmt: str, chunks: bool) -> None:
    # a phone's MP4 (B-frames: packet durations in decode order) with gaps: the joined video ended
    # 0.35 s early (a part's last frame lasted one of its packets' durations, in the wrong time base)
    times = [0.0, 0.033, 0.066, 0.133, 0.166, 0.233, 0.6, 0.7, 0.75, 1.2, 1.25, 1.3, 1.9]
    clip = make_vfr_clip(tmp_path / "phone.mp4", times, 0.4, bframes=True)
    whole = job_for(clip, tmp_path / f"whole.{fmt}", "libx264")
    process_video(whole, SmoothingEngine(), quiet=True)
    split = job_for(clip, tmp_path / f"split.{fmt}", "libx264")
    plan, _ = process_segmented(split, SmoothingEngine(), segment_seconds=1.0, overlap_seconds=0.5, chunks=chunks)
    assert len(plan.segments) > 1
    assert probe(split.output)["times"] == pytest.approx(probe(whole.output)["times"], abs=1e-3)
    assert video_end(split.output) == pytest.approx(video_end(whole.output), abs=2e-3)
    assert video_end(whole.output) == pytest.approx(times[-1] + 0.4, abs=0.03)  # (+ the AAC priming in Matroska)


@pytest.mark.parametrize("kind, chunks, at_the_cut", [("faststart.mp4", False, False), ("faststart.mp4", True, False),
                                                     ("faststart.mp4", False, True), ("mkv", False, False)])
def test_a_cut_short_input_split_is_written_as_a_whole_file_run_writes_it(
        tmp_path: Path, kind: str, chunks: bool, at_the_cut: bool, caplog: pytest.LogCaptureFixture) -> None:
    """A cut MP4 whose last packet was cut through (38 packets, 37 frames decode): its last
    segment failed, 'decoded 7 frames where the plan has 8' (exit 2), where a whole-file run
    writes the 37 frames with one warning, and the plan's warning counted 38. A cut Matroska
    file's last frame lasted to the 2 s its header states: the output froze 0.7 s past where
    the whole-file run's ends. `at_the_cut`: the last segment is the packet that does not decode
    alone (it failed the run where it decoded nothing)."""
    from tests.pipeline.test_file import _cut_recording

    cut = _cut_recording(tmp_path, kind, audio=False)

    def said() -> list[str]:
        lines = cut_short_lines([r.getMessage() for r in caplog.records])
        caplog.clear()
        return lines

    with caplog.at_level("WARNING", logger="livecam"):
        here = process_video(job_for(cut, tmp_path / "here.mkv", "libx264"), SmoothingEngine(), quiet=True)
        said_here = said()
        seconds = here.stats.frames / 30 - 0.001 if at_the_cut else 1.0  # cut at the first frame that does not decode
        plan, _ = process_segmented(job_for(cut, tmp_path / "split.mkv", "libx264"), SmoothingEngine(),
                                    segment_seconds=seconds, overlap_seconds=0.5, chunks=chunks)
        said_split = said()
    whole, split = probe(tmp_path / "here.mkv"), probe(tmp_path / "split.mkv")
    assert [read_index(image) for image in split["images"]] == [read_index(image) for image in whole["images"]]
    assert len(split["images"]) == here.stats.frames < 60
    assert video_end(tmp_path / "split.mkv") == pytest.approx(video_end(tmp_path / "here.mkv"), abs=2e-3)
    assert len(said_here) == 1 and said_split == said_here, (said_here, said_split)
    if at_the_cut:
        # its last segment holds only packets that do not decode (one; two in PyAV 17, which also
        # reports the one before the cut as corrupt)
        assert plan.segments[-1].first == here.stats.frames < plan.segments[-1].end
