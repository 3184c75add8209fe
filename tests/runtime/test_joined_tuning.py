"""The session tuning of a lane's joined sessions (runtime/graphs.Front; issue 17 items 4 and 5):
tuned on the joined model's own inputs, so that the swapper's and the enhancer's pixel fronts,
fixed at the run's one shape, get a CUDA graph and no TensorRT profile, and the detector with its
letterbox gets no graph and a profile over frame sides; and, with CUDA graphs, every lane's
joined swapper and enhancer has run before the first frame.

No GPU here: the run is given a CUDA or TensorRT ProviderChoice (resolve_providers with a fake
list of available providers, as test_session_tuning.py does) whose sessions are created on the
CPU provider, and the tests read the choice each pooled session was created with."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.faces import scrfd
from livecam.models.store import ModelStore
from livecam.pipeline.engine import Engine
from livecam.processors import face_enhancer, face_swapper
from livecam.runtime import graphs, sessions
from livecam.runtime.binding import BoundSession
from livecam.runtime.providers import (PROFILE_FRAME_H, PROFILE_FRAME_W, ProviderChoice, model_tuning, profile_for,
                                       resolve_providers)
from livecam.settings import AnalysisSettings, EnhanceSettings, ProcessingSettings, RuntimeSettings, SwapSettings
from tests.standins import cpu_session
from tests.standins.enhancers import build_enhancer
from tests.standins.gfpgan import build_gfpgan
from tests.standins.inswapper import build_inswapper
from tests.standins.scrfd import build_scrfd

GPU_BOX = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


@dataclass(frozen=True)
class Created:
    model: str  # the file's stem
    front: str  # the joined Front's name, "" for the plain session
    choice: ProviderChoice  # what the session was created with

    def options(self, ort_name: str) -> dict[str, str]:
        return dict(dict(self.choice.ort_providers)[ort_name])


pytestmark = pytest.mark.usefixtures("fresh_pool")  # tests/runtime/conftest.py


def on_a_fake_gpu(monkeypatch: pytest.MonkeyPatch, provider: str) -> list[Created]:
    """Runs get `provider`'s ProviderChoice (as on a GPU box: lanes, fronts); every session is
    created on the CPU provider instead, and listed with the choice it was asked for."""
    choice = resolve_providers([provider], ort_available=GPU_BOX)
    monkeypatch.setattr("livecam.pipeline.engine.usable_choice", lambda requested, probe: (choice, None))
    monkeypatch.setattr(ProviderChoice, "device", property(lambda self: "cpu"))  # tensors in host memory
    monkeypatch.setattr("livecam.runtime.lanes.uses_device_fronts", lambda providers: providers.lane is not None)
    created: list[Created] = []
    real = sessions._create
    cpu = resolve_providers(["cpu"])

    def on_the_cpu(model_path: Path, providers: ProviderChoice, threads: int, front: Any = None) -> Any:
        created.append(Created(Path(model_path).stem, front.name if front else "", providers))
        return real(model_path, cpu.for_lane(providers.lane), threads, front)

    monkeypatch.setattr(sessions, "_create", on_the_cpu)
    return created


def photo(faces_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "biden.png"
    image = cv2.imread(str(faces_dir / "biden.jpg"))
    cv2.imwrite(str(out), cv2.resize(image, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA))
    return out


def engine(models: Path, source: Path, *, cuda_graphs: bool, boost: int | None = None, live: bool = False) -> Engine:
    runtime = RuntimeSettings(providers=("cuda",), models_dir=models, offline=True, unverified_models=True, quiet=True,
                              execution_threads=2, explicit_threads=True, cuda_graphs=cuda_graphs)
    settings = ProcessingSettings(sources=(source,), frame_processors=("face_swapper", "face_enhancer"),
                                  runtime=runtime, swap=SwapSettings(model="inswapper_128", pixel_boost=boost),
                                  enhance=EnhanceSettings(precision="fp32"),
                                  analysis=AnalysisSettings(smoothing=0.0))  # no smoothing by the clock
    return Engine.create(settings, live=live, progress=False)


def bytes_session(model: bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def joined(created: list[Created], prefix: str) -> list[Created]:
    return [c for c in created if c.front.startswith(prefix) and c.choice.lane is not None]


# ---- the joined model's inputs -------------------------------------------------------------------

def test_joined_inputs_are_those_of_the_joined_model(tmp_path: Path) -> None:
    """graphs.joined_inputs (the front built alone, the model's other inputs as given) names and
    shapes the inputs ORT reads from the joined model itself."""
    cases = [
        (build_scrfd(tmp_path / "det.onnx"), scrfd.front(640)),
        (build_inswapper(tmp_path / "swap_n.onnx", batch="N"),
         face_swapper.pixel_front(face_swapper.INSWAPPER, cpu_session(tmp_path / "swap_n.onnx"), tiles=2)),
        (build_inswapper(tmp_path / "swap_1.onnx"),
         face_swapper.pixel_front(face_swapper.INSWAPPER, cpu_session(tmp_path / "swap_1.onnx"), tiles=2)),
        (build_gfpgan(tmp_path / "gfpgan.onnx", dynamic_batch=True),
         face_enhancer.pixel_front(cpu_session(tmp_path / "gfpgan.onnx"), 512)),
        (build_enhancer(tmp_path / "codeformer.onnx", "codeformer"),
         face_enhancer.pixel_front(cpu_session(tmp_path / "codeformer.onnx"), 512)),
    ]
    for path, front in cases:
        plain = cpu_session(path)
        model_inputs = [(i.name, tuple(d if isinstance(d, int) else None for d in i.shape)) for i in plain.get_inputs()]
        got = graphs.joined_inputs(front, model_inputs)
        session = bytes_session(graphs.joined_model(str(path), front))
        want = [(i.name, tuple(d if isinstance(d, int) else None for d in i.shape)) for i in session.get_inputs()]
        assert sorted(got, key=str) == sorted(want, key=str), front.name
    det, swap_n, swap_1, gfpgan, codeformer = (graphs.joined_inputs(front, [(i.name, tuple(
        d if isinstance(d, int) else None for d in i.shape)) for i in cpu_session(path).get_inputs()])
        for path, front in cases)
    assert det == [("pre_image", (None, None, 3)), ("pre_resized", (2,))]  # the frame's sides stay open
    assert dict(swap_n) == {"pre_image": (4, 128, 128, 3), "source": (4, 512)}  # k x k tiles in one call
    assert dict(swap_1) == {"pre_image": (1, 128, 128, 3), "source": (1, 512)}  # one tile a call
    assert gfpgan == [("pre_image", (1, 512, 512, 3))]  # one crop a call, whatever the batch
    assert dict(codeformer) == {"pre_image": (1, 512, 512, 3), "weight": (1,)}


def test_a_frame_input_ranges_over_frame_sides() -> None:
    det = [("pre_image", (None, None, 3)), ("pre_resized", (2,))]
    assert (PROFILE_FRAME_H, PROFILE_FRAME_W) == ((64, 720, 2160), (64, 1280, 3840))
    assert profile_for(det, frames=("pre_image",)) == (
        ("pre_image", ((64, 64, 3), (720, 1280, 3), (2160, 3840, 3))),)
    assert profile_for(det)[0][1][2] == (8, 640, 3)  # without the kind: read as a batch and a side, wrong
    lane = resolve_providers(["cuda"], ort_available=GPU_BOX).for_lane(0)
    assert not model_tuning(det, lane, frames=("pre_image",)).cuda_graph
    assert model_tuning([("pre_image", (1, 512, 512, 3))], lane).cuda_graph


# ---- what every lane's sessions are created with ---------------------------------------------------

def test_with_cuda_graphs_the_pixel_fronts_get_a_graph_and_the_detector_none(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    created = on_a_fake_gpu(monkeypatch, "cuda")
    build_scrfd(standin_models / "det_10g.onnx")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    run = engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=True)
    lanes = run.lanes()
    assert len(lanes) == 2
    swappers, enhancers = joined(created, "swap_pixels_"), joined(created, "enhance_pixels_")
    detectors = joined(created, "scrfd_letterbox_")
    for group in (swappers, enhancers, detectors):
        assert sorted({c.choice.lane for c in group}) == [0, 1]  # every lane's own
    for c in swappers + enhancers:
        assert c.options("CUDAExecutionProvider").get("enable_cuda_graph") == "1", c
    for c in detectors:  # the frame's height and width are open
        assert "enable_cuda_graph" not in c.options("CUDAExecutionProvider"), c
    # The run's own engine (the shared pool) has no graphs and no fronts.
    assert all(not c.front and "enable_cuda_graph" not in c.options("CUDAExecutionProvider")
               for c in created if c.choice.lane is None)


def test_without_cuda_graphs_no_session_gets_one(tmp_path: Path, faces_dir: Path, standin_models: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    created = on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=False).lanes()
    assert joined(created, "swap_pixels_") and joined(created, "enhance_pixels_")
    assert not any("enable_cuda_graph" in c.options("CUDAExecutionProvider") for c in created)


def test_nhwc_goes_to_the_fp16_models_sessions_only_when_asked(tmp_path: Path, faces_dir: Path,
                                                                standin_models: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """RuntimeSettings.nhwc_fp16: CUDA's prefer_nhwc on the enhancer's fp16 copy (plain and
    joined, every lane) and never on an fp32 model; without it, on none."""
    from dataclasses import replace

    created = on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    source = photo(faces_dir, tmp_path)
    for asked in (True, False):
        sessions.clear_pool()
        created.clear()
        settings = engine(standin_models, source, cuda_graphs=False).settings
        settings = replace(settings, runtime=replace(settings.runtime, nhwc_fp16=asked),
                           enhance=replace(settings.enhance, precision="fp16"))
        Engine.create(settings, live=False, progress=False).lanes()
        fp16 = [c for c in created if c.model.startswith("gfpgan_1.4.")]  # models/fp16's copy
        fp32 = [c for c in created if not c.model.startswith("gfpgan_1.4.")]
        assert {c.choice.lane for c in fp16} == {None, 0, 1} and any(c.front for c in fp16)
        assert all((c.options("CUDAExecutionProvider").get("prefer_nhwc") == "1") == asked for c in fp16), fp16
        assert fp32 and not any("prefer_nhwc" in c.options("CUDAExecutionProvider") for c in fp32)


def test_tensorrt_profiles_the_detectors_frame_and_not_the_pixel_fronts(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector's frame over frame sides, and its `resized` input (the Resize's sizes, a
    TensorRT shape tensor, which ORT's TensorRT provider requires in an explicit profile) over
    the values it takes at the det size: 1 x 1 to 640 x 640, a 16:9 frame's 360 x 640 the opt."""
    created = on_a_fake_gpu(monkeypatch, "tensorrt")
    build_scrfd(standin_models / "det_10g.onnx")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=True).lanes()
    trt = "TensorrtExecutionProvider"
    detectors = joined(created, "scrfd_letterbox_")
    assert detectors
    for c in detectors:
        options = c.options(trt)
        assert options["trt_profile_min_shapes"] == "pre_image:64x64x3,pre_resized:1x1"
        assert options["trt_profile_opt_shapes"] == "pre_image:720x1280x3,pre_resized:360x640"
        assert options["trt_profile_max_shapes"] == "pre_image:2160x3840x3,pre_resized:640x640"
        assert "trt_cuda_graph_enable" not in options
    for c in joined(created, "swap_pixels_") + joined(created, "enhance_pixels_"):
        options = c.options(trt)
        assert not any(k.startswith("trt_profile_") for k in options), c
        assert options["trt_cuda_graph_enable"] == "True"
    # The plain detector keeps its own profile (its input, a batch and a det side).
    plain = [c for c in created if c.model == "det_10g" and not c.front]
    assert plain and all(c.options(trt)["trt_profile_min_shapes"] == "input.1:1x3x320x320" for c in plain)


