"""BoundSession (IO binding, buffers allocated once) gives session.run's results bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from livecam.runtime.binding import BoundSession
from tests.standins import cpu_session
from tests.standins.arcface import build_arcface
from tests.standins.inswapper import build_inswapper
from tests.standins.scrfd import build_scrfd


def feeds_for(session, rng: np.random.Generator, side: int = 128, batch: int = 1) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    out = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else (batch if i == 0 else side) for i, d in enumerate(arg.shape)]
        dtype = np.float16 if "float16" in arg.type else np.float32
        out[arg.name] = rng.standard_normal(shape).astype(dtype)
    return out


@pytest.mark.parametrize("build", [build_inswapper, build_scrfd, build_arcface])
def test_results_equal_plain_run_bit_for_bit(tmp_path: Path, build) -> None:  # type: ignore[no-untyped-def]
    path = build(tmp_path / "m.onnx")
    plain, bound = cpu_session(path), BoundSession(cpu_session(path), "cpu")
    rng = np.random.default_rng(0)
    # Several calls with one shape (buffers refreshed in place), then another shape, then back.
    sizes = [(128, 1), (128, 1), (96, 2), (128, 1)] if build is not build_inswapper else [(128, 1)] * 3
    previous: list[np.ndarray] = []
    for side, batch in sizes:
        feeds = feeds_for(plain, rng, side if build is build_scrfd else 112, batch if build is build_arcface else 1)
        want = plain.run(None, feeds)
        got = bound.run(None, feeds)
        assert [g.dtype for g in got] == [w.dtype for w in want]
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        # What an earlier call returned is the caller's: the next call does not overwrite it.
        if previous:
            assert all(not np.shares_memory(p, g) for p, g in zip(previous, got))
        previous = got
    first = plain.get_outputs()[0].name
    feeds = feeds_for(plain, rng, 64 if build is build_scrfd else 112)
    assert np.array_equal(bound.run([first], feeds)[0], plain.run([first], feeds)[0])


def test_buffers_are_allocated_once_per_shape(tmp_path: Path) -> None:
    path = build_inswapper(tmp_path / "m.onnx")
    bound = BoundSession(cpu_session(path), "cpu")
    rng = np.random.default_rng(1)
    plain = cpu_session(path)
    for _ in range(3):
        bound.run(None, feeds_for(plain, rng))
    assert len(bound._bound) == 1
    (only,) = bound._bound.values()
    assert only.outputs is not None and set(only.inputs) == {"target", "source"}
    assert bound.get_inputs()[0].name == "target" and bound.get_providers() == ["CPUExecutionProvider"]
