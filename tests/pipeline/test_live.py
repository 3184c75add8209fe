"""The live pipeline with a fake engine, a synthetic numbered camera and a memory sink."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.errors import DeviceError, InputError, LivecamError
from livecam.frame import FramePacket
from livecam.pipeline.live import LivePipeline, LiveRun, run_live_pipeline
from livecam.settings import LiveJob, ProcessingSettings, RuntimeSettings
from tests.doubles import MemorySink, SyntheticSource, read_index


class FakeEngine:
    """Stands in for livecam.pipeline.engine.Engine: costs are sleeps the test can switch."""

    def __init__(self, process_s: float = 0.0, analyse_s: float = 0.0, enhancer_s: float = 0.0,
                 processors: tuple[str, ...] = ("face_swapper",), fail_in: str | None = None,
                 fail_at: int = 3, jitter: bool = False) -> None:
        self.process_s = process_s
        self.analyse_s = analyse_s
        self.enhancer_s = enhancer_s
        self.processor_names = processors
        self.enabled = {name: True for name in processors}
        self.detect_every = 1
        self.det_size = 640
        self.sparse_detection_saves = True
        self.fail_in = fail_in
        self.fail_at = fail_at
        self.jitter = jitter
        self.calls: list[tuple[str, object]] = []
        self.sources = ["a.jpg", "b.jpg"]
        self._rng = np.random.default_rng(0)
        self._lock = threading.Lock()

    def analyse(self, packet: FramePacket, track: bool = True) -> None:
        if self.fail_in == "analyse" and packet.index >= self.fail_at:
            raise InputError("fake analyse failure: the frame was not what the test expected")
        time.sleep(self.analyse_s)
        packet.timings["detect"] = self.analyse_s * 1000

    def process(self, packet: FramePacket) -> None:
        if self.fail_in == "process" and packet.index >= self.fail_at:
            raise RuntimeError("fake processor exploded")
        cost = self.process_s
        if self.jitter:
            with self._lock:
                cost *= float(self._rng.uniform(0.2, 1.8))
        if self.enabled.get("face_enhancer"):
            cost += self.enhancer_s
        time.sleep(cost)
        packet.image[10:, 10:] = 200  # visible work that keeps the index stamp intact
        packet.timings["face_swapper"] = cost * 1000

    def set_enabled(self, name: str, enabled: bool) -> None:
        self.calls.append(("enabled", (name, enabled)))
        self.enabled[name] = enabled

    def set_detect_every(self, n: int) -> None:
        self.calls.append(("detect_every", n))
        self.detect_every = n

    def set_det_size(self, n: int) -> None:
        self.calls.append(("det_size", n))
        self.det_size = n

    uses_mask_models = False

    def set_mask_models(self, on: bool) -> None:
        self.calls.append(("mask_models", on))

    fast_enhancer: str | None = None

    def set_fast_enhancer(self, on: bool) -> None:
        self.calls.append(("fast_enhancer", on))

    def next_source(self) -> str | None:
        self.sources.append(self.sources.pop(0))
        return self.sources[0]

    def describe(self) -> str:
        return "fake engine"


def livecam_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("livecam-")]


def indices(sink: MemorySink) -> list[int]:
    return [read_index(frame) for frame in sink.frames]


def opts(**kw: Any) -> LiveRun:
    """A LiveRun from LiveJob fields, LiveRun fields and `workers` (--execution-threads)."""
    kw.setdefault("handle_signals", False)
    run_fields = {f.name for f in fields(LiveRun)} - {"job"}
    run = {k: kw.pop(k) for k in list(kw) if k in run_fields}
    runtime = RuntimeSettings(execution_threads=kw.pop("workers", 1))
    return LiveRun(LiveJob(processing=ProcessingSettings(sources=(), runtime=runtime), **kw), **run)


def test_frames_come_out_in_order_and_threads_stop_at_end_of_stream(tmp_path: Path) -> None:
    source = SyntheticSource(frames=60, fps=100)
    sink = MemorySink()
    stats = tmp_path / "s.jsonl"
    result = run_live_pipeline(FakeEngine(), source, sink, opts(stats_json=stats, interval_s=0.2))
    got = indices(sink)
    assert got == sorted(set(got)), "frames shown out of order or twice"
    assert len(got) >= 30 and got[-1] == 59
    assert result.stop_reason == "end of stream"
    assert result.summary["frames"] == sink.written == len(got)
    assert source.closed and sink.closed
    assert livecam_threads() == []
    lines = [json.loads(line) for line in stats.read_text().splitlines()]
    assert "summary" in lines[-1] and lines[-1]["summary"]["frames"] == len(got)
    assert lines[-1]["summary"]["degradations"] == []
    per_second = lines[:-1]
    assert per_second and {"fps", "latency_ms_p50", "latency_ms_p95", "dropped", "queue_depth", "stage_ms",
                           "rss_mb"} <= per_second[0].keys()
    assert per_second[0]["rss_mb"] is None  # no probe given


def test_slow_processor_drops_frames_instead_of_queueing_them(tmp_path: Path) -> None:
    interval, cost = 0.02, 0.06  # processing takes 3 frame intervals
    sink = MemorySink()
    stats = tmp_path / "s.jsonl"
    result = run_live_pipeline(FakeEngine(process_s=cost), SyntheticSource(frames=60, fps=1 / interval), sink,
                               opts(stats_json=stats, interval_s=0.25, degrade=False))
    summary = result.summary
    assert summary["dropped"] >= 25, summary
    assert summary["dropped_by_reason"].get("process busy", 0) > 0
    assert summary["frames"] + summary["dropped"] == 60
    # Queued frames would wait behind each other: about 2 s by the end of this run. A dropped-not-
    # queued run stays near one processing time; the margin is for a loaded machine's scheduling.
    assert summary["latency_ms_p95"] < 5 * cost * 1000, summary
    got = indices(sink)
    assert got == sorted(set(got))
    records = [json.loads(line) for line in stats.read_text().splitlines()][:-1]
    assert all(depth <= 1 for r in records for depth in r["queue_depth"].values())


def test_no_realtime_file_source_loses_no_frame_with_several_workers() -> None:
    source = SyntheticSource(frames=40, live=False, realtime=False)
    sink = MemorySink()
    result = run_live_pipeline(FakeEngine(process_s=0.01, jitter=True), source, sink, opts(workers=3, queue_depth=2))
    assert indices(sink) == list(range(40))
    assert result.summary["dropped"] == 0


def test_several_workers_on_a_live_source_keep_the_order() -> None:
    threads: set[str] = set()

    class ThreadRecordingEngine(FakeEngine):
        def process(self, packet: FramePacket) -> None:
            threads.add(threading.current_thread().name)
            super().process(packet)

    sink = MemorySink()
    engine = ThreadRecordingEngine(process_s=0.03, jitter=True)
    result = run_live_pipeline(engine, SyntheticSource(frames=60, fps=100), sink, opts(workers=3, degrade=False))
    got = indices(sink)
    assert got == sorted(set(got)), got
    # Really several workers: a frame arrives every 10 ms and each takes about 30, so while one
    # worker sleeps the next frame goes to another (one worker alone shows about 19 frames of 60,
    # three about 31; the count alone is too close to tell them apart on a loaded machine).
    assert len(threads) >= 2, threads
    assert len(got) >= 20
    assert result.summary["frames"] == len(got)


@pytest.mark.parametrize("stage, error", [("analyse", InputError), ("process", RuntimeError)])
def test_an_exception_in_a_stage_stops_everything_and_is_reraised(stage: str, error: type) -> None:
    source = SyntheticSource(frames=None, fps=100)  # endless: only the error can stop it
    sink = MemorySink()
    started = time.perf_counter()
    with pytest.raises(error) as info:
        run_live_pipeline(FakeEngine(fail_in=stage, fail_at=5), source, sink, opts(workers=2))
    assert time.perf_counter() - started < 2.0 + 1.0
    assert "fake" in str(info.value)
    if isinstance(info.value, LivecamError):
        assert info.value.exit_code == 2
    assert livecam_threads() == []
    assert source.closed and sink.closed


def test_max_frames_and_duration_stop_the_run() -> None:
    sink = MemorySink()
    result = run_live_pipeline(FakeEngine(), SyntheticSource(fps=200), sink, opts(max_frames=7))
    assert result.stop_reason == "max frames" and sink.written == 7
    sink = MemorySink()
    result = run_live_pipeline(FakeEngine(), SyntheticSource(fps=50), sink, opts(duration=0.3))
    assert result.stop_reason == "duration" and 1 <= sink.written <= 20
    assert livecam_threads() == []


class TimedFileSource(SyntheticSource):
    """A --no-realtime file: frames as fast as they are asked for, each with its timestamp."""

    last_pts: float | None = None

    def read(self) -> np.ndarray | None:
        self.last_pts = self._index / self.fps
        return super().read()


def test_duration_of_a_no_realtime_file_counts_in_its_own_time() -> None:
    # It counted in wall time while the recording keeps the file's timing: --duration 0.1 recorded
    # 0.7 s of a 10 fps clip, and more the faster the machine.
    sink = MemorySink()
    source = TimedFileSource(fps=10, frames=200, live=False, realtime=False)
    result = run_live_pipeline(FakeEngine(), source, sink, opts(duration=0.35))
    assert result.stop_reason == "duration"
    assert indices(sink) == [0, 1, 2, 3]  # 0, 0.1, 0.2 and 0.3 s: none 0.35 s or more after the first


def test_a_duration_shorter_than_the_first_frames_wait_still_gives_that_frame() -> None:
    # --duration 1e-9 ended the run before any frame came: nothing recorded, exit 0.
    sink = MemorySink()
    result = run_live_pipeline(FakeEngine(process_s=0.05), SyntheticSource(fps=50), sink, opts(duration=1e-9))
    assert result.stop_reason == "duration" and sink.written == 1
    assert livecam_threads() == []


def test_mirror_flips_frames() -> None:
    sink = MemorySink()
    run_live_pipeline(FakeEngine(), SyntheticSource(frames=5, fps=100), sink, opts(mirror=True))
    flipped = [read_index(f[:, ::-1]) for f in sink.frames]  # the stamp moved to the top-right corner
    assert flipped and flipped == sorted(set(flipped)) and flipped[-1] == 4
    assert all(f[0, 0, 0] == 96 for f in sink.frames)


class ScriptedSink(MemorySink):
    """Reports keys at given poll calls, like a user pressing them in the window."""

    def __init__(self, script: dict[int, list[str]]) -> None:
        super().__init__()
        self.script = script
        self.polls = 0

    def poll(self) -> list[str]:
        self.polls += 1
        return self.script.pop(self.polls, [])


def test_window_keys_toggle_pause_enhancer_stats_mirror_and_cycle_sources() -> None:
    engine = FakeEngine(processors=("face_swapper", "face_enhancer"))
    sink = ScriptedSink({3: ["n", "e", "s", "m"], 10: ["space"], 25: ["space"], 40: ["q"]})
    pipeline = LivePipeline(engine, SyntheticSource(fps=100), sink, opts(degrade=False))
    result = pipeline.run()
    assert result.stop_reason == "quit"
    assert engine.sources[0] == "b.jpg"
    assert engine.calls == [("enabled", ("face_enhancer", False))]
    assert pipeline.stats_overlay is True and pipeline.mirror is True and pipeline.paused is False
    assert result.summary["dropped_by_reason"].get("paused", 0) > 0
    assert livecam_threads() == []


def test_enhancer_key_and_governor_do_not_undo_each_other() -> None:
    engine = FakeEngine(processors=("face_swapper", "face_enhancer"))
    pipeline = LivePipeline(engine, SyntheticSource(frames=1), MemorySink(), opts())
    enhancer_step = pipeline.governor.steps[0]
    assert enhancer_step.name == "enhancer off"
    # The user turns the enhancer off; the governor degrades and later recovers: it stays off.
    pipeline._on_key("e")
    enhancer_step.apply()
    enhancer_step.undo()
    assert engine.enabled["face_enhancer"] is False
    # The user turns it back on while the governor holds it off: off until the governor recovers.
    pipeline._on_key("e")
    enhancer_step.apply()
    pipeline._on_key("e")
    pipeline._on_key("e")
    assert engine.enabled["face_enhancer"] is False
    enhancer_step.undo()
    assert engine.enabled["face_enhancer"] is True


def test_a_fixed_size_detector_gets_no_det_size_step() -> None:
    engine = FakeEngine()
    engine.det_size = None  # type: ignore[assignment]
    pipeline = LivePipeline(engine, SyntheticSource(frames=1), MemorySink(), opts())
    assert [s.name for s in pipeline.governor.steps] == ["detect every 2nd frame"]


def test_summary_line_without_frames_says_na(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="livecam"):
        run_live_pipeline(FakeEngine(), SyntheticSource(frames=0), MemorySink(), opts())
    line = caplog.records[-1].getMessage()
    assert line.startswith("0 frames") and "latency n/a" in line and "None" not in line


def test_summary_line_of_one_frame_gives_no_rate(caplog: pytest.LogCaptureFixture) -> None:
    # was "1 frames, 0.0 FPS"
    with caplog.at_level("INFO", logger="livecam"):
        run_live_pipeline(FakeEngine(), SyntheticSource(frames=1), MemorySink(), opts())
    line = caplog.records[-1].getMessage()
    assert line.startswith("1 frame, FPS n/a, "), line


def test_pause_on_a_no_realtime_file_holds_frames_and_resume_goes_on() -> None:
    # Paused frames of a lossless source were dropped without giving back their read credit:
    # after a pause, capture never read again and the run hung.
    sink = ScriptedSink({2: ["space"], 12: ["space"]})
    result = run_live_pipeline(FakeEngine(), SyntheticSource(frames=30, live=False, realtime=False), sink,
                               opts(duration=20))
    assert result.stop_reason == "end of stream"
    assert indices(sink) == list(range(30))  # lossless: nothing dropped while paused either
    assert result.summary["dropped"] == 0


def test_stats_overlay_is_white_text_on_a_dark_panel() -> None:
    # The black outline was drawn with a thicker stroke, which OpenCV 5 spaces wider than the
    # white text: two misaligned strings, unreadable.
    from livecam.pipeline.live import draw_overlay

    background = np.array([150, 100, 50], np.uint8)  # no blend of the white text with black equals it
    image = np.empty((360, 640, 3), np.uint8)
    image[:] = background
    draw_overlay(image, ["29.6 FPS  p50 25 ms  p95 56 ms  dropped 2", "detect 4.5  landmarks 8.8 ms"])
    ys, xs = np.nonzero((image > 200).all(axis=2))  # the white text
    assert len(ys) > 100
    text_box = image[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
    assert not (text_box == background).all(axis=2).any()  # no untouched background between the letters
    assert (image[200:] == background).all()  # nothing below the overlay


def test_q_key_quits() -> None:
    sink = MemorySink()
    sink.keys = ["q"]
    result = run_live_pipeline(FakeEngine(), SyntheticSource(fps=100), sink, opts())
    assert result.stop_reason == "quit"
    assert livecam_threads() == []


class StallingSource(SyntheticSource):
    """Gives a few frames, then its read blocks (a camera unplugged mid-stream)."""

    def __init__(self) -> None:
        super().__init__(fps=100)
        self.release = threading.Event()

    def read(self) -> np.ndarray | None:
        if self._index >= 5:
            self.release.wait(10)
            return None
        return super().read()


def test_a_camera_that_stops_delivering_is_a_device_error_naming_it() -> None:
    source = StallingSource()
    try:
        with pytest.raises(DeviceError, match="synthetic camera stopped delivering frames"):
            run_live_pipeline(FakeEngine(), source, MemorySink(), opts(stall_timeout_s=0.3, join_timeout_s=0.3))
        assert not source.closed  # never released under a blocked read
    finally:
        source.release.set()
    deadline = time.time() + 2
    while livecam_threads() and time.time() < deadline:
        time.sleep(0.02)
    assert livecam_threads() == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_while_a_read_waits_is_the_interrupt_not_the_reads_later_error() -> None:
    # Ctrl-C while a camera's read waited (it retries until its own 2 s limit): the read's
    # "stopped delivering frames", raised during the shutdown's wait, was the run's error
    import signal

    from livecam.errors import Interrupted

    class QuietSource(SyntheticSource):
        def __init__(self) -> None:
            super().__init__(fps=100)
            self.waiting = threading.Event()

        def read(self) -> np.ndarray | None:
            if self._index >= 5:
                self.waiting.set()
                time.sleep(0.1)  # (within the capture's share of the join: waited for, the source closed)
                raise DeviceError("synthetic camera stopped delivering frames (none for 0.1 s)")
            return super().read()

    source = QuietSource()

    def interrupt_when_the_read_waits() -> None:
        if source.waiting.wait(10):
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_the_read_waits, daemon=True).start()
    sink = MemorySink()
    with pytest.raises(Interrupted, match=r"stopped cleanly after \d+ frames?$"):
        run_live_pipeline(FakeEngine(), source, sink, opts(handle_signals=True, stall_timeout_s=5.0))
    assert sink.closed and source.closed


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_during_a_stall_returns_without_waiting_for_the_blocked_read() -> None:
    # a stalled stream's read never returns: the run waited join_timeout_s (2 s) for it after a
    # Ctrl-C; it is left behind now (its source unreleased under it), the output still finished
    import signal

    from livecam.errors import Interrupted

    source = StallingSource()
    sink = MemorySink()

    def interrupt_once_stalled() -> None:
        while source._index < 5:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_stalled, daemon=True).start()
    # the read ends on its own after 20 s: the run must have returned before that, not waited for it
    releaser = threading.Timer(20.0, source.release.set)
    releaser.start()
    try:
        with pytest.raises(Interrupted, match="stopped cleanly"):
            run_live_pipeline(FakeEngine(), source, sink, opts(handle_signals=True, stall_timeout_s=60.0,
                                                               join_timeout_s=60.0))
        assert not source.release.is_set() and "livecam-capture" in livecam_threads()
        assert sink.closed and not source.closed  # the output finished; no release under a blocked read
    finally:
        releaser.cancel()
        source.release.set()
    deadline = time.time() + 2  # the capture left behind ends once released: no thread for the next test
    while livecam_threads() and time.time() < deadline:
        time.sleep(0.02)


class ResizingSource(SyntheticSource):
    """The camera switches to a larger mode mid-stream."""

    def read(self) -> np.ndarray | None:
        if self._index == 10:
            self.width, self.height = 128, 96
        return super().read()


def test_a_frame_size_change_mid_stream_is_followed() -> None:
    sink = MemorySink()
    run_live_pipeline(FakeEngine(), ResizingSource(frames=20, live=False, realtime=False), sink, opts())
    assert [f.shape[:2] for f in sink.frames] == [(48, 64)] * 10 + [(96, 128)] * 10
    assert indices(sink) == list(range(20))


def test_overlay_and_label_are_drawn() -> None:
    sink = MemorySink()
    run_live_pipeline(FakeEngine(), SyntheticSource(frames=30, fps=100, width=320, height=240), sink,
                      opts(stats=True, label=True, interval_s=0.05))
    last = sink.frames[-1]
    assert (last[:60, :, :] == 255).any()  # white text of the overlay at the top
    assert (last[-30:, -140:] != 200).any()  # something drawn over the bottom-right corner


def test_label_keeps_off_a_face_in_the_bottom_right_corner() -> None:
    # The label was always drawn bottom-right, over a face there; it goes bottom-left now, on
    # every frame.
    from livecam.faces.face import Face
    from livecam.media.provenance import label_box

    box = (180, 110, 316, 236)

    class FaceBottomRight(FakeEngine):
        def analyse(self, packet: FramePacket, track: bool = True) -> None:
            super().analyse(packet, track)
            packet.faces = [Face(bbox=np.array(box, np.float32), score=0.9, kps=np.zeros((5, 2), np.float32))]

    sink = MemorySink()
    source = SyntheticSource(frames=10, width=320, height=240, live=False, realtime=False)
    run_live_pipeline(FaceBottomRight(), source, sink, opts(label=True))
    x1, y1, x2, y2 = label_box((240, 320), "bottom-left")
    assert len(sink.frames) == 10
    for frame in sink.frames:
        assert (frame[box[1]:box[3], box[0]:box[2]] == 200).all()  # the processor's paint, no label
        assert (frame[y1:y2, x1:x2] != 200).any()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_stats_json_fifo_waits_for_its_reader_and_a_stop_still_ends_the_wait(tmp_path: Path) -> None:
    # open() of a FIFO without a reader blocked where Ctrl-C and SIGTERM could not end it (a hang)
    fifo = tmp_path / "stats.fifo"
    os.mkfifo(fifo)
    pipeline = LivePipeline(FakeEngine(), SyntheticSource(frames=5, fps=100), MemorySink(),
                            opts(stats_json=fifo, interval_s=0.2))
    runner = threading.Thread(target=pipeline.run, daemon=True)
    runner.start()
    time.sleep(0.3)
    pipeline.stop()  # what the first Ctrl-C does
    runner.join(5.0)
    stuck = runner.is_alive()
    if stuck:  # free the blocked open() so the thread ends
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        runner.join(5.0)
    assert not stuck, "the run did not stop while --stats-json waited for a FIFO reader"
    # with a reader, the lines arrive through the FIFO
    got: list[str] = []

    def read_all() -> None:
        with open(fifo, encoding="utf-8") as lines:
            got.extend(lines.read().splitlines())

    reader = threading.Thread(target=read_all)
    reader.start()
    result = run_live_pipeline(FakeEngine(), SyntheticSource(frames=20, fps=100), MemorySink(),
                               opts(stats_json=fifo, interval_s=0.2))
    reader.join(5.0)
    assert json.loads(got[-1])["summary"]["frames"] == result.summary["frames"] >= 1


def test_stats_json_dash_is_stdout_not_a_file_named_dash(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # `--stats-json -` wrote a file named "-" in the current folder
    monkeypatch.chdir(tmp_path)
    result = run_live_pipeline(FakeEngine(), SyntheticSource(frames=20, fps=100), MemorySink(),
                               opts(stats_json=Path("-"), interval_s=0.2))
    lines = capfd.readouterr().out.splitlines()
    assert json.loads(lines[-1])["summary"]["frames"] == result.summary["frames"] >= 1
    assert list(tmp_path.iterdir()) == []
    os.fstat(1)  # stdout itself is still open


def _fifo_read_once(tmp_path: Path) -> tuple[Path, threading.Thread]:
    """A FIFO and a started thread that reads one line from it and closes it (a reader gone)."""
    fifo = tmp_path / "stats.fifo"
    os.mkfifo(fifo)

    def read_one_line_and_go() -> None:
        with open(fifo, encoding="utf-8") as reader:
            reader.readline()

    reader = threading.Thread(target=read_one_line_and_go)
    reader.start()
    return fifo, reader


def test_stats_json_write_failures_say_the_cause_and_the_fix(tmp_path: Path) -> None:
    # "writing failed (Broken pipe)" / "(No space left on device)": the cause without the fix
    from livecam.errors import OutputError

    if Path("/dev/full").exists():
        with pytest.raises(OutputError, match=r"^--stats-json /dev/full: writing failed \(No space left on device\); "
                                              r"free space on that disk or give another file$"):
            run_live_pipeline(FakeEngine(), SyntheticSource(frames=20, fps=100), MemorySink(),
                              opts(stats_json=Path("/dev/full"), interval_s=0.05))
    fifo, reader = _fifo_read_once(tmp_path)
    with pytest.raises(OutputError, match=r"^--stats-json .*stats.fifo: its reader closed it \(broken pipe\); "
                                          r"keep the reader open until the run ends$"):
        run_live_pipeline(FakeEngine(), SyntheticSource(frames=400, fps=100), MemorySink(),
                          opts(stats_json=fifo, interval_s=0.05))
    reader.join(5.0)


def test_stats_json_broken_pipe_closes_the_file(tmp_path: Path) -> None:
    # the failed file was dropped unclosed: "ResourceWarning: unclosed file" when it was collected
    # (pytest: an unraisable-exception warning), and its descriptor held until then
    import gc
    import warnings

    from livecam.errors import OutputError

    fifo, reader = _fifo_read_once(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with pytest.raises(OutputError, match="broken pipe"):
            run_live_pipeline(FakeEngine(), SyntheticSource(frames=400, fps=100), MemorySink(),
                              opts(stats_json=fifo, interval_s=0.05))
        reader.join(5.0)
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


class OneThreadSink(MemorySink):
    """Stands in for the window: OpenCV's GUI must be driven from one thread."""

    one_thread = True

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def write(self, image_bgr: np.ndarray) -> None:
        self.threads.add(threading.current_thread().name)
        super().write(image_bgr)

    def poll(self) -> list[str]:
        self.threads.add(threading.current_thread().name)
        return super().poll()


