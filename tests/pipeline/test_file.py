"""The file pipeline with fake engines: order, bounded memory, frame range, label, audio, errors."""

from __future__ import annotations

import logging
from collections import Counter
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from livecam.errors import Interrupted
from livecam.faces.face import Face
from livecam.frame import FramePacket
from livecam.pipeline.file import (
    OutFrame,
    frames_in_flight,
    packet_time,
    process_video,
    retime,
    run_frames,
)
from livecam.media.provenance import label_box
from livecam.media.video_reader import VideoReader
from livecam.settings import ProcessingSettings, RuntimeSettings, VideoJob
from tests.doubles import InFlight, NoModels
from tests.videos import (clip_with_chapters, count_frames, make_clip, make_headless_ts, make_timed_clip, probe,
                          read_index)

SQUARE = (slice(20, 44), slice(40, 72))  # rows, cols the fake engine inverts


class InvertEngine(NoModels):
    """Inverts a square and 'finds' a face there; optional per-frame delay and failure."""

    tracks = False  # contracts.FileEngine: no ordered tracking step

    def __init__(self, delay=None, fail_at: int | None = None, face: bool = True) -> None:  # type: ignore[no-untyped-def]
        self.delay = delay
        self.fail_at = fail_at
        self.face = face
        self.seen: list[int] = []
        self._lock = threading.Lock()

    def analyse(self, packet: FramePacket, track: bool) -> None:
        assert track is False
        packet.faces = [Face(bbox=[40, 20, 72, 44], score=0.9, kps=np.full((5, 2), 50.0))] if self.face else []
        packet.timings["detect"] = 1.0

    def detect(self, packet: FramePacket) -> None:  # a segment's warm-up frames, for the label
        self.analyse(packet, track=False)

    def process(self, packet: FramePacket) -> None:
        if self.fail_at is not None and packet.index == self.fail_at:
            raise RuntimeError("processor exploded")
        if self.delay is not None:
            time.sleep(self.delay(packet.index))
        with self._lock:
            self.seen.append(packet.index)  # in the order frames finish
        rows, cols = SQUARE
        packet.image[rows, cols] = 255 - packet.image[rows, cols]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("clip") / "in.mp4", frames=30, size=(128, 96), fps=30, stamp=True)


def _opts(clip: Path, out: Path, workers: int = 1, **kw) -> VideoJob:  # type: ignore[no-untyped-def]
    """A VideoJob; `workers` is --execution-threads."""
    processing = ProcessingSettings(sources=(), runtime=RuntimeSettings(execution_threads=workers))
    return VideoJob(input=clip, output=out, processing=processing, **kw)


def _square_diff(a: np.ndarray, b: np.ndarray) -> float:
    rows, cols = SQUARE
    return float(np.abs(a[rows, cols].astype(int) - b[rows, cols].astype(int)).mean())


def test_frames_come_out_in_order_with_four_workers_and_uneven_delays(tmp_path: Path, clip: Path) -> None:
    # Early frames are slowest, so later ones finish first and must wait in the reorder buffer.
    engine = InvertEngine(delay=lambda i: 0.002 * ((7 * i) % 11) + (0.03 if i % 5 == 0 else 0.0))
    out = tmp_path / "out.mp4"
    result = process_video(_opts(clip, out, workers=4, label=False), engine, quiet=True)
    assert result.stats.frames == 30 and result.stats.processed == 30 and result.stats.with_faces == 30
    assert sorted(engine.seen) == list(range(30)) and engine.seen != list(range(30))  # really out of order
    info = probe(out)
    assert [read_index(img) for img in info["images"]] == list(range(30))
    assert info["frames"] == 30 and info["rate"] == 30
    src = probe(clip)
    assert info["times"] == pytest.approx(src["times"], abs=1e-3)
    assert info["audio_duration"] == pytest.approx(src["audio_duration"], abs=1 / 30)
    assert _square_diff(info["images"][5], src["images"][5]) > 60  # processed
    assert not list(tmp_path.glob(".*part*"))  # no temporary file left


