"""Marking off the output thread (marks.marking_sink): the live pipeline's output loop goes on
while a frame is being marked, the sink gets every frame in order, a live sink drops the oldest
waiting frame rather than wait, errors reach the caller; and a real `run --output FILE`
recording verifies as marked, with valid C2PA content credentials."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.marks.marking_sink import MarkingSink
from livecam.pipeline.live import LivePipeline
from tests.conftest import run_cli
from tests.doubles import MemorySink, SyntheticSource, read_index, stamp_index
from tests.pipeline.test_live import FakeEngine, opts
from tests.videos import make_clip


def tagged(image: np.ndarray) -> np.ndarray:
    """What the fake marker does: a copy with the bottom-right pixel set (the index stamp kept)."""
    out = image.copy()
    out[-1, -1] = (1, 2, 3)
    return out


def is_tagged(image: np.ndarray) -> bool:
    return bool((image[-1, -1] == (1, 2, 3)).all())


def wait_until(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def frame(index: int) -> np.ndarray:
    image = np.full((24, 32, 3), 90, np.uint8)
    stamp_index(image, index)
    return image


def test_the_output_loop_goes_on_while_a_frame_is_marked_and_the_file_keeps_every_frame_in_order() -> None:
    release = threading.Event()

    def slow_mark(index: int, image: np.ndarray) -> np.ndarray:
        if index % 15:
            return image
        release.wait(60)  # a marker far slower than the whole run
        return tagged(image)

    source = SyntheticSource(frames=40, fps=30, live=False, realtime=False)
    sink = MemorySink()
    pipeline = LivePipeline(FakeEngine(), source, sink, opts(recording=True, watermark=slow_mark, label=False))
    runner = threading.Thread(target=pipeline.run)
    runner.start()
    try:
        # frame 0 is still being marked, yet the output loop has shown ten frames
        wait_until(lambda: pipeline.metrics.frames >= 10, "the output loop to show 10 frames")
        assert sink.written == 0 and not release.is_set()
    finally:
        release.set()
        runner.join(60)
    assert not runner.is_alive() and sink.closed
    assert [read_index(f) for f in sink.frames] == list(range(40))  # nothing lost, nothing reordered
    assert [i for i, f in enumerate(sink.frames) if is_tagged(f)] == [0, 15, 30]


def test_a_live_sink_drops_the_oldest_waiting_frame_instead_of_waiting() -> None:
    busy, release = threading.Event(), threading.Event()
    drops: list[int] = []

    def slow_mark(index: int, image: np.ndarray) -> np.ndarray:
        if index == 0:
            busy.set()
            release.wait(60)
            return tagged(image)
        return image

    inner = MemorySink()
    sink = MarkingSink(inner, slow_mark, backlog=2, lossless=False, on_drop=lambda: drops.append(1))
    sink.write(frame(0))
    wait_until(busy.is_set, "the marker to take frame 0")
    for i in range(1, 6):
        sink.write(frame(i))  # returns at once although the marker is busy
    release.set()
    sink.close()
    assert [read_index(f) for f in inner.frames] == [0, 4, 5] and len(drops) == 3
    assert is_tagged(inner.frames[0]) and inner.closed


def test_a_marker_error_reaches_the_caller_and_the_sink_is_still_closed() -> None:
    def failing(index: int, image: np.ndarray) -> np.ndarray:
        if index == 1:
            raise RuntimeError("marker broke")
        return image

    inner = MemorySink()
    sink = MarkingSink(inner, failing, backlog=4, lossless=True)
    sink.write(frame(0))
    sink.write(frame(1))
    with pytest.raises(RuntimeError, match="marker broke"):
        sink.close()
    assert inner.closed and [read_index(f) for f in inner.frames] == [0]


def test_a_run_recording_verifies_as_marked(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    clip = make_clip(tmp_path / "in.mp4", frames=30, size=(640, 480), fps=10, audio=False,
                     source_image=faces_dir / "obama.jpg")
    out = tmp_path / "rec.mp4"
    made = run_cli(["run", "--camera", str(clip), "--no-realtime", "--output", str(out), "--source",
                    str(faces_dir / "biden.jpg"), "--swap-model", "mesh"], env=isolated_env, timeout=300)
    assert made.returncode == 0, made.stderr
    result = run_cli(["verify", "--json", str(out)], env=isolated_env)
    (found,) = json.loads(result.stdout)
    assert found["watermark"]["found"] and found["watermark"]["frames_marked"] >= 2, found
    assert found["c2pa"]["valid"] and found["c2pa"]["by_livecam"], found  # signed before the rename
    assert result.returncode == 0 and found["marked"]


def stuck_recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> tuple[Any, threading.Event]:
    """A real recorder whose encoder hangs in `where` (write or close) as on a stalled disk."""
    from livecam.media import video_writer
    from livecam.media.sinks import FileRecorderSink

    release = threading.Event()
    real = getattr(video_writer.VideoWriter, where)

    def hang(self: Any, *args: Any, **kwargs: Any) -> None:
        release.wait(120)
        real(self, *args, **kwargs)

    monkeypatch.setattr(video_writer.VideoWriter, where, hang)
    return FileRecorderSink(tmp_path / "rec.mp4", fps=10), release


def within_a_minute(call: Any) -> BaseException | None:
    """Runs `call` on another thread and returns what it raised, so a call that never returns
    fails the test instead of hanging it."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            raised.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(60)
    assert not runner.is_alive(), "the call did not return with the recorder stuck"
    return raised[0] if raised else None


