"""Per-model session options (SessionTuning): the dicts ONNX Runtime gets, no GPU needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from livecam.models.catalog import CATALOG
from livecam.runtime.providers import (PROFILE_BATCH, PROFILE_SIDE, SessionTuning, model_tuning, profile_for,
                                       resolve_providers)

GPU_BOX = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


def shapes(name: str) -> list[tuple[str | None, tuple[int | None, ...] | None]]:
    return [(t.name, t.shape) for t in CATALOG[name].inputs]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path))


def test_detector_and_arcface_get_profiles_fixed_models_none() -> None:
    assert PROFILE_SIDE == (320, 640, 640) and PROFILE_BATCH == (1, 1, 8)
    assert profile_for(shapes("det_10g")) == (("input.1", ((1, 3, 320, 320), (1, 3, 640, 640), (8, 3, 640, 640))),)
    assert profile_for(shapes("w600k_r50")) == (("input.1", ((1, 3, 112, 112), (1, 3, 112, 112), (8, 3, 112, 112))),)
    assert profile_for(shapes("inswapper_128")) == ()  # fixed: nothing to profile
    assert profile_for(shapes("gfpgan_1.4")) == ()
    assert profile_for([(None, (None, 3, 512, 512))]) == ()  # an unnamed dynamic input: TensorRT decides


def test_tensorrt_options_carry_the_profile_strings_and_cuda_follows() -> None:
    choice = resolve_providers(["tensorrt"], ort_available=GPU_BOX)
    assert choice.names == ("tensorrt", "cuda", "cpu")
    tuned = choice.tuned(model_tuning(shapes("det_10g"), choice))
    names, options = tuned.as_ort_args()
    trt, cuda, cpu = options
    assert trt["trt_profile_min_shapes"] == "input.1:1x3x320x320"
    assert trt["trt_profile_opt_shapes"] == "input.1:1x3x640x640"
    assert trt["trt_profile_max_shapes"] == "input.1:8x3x640x640"
    assert trt["trt_fp16_enable"] == "True" and trt["trt_engine_cache_enable"] == "True"
    assert trt["trt_engine_cache_path"] == trt["trt_timing_cache_path"]
    assert "trt_cuda_graph_enable" not in trt  # the shared pool: no graphs
    assert "trt_profile_min_shapes" not in cuda and cpu == {}
    assert tuned.names == choice.names and tuned.lane is None


def test_cuda_options_and_graphs_only_for_a_lanes_fixed_shape_sessions() -> None:
    choice = resolve_providers(["cuda"], ort_available=GPU_BOX)
    cuda = choice.as_ort_args()[1][0]
    assert cuda["cudnn_conv_algo_search"] == "EXHAUSTIVE" and cuda["arena_extend_strategy"] == "kSameAsRequested"
    shared = choice.tuned(model_tuning(shapes("inswapper_128"), choice)).as_ort_args()[1][0]
    assert "enable_cuda_graph" not in shared
    lane = choice.for_lane(1)
    assert lane.device == "cuda" and lane.lane == 1 and lane != choice  # a pool key of its own
    swapper = lane.tuned(model_tuning(shapes("inswapper_128"), lane)).as_ort_args()[1][0]
    assert swapper["enable_cuda_graph"] == "1" and "prefer_nhwc" not in swapper
    detector = lane.tuned(model_tuning(shapes("det_10g"), lane)).as_ort_args()[1][0]
    assert "enable_cuda_graph" not in detector  # its input size may change (the governor's step)
    off = lane.tuned(model_tuning(shapes("inswapper_128"), lane, cuda_graphs=False)).as_ort_args()[1][0]
    assert "enable_cuda_graph" not in off
    nhwc = choice.tuned(SessionTuning(prefer_nhwc=True)).as_ort_args()[1][0]
    assert nhwc["prefer_nhwc"] == "1"
    trt = resolve_providers(["tensorrt"], ort_available=GPU_BOX).for_lane(0)
    assert trt.tuned(model_tuning(shapes("gfpgan_1.4"), trt)).as_ort_args()[1][0]["trt_cuda_graph_enable"] == "True"


def test_the_cpu_provider_is_untouched_by_tuning() -> None:
    cpu = resolve_providers(["cpu"])
    assert cpu.device == "cpu"
    tuned = cpu.for_lane(0).tuned(SessionTuning(cuda_graph=True, prefer_nhwc=True, trt_profile=(("x", ((1,), (1,), (2,))),)))
    assert tuned.as_ort_args() == (["CPUExecutionProvider"], [{}])


def test_a_model_that_cannot_have_a_cuda_graph_is_created_without_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT refuses enable_cuda_graph when a node is not on the GPU: the session is created
    without it (and its BoundSession then uses no graph ids) instead of failing the run."""
    import onnxruntime as ort

    from livecam.runtime import sessions
    from livecam.runtime.binding import BoundSession
    from livecam.runtime.providers import ProviderChoice
    from tests.standins.inswapper import build_inswapper

    real = ort.InferenceSession
    asked: list[list[dict[str, str]]] = []

    def picky(path, sess_options=None, providers=None, provider_options=None):  # type: ignore[no-untyped-def]
        asked.append([dict(o) for o in provider_options or []])
        if any("enable_cuda_graph" in o for o in provider_options or []):
            raise RuntimeError("This session cannot use the CUDA Graph feature as requested by the user")
        return real(path, sess_options=sess_options, providers=providers)

    monkeypatch.setattr(ort, "InferenceSession", picky)
    choice = ProviderChoice(names=("cpu",), ort_providers=(("CPUExecutionProvider", (("enable_cuda_graph", "1"),)),),
                            lane=0)
    sessions.clear_pool()
    try:
        session = sessions.get_session(build_inswapper(tmp_path / "m.onnx"), choice, 1)
    finally:
        sessions.clear_pool()
    assert asked == [[{"enable_cuda_graph": "1"}], [{}]]
    assert isinstance(session, BoundSession) and not session.graphs
