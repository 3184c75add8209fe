"""BoundSession (IO binding, buffers allocated once) gives session.run's results bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from livecam.runtime.binding import BoundSession
from tests.standins import cpu_session, save_model
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


def test_one_table_of_ort_types_for_bound_outputs_and_float_inputs(tmp_path: Path) -> None:
    """Every type of binding.ORT_TYPES: a fixed-shape output of that type is allocated up front
    and comes back as the plain run's, in its dtype; input_dtype reads the float types from the
    same table and feeds float32 for any other (integer or unknown) type."""
    from onnx import TensorProto, helper

    from livecam.runtime.binding import ORT_TYPES
    from livecam.runtime.sessions import input_dtype

    names = [name.removeprefix("tensor(").removesuffix(")") for name in ORT_TYPES]
    protos = {"float": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "double": TensorProto.DOUBLE,
              "uint8": TensorProto.UINT8, "int32": TensorProto.INT32, "int64": TensorProto.INT64}
    nodes = [helper.make_node("Cast", ["x"], [f"as_{n}"], to=protos[n]) for n in names]
    graph = helper.make_graph(nodes, "casts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info(f"as_{n}", protos[n], [2, 3]) for n in names])
    path = save_model(graph, tmp_path / "casts.onnx")  # at an IR version every onnxruntime we claim reads
    plain, bound = cpu_session(path), BoundSession(cpu_session(path), "cpu")
    feeds = {"x": np.array([[0.5, 1.5, 2.0], [3.0, 250.0, 7.25]], np.float32)}
    got, want = bound.run(None, feeds), plain.run(None, feeds)
    (only,) = bound._bound.values()
    assert only.outputs is not None and len(only.outputs) == len(ORT_TYPES)  # allocated before the run
    for ort_type, g, w in zip(ORT_TYPES, got, want):
        assert g.dtype == w.dtype == ORT_TYPES[ort_type] and np.array_equal(g, w), ort_type
    assert [input_dtype(t) for t in ("tensor(float)", "tensor(float16)", "tensor(double)")] == \
           [np.float32, np.float16, np.float64]
    assert input_dtype("tensor(int64)") is input_dtype("tensor(uint8)") is input_dtype("tensor(bfloat16)") is np.float32
