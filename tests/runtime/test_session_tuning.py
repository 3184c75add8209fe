"""Per-model session options (SessionTuning): the dicts ONNX Runtime gets, no GPU needed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

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


class FallingBack:
    """Stands in for onnxruntime.InferenceSession as onnxruntime-gpu's Python layer behaves when
    the provider refuses a session: no exception, an "EP Error" block on stdout, and a session
    on the fallback providers. `refuses(options)` gives the refusal for a set of options, or ""."""

    def __init__(self, refuses: Any) -> None:
        self.refuses = refuses
        self.asked: list[dict[str, str]] = []

    def __call__(self, path: Any, sess_options: Any = None, providers: Any = None,
                 provider_options: Any = None) -> Any:
        first = dict(provider_options[0])
        self.asked.append(first)
        why = self.refuses(first)
        if why:
            print("*************** EP Error ***************")
            print(f"EP Error {why} when using {providers}")
            print(f"Falling back to {providers[1:]} and retrying.")
            return SimpleNamespace(get_providers=lambda: list(providers[1:]))
        return SimpleNamespace(get_providers=lambda: list(providers))


def created_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: str, tuning: SessionTuning,
                 refuses: Any) -> tuple[Any, list[dict[str, str]]]:
    import onnxruntime as ort

    from livecam.runtime import sessions
    from tests.standins.inswapper import build_inswapper

    fake = FallingBack(refuses)
    monkeypatch.setattr(ort, "InferenceSession", fake)
    choice = resolve_providers([provider], ort_available=GPU_BOX).for_lane(0).tuned(tuning)
    try:
        return sessions._create(build_inswapper(tmp_path / "m.onnx"), choice, 1), fake.asked
    except Exception as exc:  # noqa: BLE001 - returned for the test to look at
        return exc, fake.asked


def test_a_cuda_graph_that_onnx_runtime_falls_back_from_is_dropped_not_the_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime-gpu answers a refused CUDA graph (a node off the GPU) with a CPU session and
    an "EP Error" on stdout: livecam creates it again on CUDA, without the graph."""
    refused = "This session cannot use the graph capture feature as requested by the user"
    session, asked = created_with(monkeypatch, tmp_path, "cuda", SessionTuning(cuda_graph=True),
                                  lambda o: refused if "enable_cuda_graph" in o else "")
    assert session.get_providers()[0] == "CUDAExecutionProvider"
    assert ["enable_cuda_graph" in o for o in asked] == [True, False]


def test_tensorrt_profiles_that_onnx_runtime_wants_more_of_are_dropped(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT's TensorRT provider refuses explicit profiles that miss a dynamic input of a
    TensorRT subgraph (its names follow how the graph was split): created again without
    profiles (TensorRT sizes its engines to the shapes as they come), the CUDA graph kept."""
    refused = ("User needs to provide all the dynamic shape inputs with associated profiles if they want to "
               "explicitly set profiles through provider options.")
    tuning = SessionTuning(cuda_graph=True, trt_profile=(("source", ((1, 512), (1, 512), (8, 512))),))
    session, asked = created_with(monkeypatch, tmp_path, "tensorrt", tuning,
                                  lambda o: refused if "trt_profile_min_shapes" in o else "")
    assert session.get_providers()[0] == "TensorrtExecutionProvider"
    assert [("trt_profile_min_shapes" in o, "trt_cuda_graph_enable" in o) for o in asked] == [(True, True),
                                                                                              (False, True)]


def test_another_refusal_is_not_retried_and_names_the_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TensorRT build may take minutes: a refusal that no lighter option answers is said at
    once, as the provider failing to start."""
    from livecam.errors import ProviderStartError

    tuning = SessionTuning(trt_profile=(("source", ((1, 512), (1, 512), (8, 512))),))
    error, asked = created_with(monkeypatch, tmp_path, "tensorrt", tuning, lambda o: "TensorRT input: out of memory")
    assert isinstance(error, ProviderStartError) and "fell back from tensorrt" in error.message
    assert len(asked) == 1