@pytest.mark.parametrize("where", ["write", "close"])
def test_a_recording_stuck_on_a_stalled_disk_is_given_up_and_its_temporary_file_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    from livecam.errors import OutputError

    recorder, release = stuck_recorder(tmp_path, monkeypatch, where)
    sink = MarkingSink(recorder, lambda i, image: image, backlog=2, lossless=True, stall_s=0.5)
    try:
        sink.write(frame(0))
        wait_until(lambda: list(tmp_path.iterdir()) != [], "the recording's temporary file")
        if where == "write":  # the output loop's lossless write, waiting for room, gives up too
            error = within_a_minute(lambda: [sink.write(frame(i)) for i in range(1, 4)])
            assert isinstance(error, OutputError) and "finished nothing" in str(error)
        error = within_a_minute(sink.close)
        assert isinstance(error, OutputError) and "rec.mp4" in str(error) and "removed" in str(error)
        assert list(tmp_path.iterdir()) == []  # no hidden .part file, no half-written rec.mp4
        release.set()  # the disk wakes: the stuck call finishes, and still nothing is left
        sink._thread.join(60)
        assert list(tmp_path.iterdir()) == []
    finally:
        release.set()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("loop", ["waiting for room", "returned", "in the write (no watermark)"])
def test_ctrl_c_during_a_recording_stuck_on_a_stalled_disk_leaves_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loop: str) -> None:
    # The marked recording's encoder hangs at its first frame (a stalled disk). Ctrl-C comes while
    # the output loop waits for room in the lossless backlog (the stuck-output rescue ends the run)
    # or before the backlog is full (the loop returns, and the close must not wait for ever): either
    # way the hidden temporary file of the recording must not be left behind. Without a watermark
    # the output loop itself is held in the write (the rescue ends the run).
    from livecam.errors import Interrupted, OutputError
    from livecam.marks import marking_sink
    from livecam.media import video_writer
    from livecam.media.sinks import FileRecorderSink
    from livecam.pipeline.live import run_live_pipeline

    release = threading.Event()
    real = video_writer.VideoWriter.write

    def write(self: Any, image: np.ndarray, time_s: float, duration_s: float | None = None) -> None:
        release.wait(120)
        real(self, image, time_s, duration_s)

    monkeypatch.setattr(video_writer.VideoWriter, "write", write)
    monkeypatch.setattr(marking_sink, "STALL_S", 0.5 if loop == "returned" else 60.0)
    stranded: list[BaseException | None] = []
    # cli.py's hook: the line, then exit 130 (here: the stuck call goes on, as when the disk wakes)
    monkeypatch.setattr(threading, "excepthook", lambda args: (stranded.append(args.exc_value), release.set()))
    # 4 FPS: a backlog of 2 frames, full after the 4th frame
    when = 0.1 if loop == "returned" else 2.0
    before = signal.getsignal(signal.SIGINT)

    def interrupt() -> None:  # timed from when the run handles Ctrl-C: before that (under load) it escaped the test
        deadline = time.monotonic() + 60
        while signal.getsignal(signal.SIGINT) is before and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(when)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    recorder = FileRecorderSink(tmp_path / "rec.mp4", fps=4)
    expected: tuple[type[BaseException], str] = (
        (OutputError, "finished nothing") if loop == "returned" else (Interrupted, "did not answer"))
    try:
        with pytest.raises(expected[0], match=expected[1]) as caught:
            run_live_pipeline(FakeEngine(), SyntheticSource(fps=4), recorder,
                              opts(handle_signals=True, stuck_output_s=0.5, recording=True,
                                   watermark=None if "no watermark" in loop else lambda i, image: image))
    finally:
        release.set()
    assert stranded == ([] if loop == "returned" else [caught.value])
    assert list(tmp_path.iterdir()) == []