# ---- the warm-up -------------------------------------------------------------------------------------

def test_with_cuda_graphs_every_joined_session_has_run_before_any_frame_lane_after_lane(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The live run's swapper, enhancer and the governor's fast enhancer (gpen_bfr_256 present):
    bound to their buffers at the one shape they will run at, three runs each (ORT captures on
    the third), every lane's runs before the next lane's first."""
    on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    build_enhancer(standin_models / "gpen_bfr_256.onnx", "gpen_bfr_256")
    order: list[int] = []
    real_run = BoundSession.run

    def counted(self: BoundSession, *args: Any, **kwargs: Any) -> Any:
        order.append(id(self))
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(BoundSession, "run", counted)
    run = engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=True, boost=256, live=True)
    lanes = run.lanes()
    assert len(lanes) == 2
    owner: dict[int, int] = {}
    for k, lane in enumerate(lanes):
        swapper, enhancer = lane.processors
        held = {"swapper": swapper._joined, "enhancer": enhancer._chosen._joined,
                "fast enhancer": enhancer._fast._joined}
        for what, session in held.items():
            assert isinstance(session, BoundSession), what
            assert len(session._bound) == 1, what  # one shape: one set of buffers, one graph
            assert order.count(id(session)) >= 3, what
            owner[id(session)] = k
        (key,) = swapper._joined._bound
        assert {name: shape for name, shape, _ in key[1:]}[graphs.PIXELS_IN] == (1, 128, 128, 3)  # one tile a call
    lane_of_run = [owner[i] for i in order if i in owner]
    assert lane_of_run == sorted(lane_of_run)  # lane 0's runs, then lane 1's


@pytest.mark.parametrize("batch", [1, "N"])
def test_the_fixed_pixel_fronts_swap_pixel_boost_tiles_as_the_plain_path(tmp_path: Path, faces_dir: Path,
                                                                          batch: int | str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Pixel boost 256 (2 x 2 tiles) with a dynamic-batch and a fixed-batch inswapper: the joined
    session's inputs are all fixed, and its swap is the plain path's."""
    from tests.runtime.test_device_io import OBAMA_KPS, built, face_at, source, within_a_level

    monkeypatch.setattr("livecam.runtime.lanes.uses_device_fronts", lambda providers: providers.lane is not None)
    models = tmp_path / "models"
    models.mkdir()
    build_inswapper(models / "inswapper_128.onnx", batch=batch)
    swap = SwapSettings(color_match=False, pixel_boost=256)
    plain = built(models, face_swapper.PROCESSOR, None, swap=swap, swap_model="inswapper_128")
    lane = built(models, face_swapper.PROCESSOR, 0, swap=swap, swap_model="inswapper_128")
    n = 4 if batch == "N" else 1
    assert {i.name: tuple(i.shape) for i in lane._joined.get_inputs()} == {
        graphs.PIXELS_IN: (n, 128, 128, 3), "source": (n, 512)}
    for sw in (plain, lane):
        sw.prepare([source()])
    image = cv2.imread(str(faces_dir / "obama.jpg"))
    got = lane.swap_crop(lane.align(image, face_at(OBAMA_KPS)), lane._latents[0])
    want = plain.swap_crop(plain.align(image, face_at(OBAMA_KPS)), plain._latents[0])
    assert not np.array_equal(want, plain.align(image, face_at(OBAMA_KPS)).crop)
    within_a_level(got, want)


def test_the_store_tunes_a_joined_session_on_its_inputs(tmp_path: Path, standin_models: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """ModelStore.open_session(front=...): the plain session on the catalog's shapes, the joined
    one on graphs.joined_inputs (here the detector: plain profile on input.1, joined on pre_image)."""
    created = on_a_fake_gpu(monkeypatch, "tensorrt")
    build_scrfd(standin_models / "det_10g.onnx")
    store = ModelStore(RuntimeSettings(models_dir=standin_models, offline=True, unverified_models=True, quiet=True))
    lane = resolve_providers(["tensorrt"], ort_available=GPU_BOX).for_lane(0)
    assert store.open_session("det_10g", lane, 1, front=scrfd.front(320)) is not None
    (plain, fronted) = created
    assert plain.front == "" and plain.options("TensorrtExecutionProvider")["trt_profile_max_shapes"] == "input.1:8x3x640x640"
    assert fronted.front == "scrfd_letterbox_320"
    assert fronted.options("TensorrtExecutionProvider")["trt_profile_max_shapes"] == "pre_image:2160x3840x3,pre_resized:320x320"


def test_with_cuda_graphs_each_lane_runs_its_models_on_its_own_thread(tmp_path: Path, faces_dir: Path,
                                                                      standin_models: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT keeps captured graphs per calling thread: the warm-up and every frame of lane k run
    its sessions on lane k's one model thread, not on the pipeline's workers (which change with
    each file); frames still come out in order with the faces swapped. Without graphs the workers
    run them (no thread hand-off)."""
    import threading

    from livecam.pipeline.file import OutFrame, run_frames
    from tests.runtime.test_lanes import sessions_of

    on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    ran_on: dict[int, set[str]] = {}
    real_run = BoundSession.run

    def counted(self: BoundSession, *args: Any, **kwargs: Any) -> Any:
        ran_on.setdefault(id(self), set()).add(threading.current_thread().name)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(BoundSession, "run", counted)
    source = photo(faces_dir, tmp_path)
    base = cv2.resize(cv2.imread(str(faces_dir / "obama.jpg")), None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    frames = [np.roll(base, 3 * i, axis=1) for i in range(6)]
    for graphs_on in (True, False):
        sessions.clear_pool()
        ran_on.clear()
        run = engine(standin_models, source, cuda_graphs=graphs_on)
        lanes = run.lanes()
        for _ in range(2):  # two files: two sets of worker threads
            out: list[Any] = []
            run_frames((OutFrame(f.copy(), i / 25) for i, f in enumerate(frames)), out.append, run, workers=2,
                       label=False, max_in_flight=4, lanes=lanes)
            assert [p.index for p in out] == list(range(len(frames))) and all(p.faces for p in out)
        busy = 0
        here = threading.current_thread().name  # where run.lanes() warmed them
        for k, lane in enumerate(lanes):
            held = {id(s) for s in sessions_of(lane)}
            ran = held & set(ran_on)
            if graphs_on:  # the warm-up runs every lane's joined swapper and enhancer (and more)
                assert len(ran) >= 3
                threads = set().union(*(ran_on[i] for i in ran))
                assert threads == {f"livecam-lane-{k}-models"}, threads
                busy += 1
                continue
            # Without graphs the warm-up runs each lane's analyser models here (FaceAnalyser.warm),
            # and the workers run what they are given (on a loaded machine one worker may take
            # every frame).
            analyser = lane.analyser
            assert {id(analyser.detector.session), id(analyser.landmarker.session)} <= {
                i for i in ran if here in ran_on[i]}
            worked = {i for i in ran if ran_on[i] - {here}}
            assert len(worked) >= 3 or not worked
            busy += bool(worked)
            threads = set().union(*(ran_on[i] - {here} for i in worked))
            assert not any(t.endswith("-models") for t in threads), threads
        assert busy >= 1


def test_a_live_run_with_cuda_graphs_hands_its_frames_to_the_lane_threads(tmp_path: Path, faces_dir: Path,
                                                                          standin_models: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`livecam run` with lanes and graphs: every frame out, in order, the shared path's pixels
    (no deadlock between the process workers and the lanes' model threads)."""
    from livecam.pipeline.live import LiveRun, run_live_pipeline
    from livecam.settings import LiveJob
    from tests.doubles import MemorySink, SyntheticSource

    on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    source = photo(faces_dir, tmp_path)
    image = cv2.resize(cv2.imread(str(faces_dir / "obama.jpg")), None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)

    def live(graphs_on: bool, lanes: bool) -> list[np.ndarray]:
        sessions.clear_pool()
        run = engine(standin_models, source, cuda_graphs=graphs_on, live=True)
        lane_engines = run.lanes() if lanes else []
        options = LiveRun(LiveJob(processing=run.settings, realtime=False, output="none", label=False, degrade=False),
                          lanes=lane_engines, handle_signals=False)
        sink = MemorySink()
        frames = SyntheticSource(image.shape[1], image.shape[0], frames=6, live=False, realtime=False, image=image)
        run_live_pipeline(run, frames, sink, options)
        return list(sink.frames)

    laned, shared = live(True, True), live(False, False)
    assert len(laned) == len(shared) == 6 and not np.array_equal(shared[0], image)  # swapped
    diffs = [int(np.abs(a.astype(int) - b).max()) for a, b in zip(shared, laned)]
    assert max(diffs) <= 1, diffs


def test_a_lane_thread_runs_calls_in_order_and_gives_back_results_and_errors() -> None:
    import threading

    from livecam.errors import ModelError
    from livecam.runtime.lanes import LaneThread

    lane = LaneThread("livecam-lane-test-models")
    seen: list[str] = []

    def where(tag: str) -> str:
        seen.append(tag)
        return threading.current_thread().name

    def broken() -> None:
        raise ModelError("bad model; fix it")

    assert lane.call(where, "a") == "livecam-lane-test-models"
    with pytest.raises(ModelError, match="bad model"):
        lane.call(broken)
    assert lane.call(lambda: lane.call(where, "nested")) == "livecam-lane-test-models"  # no deadlock from inside
    assert seen == ["a", "nested"]
    lane.close()
    lane._thread.join(timeout=5)
    assert not lane._thread.is_alive()
    with pytest.raises(RuntimeError, match="has stopped"):
        lane.call(where, "late")


@pytest.mark.parametrize("live", [False, True])
@pytest.mark.parametrize("detector", ["scrfd", "blazeface"])
def test_with_cuda_graphs_every_analyser_model_has_run_three_times_before_any_frame_without_a_source(
        tmp_path: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch, detector: str, live: bool) -> None:
    """An enhancer-only run (no source photo to warm on): every analysing lane's detector (each
    det size) and its FaceMesh, which frames run only between detections or for a mask, have
    made their three runs (ORT captures on the third) on the lane's own thread before the first
    frame. A file's lanes analyse; a live run analyses on its analysis lane (lane 2)."""
    on_a_fake_gpu(monkeypatch, "cuda")
    build_scrfd(standin_models / "det_10g.onnx")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    runs: dict[int, list[str]] = {}
    real_run = BoundSession.run

    def counted(self: BoundSession, *args: Any, **kwargs: Any) -> Any:
        runs.setdefault(id(self), []).append(threading.current_thread().name)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(BoundSession, "run", counted)
    runtime = RuntimeSettings(providers=("cuda",), models_dir=standin_models, offline=True, unverified_models=True,
                              quiet=True, execution_threads=2, explicit_threads=True, cuda_graphs=True)
    settings = ProcessingSettings(sources=(), frame_processors=("face_enhancer",), runtime=runtime,
                                  enhance=EnhanceSettings(precision="fp32"),
                                  analysis=AnalysisSettings(detector=detector, smoothing=0.0))
    run = Engine.create(settings, live=live, progress=False)
    lanes = run.lanes()
    assert len(lanes) == 2
    analysing = {"livecam-lane-2-analysis": run.analysis_lane} if live else {
        f"livecam-lane-{k}-models": lane for k, lane in enumerate(lanes)}
    for thread, lane in analysing.items():
        assert lane is not None
        analyser = lane.analyser
        models = {"landmarker": analyser.landmarker.session}
        if detector == "scrfd":
            sizes = (320, 640) if live else (640,)
            assert sorted(analyser.detector._by_size) == list(sizes)
            models.update({f"detector @{size}": analyser.detector._by_size[size] for size in sizes})
        else:
            models["detector"] = analyser.detector.session
        for what, session in models.items():
            assert isinstance(session, BoundSession), what
            assert len(runs.get(id(session), [])) >= 3, what
            assert set(runs[id(session)]) == {thread}, what