def test_a_watermarked_window_is_written_from_the_output_loop_only() -> None:
    # `run --output window --watermark` deadlocked Qt: the marking thread wrote the frames while the
    # output loop polled the window's keys.
    marked: list[int] = []

    def mark(index: int, image: np.ndarray) -> np.ndarray:
        marked.append(index)
        out = image.copy()
        out[-1, -1] = 255 - out[-1, -1]  # a change to find
        return out

    sink = OneThreadSink()
    run_live_pipeline(FakeEngine(), SyntheticSource(frames=20, live=False, realtime=False), sink,
                      opts(watermark=mark))
    assert sink.threads == {threading.current_thread().name}
    assert sink.written == 20 and marked == list(range(20))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_stop_signal_while_the_output_is_stuck_ends_the_run_without_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # A display that stopped answering (an X server paused, an ssh -X link stalled) holds the
    # output loop inside its call: Ctrl-C and SIGTERM did nothing, only kill -9 ended the run.
    import signal

    from livecam.errors import Interrupted
    from livecam.media.exit_guard import THREAD_NAME

    release = threading.Event()

    class StuckSink(MemorySink):
        def write(self, image_bgr: np.ndarray) -> None:
            super().write(image_bgr)
            if self.written == 5:
                threading.Thread(target=lambda: (time.sleep(0.2), os.kill(os.getpid(), signal.SIGINT)),
                                 daemon=True).start()
                release.wait(10)  # Python's handler runs in here and the call goes on, as X11's retries

    stranded: list[tuple[str, BaseException | None]] = []

    def hook(args: threading.ExceptHookArgs) -> None:  # cli.py's: the line, then exit 130
        stranded.append((args.thread.name if args.thread else "", args.exc_value))
        release.set()

    monkeypatch.setattr(threading, "excepthook", hook)
    stats = tmp_path / "s.jsonl"
    sink = StuckSink()
    with pytest.raises(Interrupted) as caught:
        run_live_pipeline(FakeEngine(), SyntheticSource(fps=100), sink,
                          opts(handle_signals=True, stuck_output_s=0.5, stats_json=stats))
    assert stranded == [(THREAD_NAME, caught.value)]
    summary = json.loads(stats.read_text().splitlines()[-1])["summary"]
    assert summary["stop_reason"] == "interrupted" and summary["frames"] == 4  # the 5th write never returned
    assert caught.value.message == ("interrupted (Ctrl-C); the output (memory) did not answer within 0.5 s, "
                                    "so the run was ended without it after 4 frames")
    assert not sink.closed  # its call is the stuck one: never called into again
    assert livecam_threads() == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_slow_output_is_not_taken_for_a_stuck_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # A sink whose every write is slow (a huge frame's encoding) finishes the write under way and
    # is closed (its recording finalised): only a call that takes far longer than any before is stuck.
    import signal

    from livecam.errors import Interrupted

    class SlowSink(MemorySink):
        def write(self, image_bgr: np.ndarray) -> None:
            super().write(image_bgr)
            if self.written == 3:
                threading.Thread(target=lambda: (time.sleep(0.1), os.kill(os.getpid(), signal.SIGINT)),
                                 daemon=True).start()
            time.sleep(0.4)

    stranded: list[object] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: stranded.append(args.exc_value))
    sink = SlowSink()
    with pytest.raises(Interrupted, match=r"stopped cleanly after \d+ frames"):
        run_live_pipeline(FakeEngine(), SyntheticSource(fps=100), sink, opts(handle_signals=True, stuck_output_s=0.2))
    assert stranded == [] and sink.closed


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_stats_reader_that_falls_behind_does_not_freeze_the_run(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # `--stats-json - | less` left unscrolled, a terminal paused with Ctrl-S, a FIFO reader that
    # stopped reading: once the pipe was full the output loop waited in the write, the window froze.
    import fcntl

    fifo = tmp_path / "stats.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # opened, never read until the run is over
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        fcntl.fcntl(reader, fcntl.F_SETPIPE_SZ, 4096)  # full after a few lines (Linux)
    pipeline = LivePipeline(FakeEngine(), SyntheticSource(fps=100, frames=150), MemorySink(keep=1),
                            opts(stats_json=fifo, interval_s=0.002))
    result: list[Any] = []
    runner = threading.Thread(target=lambda: result.append(pipeline.run()), daemon=True)
    with caplog.at_level("WARNING", logger="livecam"):
        runner.start()
        runner.join(30)
        frozen = runner.is_alive()
        data = b""
        while chunk := os.read(reader, 1 << 16):  # frees a frozen run too
            data += chunk
        os.close(reader)
        runner.join(10)
    assert not frozen, "the run froze on a stats reader that stopped reading"
    assert result and result[0].stop_reason == "end of stream"
    assert all(json.loads(line) for line in data.decode().splitlines())  # whole lines only
    assert "its reader is not keeping up; lines are left out until it does" in caplog.text
    assert "lines left out while its reader was behind" in caplog.text


def _face(eye_distance: float) -> Any:
    from livecam.faces.face import Face

    kps = np.array([[100, 100], [100 + eye_distance, 100], [110, 120], [100, 130], [120, 130]], np.float32)
    return Face(bbox=np.array((80, 80, 160, 160), np.float32), score=0.9, kps=kps)


def test_small_faces_notice_waits_for_them_to_stay_too_small_and_speaks_once(
        caplog: pytest.LogCaptureFixture) -> None:
    from livecam.pipeline.live import SmallFacesNotice

    notice = SmallFacesNotice(after_s=2.0)
    small, big = [_face(12)], [_face(12), _face(40)]
    for faces, now in ((small, 0.0), (small, 1.9), (big, 2.5), (small, 3.0), ([], 4.0), (small, 4.5), (small, 6.4)):
        notice.see(faces, now)  # never 2 s in a row of only small faces: a big one or none came between
    assert not notice.said and not caplog.records
    notice.see(small, 6.5)
    notice.see(small * 2, 9.0)
    warnings = [r.getMessage() for r in caplog.records]
    assert notice.said and len(warnings) == 1, warnings
    assert warnings[0] == ("warning: the face in view is too small to change (under 24 px between the eyes); "
                           "come closer to the camera or give a higher --resolution")


@pytest.mark.parametrize("eye_distance", [10.0, 40.0])
def test_a_live_run_says_when_the_faces_in_view_stay_too_small(
        eye_distance: float, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # Sitting far from the camera, the face is found but never swapped, and nothing said why.
    import livecam.pipeline.live as live

    monkeypatch.setattr(live, "SMALL_FACES_NOTICE_S", 0.05)

    class FaceEngine(FakeEngine):
        def analyse(self, packet: FramePacket, track: bool = True) -> None:
            super().analyse(packet, track)
            packet.faces = [_face(eye_distance)]

    run_live_pipeline(FaceEngine(), SyntheticSource(frames=30, fps=100, width=320, height=240), MemorySink(), opts())
    said = [r.getMessage() for r in caplog.records if "too small to change" in r.getMessage()]
    assert len(said) == (1 if eye_distance < 24 else 0), said


class CountingEngine(FakeEngine):
    """A FakeEngine that counts the frames it analysed."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.analysed = 0

    def analyse(self, packet: FramePacket, track: bool = True) -> None:
        self.analysed += 1
        super().analyse(packet, track)


def test_a_camera_file_frame_is_converted_only_where_it_is_analysed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # `run --camera FILE` converted every decoded frame to BGR in the capture thread (1.5-2 ms at
    # 1080p), lengthening capture and capping its rate, and converted the frames the busy
    # analyse stage then dropped too. Now the analyse thread converts what it takes.
    from livecam.media import colour
    from livecam.media.camera import VideoFileSource
    from tests.videos import make_clip

    clip = make_clip(tmp_path / "clip.mp4", frames=40, size=(96, 64), fps=80, audio=False)
    converted_in: list[str] = []
    exact = colour.yuv420p_to_bgr

    def counting(*args: Any, **kwargs: Any) -> np.ndarray:
        converted_in.append(threading.current_thread().name)
        return exact(*args, **kwargs)

    monkeypatch.setattr(colour, "yuv420p_to_bgr", counting)
    source = VideoFileSource(str(clip), realtime=True)  # a live source: a busy stage drops frames
    source.open()
    engine = CountingEngine(analyse_s=0.04)
    result = run_live_pipeline(engine, source, MemorySink(), opts(stall_timeout_s=10.0))
    assert result.stop_reason == "end of stream"
    assert result.summary["dropped"] > 0, "the test needs frames dropped while the analyse stage is busy"
    assert len(converted_in) == engine.analysed  # the dropped frames were never converted
    assert set(converted_in) == {"livecam-analyse"}


@pytest.mark.parametrize("mirror", [False, True])
def test_a_camera_file_gives_the_pixels_livecam_video_decodes(tmp_path: Path, mirror: bool) -> None:
    # the conversion moved out of the capture thread: the pixels are the reader's, mirrored or not
    from livecam.media.camera import VideoFileSource
    from livecam.media.video_reader import VideoReader
    from tests.videos import make_clip

    clip = make_clip(tmp_path / "clip.mp4", frames=6, size=(96, 64), audio=False, stamp=True)
    source = VideoFileSource(str(clip), realtime=False)
    source.open()
    sink = MemorySink()

    class Untouched(FakeEngine):
        def process(self, packet: FramePacket) -> None:
            pass

    run_live_pipeline(Untouched(), source, sink, opts(mirror=mirror))
    with VideoReader(clip) as reader:
        expected = [f.image[:, ::-1] if mirror else f.image for f in reader.frames()]
    assert len(sink.frames) == len(expected) == 6
    assert all(np.array_equal(got, want) for got, want in zip(sink.frames, expected))


def test_the_stats_summary_of_one_frame_has_no_rate_either(tmp_path: Path) -> None:
    # the line said "FPS n/a" while --stats-json's summary said "fps": 0.0, a rate a reader takes as stalled
    stats = tmp_path / "s.jsonl"
    result = run_live_pipeline(FakeEngine(), SyntheticSource(frames=1), MemorySink(), opts(stats_json=stats))
    summary = json.loads(stats.read_text().splitlines()[-1])["summary"]
    assert summary["frames"] == result.summary["frames"] == 1
    assert summary["fps"] is None and result.summary["fps"] is None


@pytest.mark.parametrize("limit", [{"max_frames": 3}, {"duration": 0.05}])
def test_a_limit_accounts_for_every_captured_frame(limit: dict[str, Any]) -> None:
    # frames still in the queues when --max-frames or --duration stopped the run were neither
    # shown nor dropped, and not said: frames + dropped fell short of captured (9 + 4 of 14 for
    # --duration 1); they are no drop either (the line's "N dropped" is what the pipeline lost)
    sink = MemorySink()
    result = run_live_pipeline(FakeEngine(process_s=0.02), SyntheticSource(fps=200), sink, opts(**limit))
    summary = result.summary
    assert summary["frames"] == sink.written
    assert summary["captured"] > summary["frames"], summary
    assert summary["frames"] + summary["dropped"] + summary["left_at_stop"] == summary["captured"], summary


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_an_interrupt_after_one_frame_says_one_frame() -> None:
    # "stopped cleanly after 1 frames"
    import signal

    from livecam.errors import Interrupted

    class InterruptingSink(MemorySink):
        def write(self, image_bgr: np.ndarray) -> None:
            super().write(image_bgr)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(Interrupted) as info:
        run_live_pipeline(FakeEngine(), SyntheticSource(fps=100), InterruptingSink(), opts(handle_signals=True))
    assert str(info.value).endswith("stopped cleanly after 1 frame"), str(info.value)