@pytest.mark.parametrize("fps", [None, 15, 60])
def test_the_workers_convert_the_frames_not_the_decode_thread(tmp_path: Path, clip: Path, fps: int | None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The one decode thread converted every frame to BGR, which capped a run's frame rate, and
    # kept the fast conversion that truncates (1.1 levels darker) because an exact one cost more.
    from livecam.media.colour import ColourConverter

    threads: list[str] = []
    to_bgr = ColourConverter.to_bgr
    monkeypatch.setattr(ColourConverter, "to_bgr",
                        lambda self, frame, colour: threads.append(threading.current_thread().name)
                        or to_bgr(self, frame, colour))
    out = tmp_path / "out.mp4"
    result = process_video(_opts(clip, out, workers=3, label=False, fps=fps), InvertEngine(), quiet=True)
    assert result.stats.frames == {None: 30, 15: 15, 60: 60}[fps]
    assert len(threads) == {None: 30, 15: 15, 60: 30}[fps]  # each shown frame converted once, none dropped ones
    assert set(threads) <= {f"livecam-worker-{i}" for i in range(3)}, Counter(threads)
    assert [read_index(img) for img in probe(out)["images"]][:4] == {None: [0, 1, 2, 3], 15: [0, 2, 4, 6],
                                                                      60: [0, 0, 1, 1]}[fps]


def test_frames_in_flight_are_bounded() -> None:
    """However long the input, at most max_in_flight frames exist between decode and write."""
    flight = InFlight()

    def frames():  # type: ignore[no-untyped-def]
        for i in range(200):
            flight.made()
            yield OutFrame(np.zeros((8, 8, 3), np.uint8), i / 30)

    written: list[int] = []

    def write(packet: FramePacket) -> None:
        time.sleep(0.001)  # a slow encoder: the decoder must wait, not pile up frames
        written.append(packet.index)
        flight.written()

    stats = run_frames(frames(), write, InvertEngine(face=False), workers=3, max_in_flight=6, label=False)
    assert written == list(range(200)) and stats.frames == 200
    assert flight.peak <= 6


def test_frames_in_flight_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without --max-memory: enough to keep every worker busy; with one, sized in bytes
    # (tests/pipeline/test_budget.py): never below workers + 2, never above the default. The
    # budget counts what the process holds: a livecam run's 200 MB, not this test process's.
    monkeypatch.setattr("livecam.pipeline.budget.resident_bytes", lambda: 200 << 20)
    assert frames_in_flight(1920 * 1080 * 3, 4, None) == 12
    assert frames_in_flight(1920 * 1080 * 3, 4, 2.0) == 12
    assert 2 + 2 <= frames_in_flight(1920 * 1080 * 3, 2, 1.0) <= 8


def test_a_worker_error_stops_the_run_and_leaves_no_output(tmp_path: Path, clip: Path) -> None:
    out = tmp_path / "out.mp4"
    with pytest.raises(RuntimeError, match="exploded"):
        process_video(_opts(clip, out, workers=2), InvertEngine(fail_at=12), quiet=True)
    assert not out.exists()
    assert os.listdir(tmp_path) == []


def test_the_input_is_closed_when_setup_fails_before_the_first_frame(
        tmp_path: Path, clip: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C (or any error) between opening the input and starting the writer still closes
    the input."""
    from livecam.media.video_reader import VideoReader
    from livecam.pipeline import file

    closed: list[Path] = []
    real_close = VideoReader.close

    def close(self: VideoReader) -> None:
        closed.append(self.path)
        real_close(self)

    def interrupted(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(VideoReader, "close", close)
    monkeypatch.setattr(file, "Progress", interrupted)
    with pytest.raises(KeyboardInterrupt):
        process_video(_opts(clip, tmp_path / "out.mp4"), InvertEngine(), quiet=True)
    assert closed == [clip]
    assert os.listdir(tmp_path) == []


def test_keep_partial_finalises_a_shorter_valid_video_on_error(tmp_path: Path, clip: Path) -> None:
    out = tmp_path / "out.mp4"
    with pytest.raises(RuntimeError):
        process_video(_opts(clip, out, workers=1, keep_partial=True), InvertEngine(fail_at=20), quiet=True)
    info = probe(out)
    assert 0 < info["frames"] < 30
    assert [read_index(img) for img in info["images"]] == list(range(info["frames"]))
    # The audio is cut where the video stops.
    assert info["audio_duration"] <= info["frames"] / 30 + 0.1


def test_interrupt_is_reported_and_cleans_up(tmp_path: Path, clip: Path) -> None:
    out = tmp_path / "out.mp4"
    main = threading.get_ident()

    class InterruptingEngine(InvertEngine):
        """Ctrl-C while frame 5 is processed: mid-run whatever the machine's speed (a timer
        could fire before the run started, or after it ended, on a loaded machine)."""

        def process(self, packet: FramePacket) -> None:
            if packet.index == 5:
                import _thread

                _thread.interrupt_main()  # what Ctrl-C does
            super().process(packet)

    # later frames slow, so the run is surely still going when the main thread sees the interrupt
    engine = InterruptingEngine(delay=lambda i: 0.0 if i <= 5 else 0.2)
    with pytest.raises(Interrupted, match="no output written"):
        process_video(_opts(clip, out, workers=2), engine, quiet=True)
    assert threading.get_ident() == main
    assert not out.exists() and os.listdir(tmp_path) == []


def test_frame_range_leaves_other_frames_untouched(tmp_path: Path, clip: Path) -> None:
    out = tmp_path / "out.mkv"
    result = process_video(_opts(clip, out, workers=2, frame_range=(10, 20), label=False), InvertEngine(), quiet=True)
    assert result.stats.processed == 10
    src, got = probe(clip)["images"], probe(out)["images"]
    for i in range(30):
        changed = _square_diff(src[i], got[i]) > 60
        assert changed == (10 <= i < 20), i


def test_no_face_anywhere_completes_with_a_warning(tmp_path: Path, clip: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out.mp4"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        result = process_video(_opts(clip, out, label=False), InvertEngine(face=False), quiet=True)
    assert out.exists() and result.stats.with_faces == 0
    assert any("no face was found" in r.getMessage() for r in caplog.records)


def test_label_changes_only_its_corner_and_no_label_removes_it(tmp_path: Path, clip: Path) -> None:
    class Identity(NoModels):
        tracks = False

        def analyse(self, packet: FramePacket, track: bool) -> None:
            packet.faces = []

        def process(self, packet: FramePacket) -> None:
            pass

    labelled, plain = tmp_path / "l.mp4", tmp_path / "p.mp4"
    process_video(_opts(clip, labelled, label=True, quality=0), Identity(), quiet=True)
    process_video(_opts(clip, plain, label=False, quality=0), Identity(), quiet=True)
    a, b = probe(labelled)["images"][15].astype(int), probe(plain)["images"][15].astype(int)
    x1, y1, x2, y2 = label_box(a.shape)
    inside = np.abs(a[y1:y2, x1:x2] - b[y1:y2, x1:x2]).mean()
    outside = np.abs(a - b)
    outside[max(0, y1 - 16):, max(0, x1 - 16):] = 0  # codec blocks next to the label may shift a little
    assert inside > 20
    assert outside.max() <= 3
    src = probe(clip)["images"][15].astype(int)
    assert np.abs(src - b).mean() < 2  # no label: the frame is the input's


def test_label_keeps_off_a_face_in_the_bottom_right_corner(tmp_path: Path) -> None:
    # The label was always drawn bottom-right, over a face there; it goes bottom-left now, and
    # stays there on every frame.
    src = make_clip(tmp_path / "in.mp4", frames=8, size=(320, 240), audio=False)
    face = (180, 110, 316, 236)

    class FaceBottomRight(NoModels):
        tracks = False

        def analyse(self, packet: FramePacket, track: bool) -> None:
            packet.faces = [Face(bbox=np.array(face, np.float32), score=0.9, kps=np.zeros((5, 2), np.float32))]

        def process(self, packet: FramePacket) -> None:
            pass

    labelled, plain = tmp_path / "l.mp4", tmp_path / "p.mp4"
    process_video(_opts(src, labelled, label=True, quality=0), FaceBottomRight(), quiet=True)
    process_video(_opts(src, plain, label=False, quality=0), FaceBottomRight(), quiet=True)
    x1, y1, x2, y2 = label_box((240, 320), "bottom-left")
    for a, b in zip(probe(labelled)["images"], probe(plain)["images"]):
        diff = np.abs(a.astype(int) - b).max(axis=2)
        assert diff[face[1]:face[3], face[0]:face[2]].max() <= 3  # codec noise only: no label on the face
        assert diff[y1:y2, x1:x2].mean() > 20  # the label, bottom-left


def test_no_audio_and_other_streams_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = make_clip(tmp_path / "subs.mkv", frames=8, size=(64, 48), subtitle=True)
    out = tmp_path / "out.mkv"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        process_video(_opts(src, out, audio=False), InvertEngine(face=False), quiet=True)
    assert probe(out)["streams"] == ["video", "subtitle"]  # Matroska holds it as it is
    assert not [r.getMessage() for r in caplog.records if "not copied" in r.getMessage()]


def _two_audio_tracks(one: Path, src: Path) -> Path:
    """`one`'s video and its audio twice: 'Commentary' (eng) first, then 'Main' (fra), which is
    marked default."""
    with av.open(str(one)) as i, av.open(str(src), "w") as o:
        streams = {s.index: [o.add_stream_from_template(s)] for s in i.streams}
        streams[1].append(o.add_stream_from_template(i.streams[1]))
        for stream, (lang, title, default) in zip(streams[1], [("eng", "Commentary", False), ("fra", "Main", True)]):
            stream.metadata.update({"language": lang, "title": title})
            stream.disposition = av.stream.Disposition.default if default else av.stream.Disposition(0)
        for packet in i.demux():
            if packet.dts is not None:
                for stream in streams[packet.stream.index]:
                    packet.stream = stream
                    o.mux(packet)
    return src


@pytest.mark.parametrize("ext", [".mp4", ".mkv"])
def test_every_audio_track_is_kept_the_default_one_first(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        ext: str) -> None:
    # Only the first audio track was kept (not the one marked default), and the rest were dropped.
    one = make_clip(tmp_path / "one.mkv", frames=8, size=(64, 48))
    src = _two_audio_tracks(one, tmp_path / "two.mkv")
    out = tmp_path / f"out{ext}"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        # lossless (quality 0): libx264's lossy output differs from run to run under load (its
        # threaded look-ahead with the input's millisecond timestamps), its lossless pixels do not
        result = process_video(_opts(src, out, quality=0), InvertEngine(face=False), quiet=True)
    assert result.audio == "copy"
    with av.open(str(out)) as o:
        tracks = [(s.metadata.get("title") or s.metadata.get("name"), s.language,
                   bool(s.disposition & av.stream.Disposition.default)) for s in o.streams.audio]
        packets = Counter(p.stream.index for p in o.demux(*o.streams.audio) if p.size)
    assert tracks == [("Main", "fra", True), ("Commentary", "eng", False)]
    assert len(packets) == 2 and min(packets.values()) > 5  # both hold their sound
    assert not [r.getMessage() for r in caplog.records if "not copied" in r.getMessage()]
    # the pictures are what a run on the one-track input gives
    single = tmp_path / f"single{ext}"
    process_video(_opts(one, single, quality=0), InvertEngine(face=False), quiet=True)
    assert [np.abs(a.astype(int) - b.astype(int)).max() for a, b in
            zip(probe(out)["images"], probe(single)["images"])] == [0] * 8


def test_a_track_the_container_cannot_hold_is_reencoded_beside_a_copied_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    aac = make_clip(tmp_path / "aac.mkv", frames=8, size=(64, 48))
    pcm = make_clip(tmp_path / "pcm.mkv", frames=8, size=(64, 48), audio_codec="pcm_s16le")
    src = tmp_path / "both.mkv"
    with av.open(str(aac)) as a, av.open(str(pcm)) as p, av.open(str(src), "w") as o:
        video, first = o.add_stream_from_template(a.streams.video[0]), o.add_stream_from_template(a.streams.audio[0])
        second = o.add_stream_from_template(p.streams.audio[0])
        second.disposition = av.stream.Disposition.default  # the PCM one is the default
        first.disposition = av.stream.Disposition(0)
        for packet in a.demux():
            if packet.dts is not None:
                packet.stream = video if packet.stream.type == "video" else first
                o.mux(packet)
        for packet in p.demux(p.streams.audio[0]):
            if packet.dts is not None:
                packet.stream = second
                o.mux(packet)
    out = tmp_path / "out.mp4"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        result = process_video(_opts(src, out), InvertEngine(face=False), quiet=True)
    assert result.audio == "reencode"
    with av.open(str(out)) as o:
        assert [(s.codec_context.name, bool(s.disposition & av.stream.Disposition.default))
                for s in o.streams.audio] == [("aac", True), ("aac", False)]
    assert [r.getMessage() for r in caplog.records if "re-encoded" in r.getMessage()] == [
        "note: the audio track 2 (pcm_s16le) is re-encoded as AAC: MP4 files are not commonly played with "
        "pcm_s16le audio"]


_CUES = [(0.2, 0.5, "Hello there"), (0.6, 0.9, "Second line")]


def _with_subtitles(base: Path, src: Path, tmp_path: Path, shift: float) -> Path:
    """`base` (starting at `shift` s) with an SRT track of _CUES (on base's clock), language eng,
    title 'English'."""
    srt = tmp_path / "cues.srt"

    def at(t: float) -> str:
        ms = int(round(t * 1000))
        return f"00:00:{ms // 1000:02d},{ms % 1000:03d}"
    srt.write_text("".join(f"{i + 1}\n{at(a + shift)} --> {at(b + shift)}\n{text}\n\n"
                           for i, (a, b, text) in enumerate(_CUES)))
    with av.open(str(base)) as i, av.open(str(srt)) as s, av.open(str(src), "w") as o:
        streams = {st.index: o.add_stream_from_template(st) for st in i.streams}
        sub = o.add_stream_from_template(s.streams.subtitles[0])
        sub.metadata.update({"language": "eng", "title": "English"})
        for packet in i.demux():
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                o.mux(packet)
        for packet in s.demux(s.streams.subtitles[0]):
            if packet.dts is not None:
                packet.stream = sub
                o.mux(packet)
    return src


def _cues(path: Path) -> tuple[str, list[tuple[float, float, str]], tuple[str | None, str | None]]:
    """(codec, [(start, end, text)], (language, title)) of the first subtitle stream of `path`."""
    with av.open(str(path)) as c:
        st = c.streams.subtitles[0]
        cues = []
        for packet in c.demux(st):
            if packet.pts is None or not packet.size:
                continue
            cue = st.decode2(packet)
            if cue is None or not len(cue):  # MP4's empty samples between cues
                continue
            text = b"".join(r.ass for r in cue).decode().split(",", 8)[-1]
            start = float(packet.pts * packet.time_base)
            cues.append((round(start, 3), round(start + float(packet.duration * packet.time_base), 3), text))
        return st.codec_context.name, cues, (st.language, st.metadata.get("title") or st.metadata.get("name"))


@pytest.mark.parametrize("ext,codec", [(".mkv", "srt"), (".mp4", "mov_text"), (".webm", "webvtt")])
def test_subtitles_are_kept_on_the_video_s_timeline(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                    ext: str, codec: str) -> None:
    # Subtitle streams were left out with a note. The input starts at 10 s, which the output's
    # timeline (video and audio) moves to 0: the cues move with them. Matroska keeps the SRT as it is.
    base = make_timed_clip(tmp_path / "base.mkv", start=10.0, frames=30, size=(64, 48), audio_codec="libopus")
    src = _with_subtitles(base, tmp_path / "subs.mkv", tmp_path, shift=10.0)
    assert _cues(src)[1] == [(a + 10, b + 10, text) for a, b, text in _CUES]
    out = tmp_path / f"out{ext}"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        process_video(_opts(src, out, encoder="libvpx-vp9" if ext == ".webm" else "libx264"),
                      InvertEngine(face=False), quiet=True)
    assert _cues(out) == (codec, _CUES, ("eng", "English"))
    assert probe(out)["audio_start"] == pytest.approx(0.0, abs=0.03)  # the audio moved just as far
    assert not [r.getMessage() for r in caplog.records if "not copied" in r.getMessage()]


def test_bitmap_subtitles_an_mp4_cannot_hold_are_named_as_left_out(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    base = make_clip(tmp_path / "base.mkv", frames=8, size=(64, 48), audio=False)
    src = tmp_path / "dvd.mkv"
    with av.open(str(base)) as i, av.open(str(src), "w") as o:
        video = o.add_stream_from_template(i.streams.video[0])
        o.add_stream("dvdsub")  # DVD subtitles are pictures: MP4 holds none, none can be converted
        for packet in i.demux():
            if packet.dts is not None:
                packet.stream = video
                o.mux(packet)
    out = tmp_path / "out.mp4"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        process_video(_opts(src, out), InvertEngine(face=False), quiet=True)
    assert probe(out)["streams"] == ["video"]
    assert [r.getMessage() for r in caplog.records if "not copied" in r.getMessage()] == [
        "note: the output has the input's video; not copied: 1 subtitle stream"]


@pytest.mark.parametrize("ext", [".mp4", ".webm"])
def test_an_ass_track_without_its_header_is_converted_too(tmp_path: Path, ext: str) -> None:
    # The text encoders would not open without an ASS header, failing the run at its first frame
    # ('encoding out.mp4 failed: Invalid data found when processing input').
    src = make_clip(tmp_path / "subs.mkv", frames=8, size=(64, 48), subtitle=True)  # an ASS track, no header
    out = tmp_path / f"out{ext}"
    result = process_video(_opts(src, out, encoder="libvpx-vp9" if ext == ".webm" else "libx264"),
                           InvertEngine(face=False), quiet=True)
    assert probe(out)["streams"] == ["video", "audio", "subtitle"] and result.tracks == (1, 1)


def test_mp4_text_subtitles_become_srt_in_matroska(tmp_path: Path) -> None:
    base = make_timed_clip(tmp_path / "base.mkv", frames=30, size=(64, 48), audio_codec=None)
    mkv = _with_subtitles(base, tmp_path / "subs.mkv", tmp_path, shift=0.0)
    mp4 = tmp_path / "subs.mp4"
    process_video(_opts(mkv, mp4), InvertEngine(face=False), quiet=True)
    out = tmp_path / "out.mkv"
    process_video(_opts(mp4, out), InvertEngine(face=False), quiet=True)  # Matroska has no mov_text
    assert _cues(out)[:2] == ("srt", _CUES)  # SRT, as FFmpeg names it read from Matroska


def test_subtitles_of_a_partial_video_stop_where_it_stops(tmp_path: Path) -> None:
    base = make_timed_clip(tmp_path / "base.mkv", frames=30, size=(64, 48), audio_codec=None)
    src = _with_subtitles(base, tmp_path / "subs.mkv", tmp_path, shift=0.0)
    out = tmp_path / "out.mkv"
    with pytest.raises(RuntimeError):  # fails at frame 15 (0.5 s): the cue at 0.6 s is not kept
        process_video(_opts(src, out, keep_partial=True), InvertEngine(fail_at=15), quiet=True)
    assert _cues(out)[1] == _CUES[:1]


def test_variable_frame_rate_keeps_timestamps(tmp_path: Path) -> None:
    times = [0.0, 0.04, 0.1, 0.3, 0.31, 0.5, 0.52, 0.9]
    src = make_clip(tmp_path / "vfr.mkv", frames=8, size=(64, 48), audio=False, timestamps=times)
    out = tmp_path / "out.mp4"
    process_video(_opts(src, out), InvertEngine(face=False), quiet=True)
    assert probe(out)["times"] == pytest.approx(times, abs=2e-3)


def test_fps_option_resamples_to_a_constant_rate(tmp_path: Path, clip: Path) -> None:
    out = tmp_path / "out.mp4"
    result = process_video(_opts(clip, out, fps=15), InvertEngine(face=False), quiet=True)
    info = probe(out)
    assert info["frames"] == 15 == result.stats.frames
    assert info["rate"] == 15
    assert [read_index(img) for img in info["images"]] == list(range(0, 30, 2))
    assert info["times"] == pytest.approx([i / 15 for i in range(15)], abs=1e-3)


@pytest.mark.parametrize("frames, rate, fps, written", [(31, 30, 7.0, 7), (10, 30, 4.0, 1), (60, 25, 24.0, 58),
                                                         (30, 30, 7.5, 8)])
def test_fps_output_is_as_long_as_the_input_within_half_an_output_frame(
        tmp_path: Path, frames: int, rate: int, fps: float, written: int) -> None:
    # 31 frames at 30 fps (1.03 s) at --fps 7 gave 8 frames, 1.14 s: every tick before the input's
    # end was written, up to one output frame too long; 10 frames at 30 fps at --fps 4 gave 0.5 s.
    src = make_clip(tmp_path / "in.mp4", frames=frames, size=(64, 48), fps=rate, stamp=True)
    out = tmp_path / "out.mp4"
    result = process_video(_opts(src, out, fps=fps), InvertEngine(face=False), quiet=True)
    info = probe(out)
    assert info["frames"] == result.stats.frames == written
    length, output_length = frames / rate, written / fps
    assert abs(output_length - length) <= 0.5 / fps + 1e-6
    # each tick shows the input frame nearest to it
    shown = [read_index(img) for img in info["images"]]
    assert all(abs(index - i / fps * rate) <= 0.5 + 1e-6 for i, index in enumerate(shown)), shown
    assert info["audio_duration"] == pytest.approx(probe(src)["audio_duration"], abs=1e-3)  # copied whole
    assert abs(info["audio_duration"] - output_length) < 1 / fps


@pytest.mark.parametrize("typed, rate", [(29.97, Fraction(30000, 1001)), (23.976, Fraction(24000, 1001)),
                                          (59.94, Fraction(60000, 1001)), (12.5, Fraction(25, 2))])
def test_fps_typed_as_a_decimal_ntsc_rate_is_that_rate(tmp_path: Path, clip: Path, typed: float,
                                                       rate: Fraction) -> None:
    # --fps 29.97 wrote a 2997/100 stream (drifting 3.6 frames an hour from NTSC's 30000/1001)
    out = tmp_path / "out.mp4"
    process_video(_opts(clip, out, fps=typed), InvertEngine(face=False), quiet=True)
    with av.open(str(out)) as c:
        stream = c.streams.video[0]
        assert Fraction(stream.average_rate.numerator, stream.average_rate.denominator) == rate
        assert 1 / Fraction(stream.time_base.numerator, stream.time_base.denominator) % rate == 0


def test_retime_repeats_and_drops_nearest_frames() -> None:
    @dataclass
    class F:
        image: object
        time: float
        duration: float | None = None

    src = [F(np.full(2, i), i / 30) for i in range(6)]
    doubled = list(retime(src, Fraction(60), Fraction(30)))
    # a repeated frame comes once, with the times of the ticks that repeat it
    assert [int(f.image[0]) for f in doubled] == [0, 1, 2, 3, 4, 5]
    assert [f.image is s.image for f, s in zip(doubled, src)] == [True] * 6
    ticks = [t for f in doubled for t in (f.time, *f.repeats)]
    assert [round(t * 60, 6) for t in ticks] == list(range(12))
    assert [int(f.image[0]) for f in retime(src, Fraction(15), Fraction(30))] == [0, 2, 4]
    assert [round(f.time * 15, 6) for f in retime(src, Fraction(15), Fraction(30))] == [0, 1, 2]
    assert all(not f.repeats for f in retime(src, Fraction(15), Fraction(30)))


class SmoothedInvertEngine(InvertEngine):
    """InvertEngine through the ordered step (--smoothing): keeps what track() saw, in order."""

    tracks = True

    def __init__(self) -> None:
        super().__init__()
        self.tracked: list[tuple[int, float | None]] = []

    def detect(self, packet: FramePacket) -> None:
        self.analyse(packet, track=False)

    def track(self, packet: FramePacket) -> None:
        self.tracked.append((packet.index, packet.pts))


def _ten_fps_frames() -> list[OutFrame]:
    """Ten 10 fps frames, each a different grey with noise (so a swap, a label, a mark show)."""
    rng = np.random.default_rng(7)
    return [OutFrame(rng.integers(0, 200, (64, 96, 3), dtype=np.uint8), i / 10) for i in range(10)]


def _shown(tick: int, frames: int = 10) -> int:
    """The 10 fps input frame nearest to 30 fps output tick `tick` (what retime shows there)."""
    return min(frames - 1, round(tick / 3))


def _run_at_30(engine: InvertEngine, **kw):  # type: ignore[no-untyped-def]
    """The ten frames retimed to 30 fps through run_frames: (stats, written (index, pts, image),
    the input images, the watermark's calls)."""
    src = _ten_fps_frames()
    inputs = [f.image.copy() for f in src]
    written: list[tuple[int, float, np.ndarray]] = []
    marked: list[int] = []

    def mark(index: int, image: np.ndarray) -> np.ndarray:  # a cadence by output index, as video_marker's
        marked.append(index)
        if index % 7 >= 2:
            return image
        out = image.copy()
        out[-4:, -4:] = 255 - out[-4:, -4:]
        return out

    def write(packet: FramePacket) -> None:
        written.append((packet.index, packet_time(packet), packet.image.copy()))

    stats = run_frames(retime(src, Fraction(30), Fraction(10)), write, engine, watermark=mark, **kw)
    return stats, written, inputs, marked


@pytest.mark.parametrize("workers", [1, 3])
def test_fps_above_the_input_rate_processes_each_frame_once_and_repeats_the_result(workers: int) -> None:
    engine = InvertEngine()
    stats, written, inputs, marked = _run_at_30(engine, workers=workers, max_in_flight=4)
    assert [w[0] for w in written] == list(range(30))
    assert [w[1] for w in written] == pytest.approx([i / 30 for i in range(30)], abs=1e-9)
    firsts = [i for i in range(30) if i == 0 or _shown(i) != _shown(i - 1)]
    assert sorted(engine.seen) == firsts and len(firsts) == 10  # the engine once per input frame
    assert stats.frames == 30 and stats.processed == 30 and stats.with_faces == 30  # output frames, as before
    assert sorted(marked) == list(range(30))  # the watermark's cadence is per output frame
    rows, cols = SQUARE
    x1, y1, x2, y2 = label_box(inputs[0].shape)
    for index, _, image in written:
        source = inputs[_shown(index)]
        first = written[firsts[_shown(index)]][2]
        assert np.array_equal(image[rows, cols], 255 - source[rows, cols])  # swapped, once
        assert np.array_equal(image[:-4, :-4], first[:-4, :-4])  # a repeat shows its original's pixels
        assert not np.array_equal(image[y1:y2, x1:x2], source[y1:y2, x1:x2])  # labelled
        corner = image[-4:, -4:]
        assert np.array_equal(corner, 255 - source[-4:, -4:] if index % 7 < 2 else source[-4:, -4:]), index


def test_fps_above_the_input_rate_embeds_the_watermark_once_per_repeated_frame() -> None:
    # A marker that says its cadence (marks.watermark.VideoMarker): the marked ticks of one input
    # frame share one embed (the costly part), and every marked output frame carries the mark.
    class Marker:
        def __init__(self) -> None:
            self.embedded: list[int] = []

        def marks(self, index: int) -> bool:
            return index % 15 < 4  # runs of 4, as at 30 fps

        def __call__(self, index: int, image: np.ndarray) -> np.ndarray:
            if not self.marks(index):
                return image
            self.embedded.append(index)
            out = image.copy()
            out[-4:, -4:] = 255 - out[-4:, -4:]
            return out

    src = _ten_fps_frames()
    inputs = [f.image.copy() for f in src]
    written: list[tuple[int, np.ndarray]] = []
    marker = Marker()
    run_frames(retime(src, Fraction(30), Fraction(10)), lambda p: written.append((p.index, p.image.copy())),
               InvertEngine(), workers=2, watermark=marker, label=False)
    marked_ticks = [i for i in range(30) if marker.marks(i)]
    assert sorted(marker.embedded) == sorted({min(i for i in marked_ticks if _shown(i) == _shown(t))
                                              for t in marked_ticks})  # the first marked tick of each frame
    assert len(marker.embedded) == 4 < len(marked_ticks) == 8
    for index, image in written:
        source = inputs[_shown(index)][-4:, -4:]
        assert np.array_equal(image[-4:, -4:], 255 - source if marker.marks(index) else source), index


def test_fps_above_the_input_rate_with_a_frame_range_and_smoothing() -> None:
    # --frame-range counts output frames: 3..6 cuts input frame 1 (ticks 2-4) and 2 (ticks 5-7)
    engine = SmoothedInvertEngine()
    stats, written, inputs, _ = _run_at_30(engine, workers=2, frame_range=(3, 7), label=False)
    assert [w[0] for w in written] == list(range(30))
    assert sorted(engine.seen) == [3, 5] and stats.processed == 4
    assert engine.tracked == [(3, pytest.approx(3 / 30)), (5, pytest.approx(5 / 30))]  # in order, once each
    rows, cols = SQUARE
    swapped = [i for i, _, image in written
               if not np.array_equal(image[rows, cols], inputs[_shown(i)][rows, cols])]
    assert swapped == [3, 4, 5, 6]


def test_fps_above_the_input_rate_tracks_each_frame_once_in_order() -> None:
    engine = SmoothedInvertEngine()
    stats, written, _, _ = _run_at_30(engine, workers=3, max_in_flight=5)
    assert [w[0] for w in written] == list(range(30)) and stats.frames == 30
    firsts = [i for i in range(30) if i == 0 or _shown(i) != _shown(i - 1)]
    assert [i for i, _ in engine.tracked] == firsts and len(firsts) == 10
    assert [t for _, t in engine.tracked] == pytest.approx([i / 30 for i in firsts])


def test_fps_above_the_input_rate_keeps_frames_in_flight_bounded() -> None:
    flight = InFlight()

    def frames():  # type: ignore[no-untyped-def]
        for i in range(60):
            flight.made()
            yield OutFrame(np.zeros((8, 8, 3), np.uint8), i / 10)

    def write(packet: FramePacket) -> None:
        time.sleep(0.001)
        if packet.index == 179 or _shown(packet.index + 1, 60) != _shown(packet.index, 60):  # its last tick
            flight.written()

    stats = run_frames(retime(frames(), Fraction(30), Fraction(10)), write, InvertEngine(face=False),
                       workers=3, max_in_flight=6, label=False)
    assert stats.frames == 180 and flight.peak <= 6 + 1  # + the one retime reads ahead (the next, to find the nearest)


def test_a_10fps_clip_at_30fps_goes_through_the_engine_once_per_input_frame(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "ten.mp4", frames=10, size=(128, 96), fps=10, stamp=True)
    out = tmp_path / "thirty.mp4"
    engine = InvertEngine()
    result = process_video(_opts(clip, out, workers=2, label=False, fps=30.0), engine, quiet=True)
    assert len(engine.seen) == 10
    info = probe(out)
    assert info["frames"] == 30 == result.stats.frames and info["rate"] == 30
    assert info["times"] == pytest.approx([i / 30 for i in range(30)], abs=1e-3)
    assert [read_index(img) for img in info["images"]] == [_shown(i) for i in range(30)]
    src = probe(clip)["images"]
    assert all(_square_diff(img, src[_shown(i)]) > 60 for i, img in enumerate(info["images"]))  # all swapped


def test_a_frame_repeated_by_fps_is_processed_once_per_output_frame(tmp_path: Path, clip: Path) -> None:
    # --fps 60 on a 30 fps clip handed one array to two packets, each processed in place: the
    # square was inverted twice (back to the input) on some frames, or raced between workers
    once, doubled = tmp_path / "once.mp4", tmp_path / "doubled.mp4"
    process_video(_opts(clip, once, label=False), InvertEngine(), quiet=True)
    process_video(_opts(clip, doubled, workers=2, label=False, fps=60.0), InvertEngine(), quiet=True)
    want, got = probe(once)["images"], probe(doubled)["images"]
    assert len(want) == 30 and len(got) == 60
    wrong = [i for i in range(60) if _square_diff(got[i], want[i // 2]) > 8]  # codec noise only
    assert wrong == [], wrong


@pytest.mark.parametrize("keep_partial", [False, True])
def test_disk_full_is_an_output_error_and_leaves_nothing(tmp_path: Path, keep_partial: bool) -> None:
    """RLIMIT_FSIZE in a subprocess stands in for a full disk; even --keep-partial cannot keep a
    file that could not be written."""
    src = make_clip(tmp_path / "in.mp4", frames=40, size=(160, 120), stamp=True)
    out = tmp_path / "out" / "out.mkv"
    out.parent.mkdir()
    script = f"""
import resource, signal, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from pathlib import Path
from livecam.errors import OutputError
from livecam.pipeline.file import process_video
from tests.pipeline.test_file import InvertEngine, _opts
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, resource.RLIM_INFINITY))
try:
    process_video(_opts(Path({str(src)!r}), Path({str(out)!r}), quality=0,
                        keep_partial={keep_partial}), InvertEngine(), quiet=True)
except OutputError as exc:
    print("OUTPUT_ERROR", exc.message)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "OUTPUT_ERROR" in proc.stdout, proc.stdout + proc.stderr
    assert "size limit" in proc.stdout or "disk full" in proc.stdout
    assert os.listdir(out.parent) == []


_RSS_SCRIPT = """
import resource, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from livecam.pipeline.file import process_video
from tests.pipeline.test_file import InvertEngine, _opts
process_video(_opts(Path(sys.argv[1]), Path(sys.argv[2]), workers=2), InvertEngine(), quiet=True)
print("PEAK_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_peak_memory_does_not_grow_with_length(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[2])
    peaks = {}
    for frames in (60, 600):
        src = make_clip(tmp_path / f"in{frames}.mp4", frames=frames, size=(320, 240), audio=True)
        proc = subprocess.run([sys.executable, "-c", _RSS_SCRIPT.format(root=root), str(src),
                               str(tmp_path / f"out{frames}.mp4")], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        peaks[frames] = int(proc.stdout.split("PEAK_KB")[1])
        assert count_frames(tmp_path / f"out{frames}.mp4") == frames
    assert peaks[600] <= 1.2 * peaks[60], peaks


def _stream_ends(path: Path) -> tuple[float, float, int]:
    """(end of the last video frame, end of the last audio packet, video frames), in seconds,
    from the packets alone."""
    import av

    video_end = audio_end = 0.0
    frames = 0
    with av.open(str(path)) as c:
        for packet in c.demux():
            if packet.pts is None or not packet.size:
                continue
            end = float((packet.pts + (packet.duration or 0)) * packet.time_base)
            if packet.stream.type == "video":
                video_end = max(video_end, end)
                frames += 1
            elif packet.stream.type == "audio":
                audio_end = max(audio_end, end)
    return video_end, audio_end, frames


@pytest.fixture(scope="module")
def minute_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("minute") / "minute.mp4", frames=1800, size=(64, 48), fps=30)


@pytest.mark.parametrize("suffix", [".mp4", ".webm"])
def test_audio_stays_in_sync_at_the_end_of_a_one_minute_clip(tmp_path: Path, minute_clip: Path, suffix: str) -> None:
    src = minute_clip
    out = tmp_path / f"out{suffix}"
    encoder = "libvpx-vp9" if suffix == ".webm" else "libx264"
    process_video(_opts(src, out, workers=2, encoder=encoder, quality=40), InvertEngine(face=False), quiet=True)
    v_in, a_in, n_in = _stream_ends(src)
    v_out, a_out, n_out = _stream_ends(out)
    assert n_out == n_in == 1800
    frame = 1 / 30
    assert v_out == pytest.approx(v_in, abs=frame)
    assert a_out == pytest.approx(a_in, abs=frame)  # copied (mp4) or re-encoded as Opus (webm)
    assert (a_out - v_out) == pytest.approx(a_in - v_in, abs=frame)


def test_progress_lines_when_not_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    import io

    from livecam.pipeline.progress import Progress

    now = [0.0]
    progress = Progress(100, stream=io.StringIO(), interval_s=5.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="livecam"):
        for _ in range(50):
            now[0] += 0.25  # 4 fps
            progress.advance()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2  # one every 5 s of the 12.5 s
    assert lines[-1].endswith("40/100 frames (40%), 4.0 fps, ETA 0:15")
    quiet = Progress(100, quiet=True, stream=io.StringIO(), interval_s=0.0)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="livecam"):
        quiet.advance()
    assert caplog.records == []


def _chapters(path: Path) -> list[tuple[str, float, float]]:
    with av.open(str(path)) as c:
        return [(ch["metadata"].get("title", ""), float(ch["start"] * ch["time_base"]),
                 float(ch["end"] * ch["time_base"])) for ch in c.chapters()]


@pytest.mark.parametrize("suffix", [".mkv", ".mp4"])
def test_chapters_are_copied_to_the_output(tmp_path: Path, suffix: str) -> None:
    # they were dropped silently (not even named in the "not copied" note)
    src = clip_with_chapters(tmp_path / "chapters.mkv")
    out = tmp_path / f"out{suffix}"
    process_video(_opts(src, out), InvertEngine(face=False), quiet=True)
    assert _chapters(out) == [("Intro", 0.0, 1.0), ("Main", 1.0, 2.0)] == _chapters(src)


def _truncated_faststart(tmp_path: Path, frames: int = 60, keep: float = 0.6) -> Path:
    """A stamped MP4 with its index first (`-movflags +faststart`), cut to `keep` of its bytes."""
    return _cut_recording(tmp_path, "faststart.mp4", frames=frames, keep=keep, audio=False)


# How each kind of recording is made: the container written by make_clip, and the muxer options of
# a remux (an index first, or fragments as a crash-safe recorder writes them).
_RECORDINGS = {"faststart.mp4": ("mp4", {"movflags": "+faststart"}), "faststart.mov": ("mov", {"movflags": "+faststart"}),
               "fragmented.mp4": ("mp4", {"movflags": "frag_keyframe+empty_moov"}), "mkv": ("mkv", None),
               "webm": ("webm", None), "avi": ("avi", None), "mp4": ("mp4", None), "mov": ("mov", None)}


def _cut_recording(tmp_path: Path, kind: str, frames: int = 60, keep: float = 0.6, audio: bool = True) -> Path:
    """A stamped clip of `kind` (_RECORDINGS) cut to `keep` of its bytes, as a crash or a full disk leaves it."""
    ext, options = _RECORDINGS[kind]
    codecs = {"webm": ("libvpx-vp9", "libopus", 48000), "avi": ("libx264", "mp3", 44100)}.get(ext, ("libx264", "aac", 44100))
    whole = make_clip(tmp_path / f"whole.{ext}", frames=frames, size=(128, 96), fps=30, audio=audio, stamp=True,
                      codec=codecs[0], audio_codec=codecs[1], audio_rate=codecs[2])
    if options is not None:
        remuxed = tmp_path / f"remuxed.{ext}"
        with av.open(str(whole)) as src, av.open(str(remuxed), "w", options=options) as dst:
            streams = {s.index: dst.add_stream_from_template(s) for s in src.streams}
            for packet in src.demux():
                if packet.dts is not None:
                    packet.stream = streams[packet.stream.index]
                    dst.mux(packet)
        whole = remuxed
    cut = tmp_path / f"cut.{ext}"
    data = whole.read_bytes()
    cut.write_bytes(data[: int(len(data) * keep)])
    return cut


@pytest.mark.parametrize("kind", ["faststart.mp4", "faststart.mov", "fragmented.mp4", "mkv", "webm", "avi"])
def test_a_cut_short_recording_is_written_up_to_its_cut_with_one_warning(
        tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    # A cut MKV was written with a warning, a cut MP4 with its index first refused ("re-copy it,
    # or give --keep-partial"), and with --keep-partial written and then failed, exit 2.
    cut = _cut_recording(tmp_path, kind)
    with VideoReader(cut) as reader:
        decoded = [read_index(frame.image) for frame in reader.frames()]
    assert decoded == list(range(len(decoded))) and 10 < len(decoded) < 60
    caplog.clear()
    out = tmp_path / "out.mkv"
    engine = InvertEngine(delay=lambda i: 0.002 * (i % 3), face=False)
    result = process_video(_opts(cut, out, workers=2), engine, quiet=True)
    assert result.stats.frames == len(decoded) and not result.partial
    info = probe(out)
    assert [read_index(img) for img in info["images"]] == decoded
    said = [r.getMessage() for r in caplog.records if "could be read" in r.getMessage()]
    assert len(said) == 1 and f"{len(decoded)} " in said[0] and said[0].endswith("; the output stops there"), said
    assert not [r for r in caplog.records if "corrupt" in r.getMessage()]
    if kind != "fragmented.mp4":  # its one fragment stores the audio after the video: cut off first
        assert info["audio_duration"] == pytest.approx(len(decoded) / 30, abs=0.1)


def test_a_ts_cut_before_its_first_keyframe_says_what_it_loses_and_keeps_the_sound_in_time(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A recording joined mid-broadcast lost the frames before its first keyframe without a word.
    cut = make_headless_ts(tmp_path / "cut.ts", frames=60, gop=15, cut=2)
    out = tmp_path / "out.mp4"
    process_video(_opts(cut, out), InvertEngine(face=False), quiet=True)
    got, given = probe(out), probe(cut)
    assert [read_index(img) for img in got["images"]] == list(range(15, 60))
    said = [r.getMessage() for r in caplog.records if "keyframe" in r.getMessage()]
    assert said == ["warning: cut.ts starts without a keyframe (cut from a longer recording?): its first 13 frames "
                    "(0.43 s) need a picture from before the cut and could not be decoded; the output leaves them "
                    "out, its first frame at 0.43 s as in the input"], said
    # frame 15 comes as long after the sound's start as in the input
    assert got["times"][0] - got["audio_start"] == pytest.approx(given["times"][0] - given["audio_start"], abs=1 / 60)
    assert got["audio_duration"] == pytest.approx(given["audio_duration"], abs=0.05)


@pytest.mark.parametrize("kind, keep, problem", [
    ("mp4", 0.6, "its index (the moov box a recorder writes last) is missing"),
    ("mov", 0.6, "its index (the moov box a recorder writes last) is missing"),
    # FFmpeg opens these: "has no video stream (it holds: data)", "no video frame could be decoded",
    # "the video stream's codec is unknown"
    ("faststart.mp4", 0.01, "its index (the moov box) is cut off"),
    ("faststart.mp4", 0.03, "its index (the moov box) is cut off"),
    ("fragmented.mp4", 0.01, "its index (the moov box) is cut off")])
def test_a_recording_cut_before_its_index_was_written_is_refused_naming_the_index(
        tmp_path: Path, kind: str, keep: float, problem: str) -> None:
    # It was "cannot read cut.mp4 as a video (Invalid data found when processing input): the file
    # is not a video, or is truncated or corrupt", though it is one whose index is missing.
    from livecam.errors import InputError

    cut = _cut_recording(tmp_path, kind, keep=keep)
    engine = InvertEngine()
    with pytest.raises(InputError) as err:
        process_video(_opts(cut, tmp_path / "out.mp4"), engine, quiet=True)
    assert err.value.message == (
        f"cannot read {cut}: {problem}, so its frames cannot be "
        "found: the recording or copy was cut short (a crash, a full disk, an interrupted download); re-copy the "
        "whole file, or rebuild its index with a repair tool such as untrunc, given a whole recording from the "
        "same camera")
    assert engine.seen == [] and not (tmp_path / "out.mp4").exists()


def test_whole_mp4s_with_the_index_first_or_last_are_not_taken_for_truncated(tmp_path: Path) -> None:
    plain = make_clip(tmp_path / "plain.mp4", frames=30, size=(128, 96), audio=True)
    fast = _truncated_faststart(tmp_path, keep=1.0)
    for path in (plain, fast):
        with VideoReader(path) as reader:
            assert reader.info.cut_short is None, path


@pytest.mark.parametrize("keep_partial", [False, True])
def test_an_input_error_without_keep_partial_stops_the_workers_at_once(keep_partial: bool) -> None:
    # The frames read before a broken input's error were still processed (and then thrown away
    # with the output) when --keep-partial was not given.
    from livecam.errors import InputError
    from livecam.pipeline.file import FilePipeline

    started, failed = threading.Event(), threading.Event()

    def frames():  # type: ignore[no-untyped-def]
        for i in range(6):
            yield OutFrame(np.zeros((8, 8, 3), np.uint8), i / 30)
        assert started.wait(10)  # a worker is processing frame 0
        failed.set()
        raise InputError("the input is damaged")

    class HeldEngine(InvertEngine):
        def process(self, packet: FramePacket) -> None:
            if packet.index == 0:  # every frame is read (and the input has failed) meanwhile
                started.set()
                assert failed.wait(10)
                pipeline.stages.stop.wait(2)  # (set at once without keep_partial)
            super().process(packet)

    engine = HeldEngine()
    written: list[int] = []
    pipeline = FilePipeline(frames(), lambda p: written.append(p.index), engine, workers=1, max_in_flight=8,
                            label=False, keep_partial=keep_partial)
    with pytest.raises(InputError, match="damaged"):
        pipeline.run()
    assert engine.seen == ([0, 1, 2, 3, 4, 5] if keep_partial else [0])  # only the frame under way
    assert written == (engine.seen if keep_partial else [])
