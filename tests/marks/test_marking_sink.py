"""Marking off the output thread (marks.marking_sink): the live pipeline's output loop goes on
while a frame is being marked, the sink gets every frame in order, a live sink drops the oldest
waiting frame rather than wait, errors reach the caller; and a real `run --output FILE`
recording verifies as marked, with valid C2PA content credentials."""

from __future__ import annotations

import json
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
