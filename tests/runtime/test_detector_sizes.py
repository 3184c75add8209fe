"""The detector on a lane with device fronts (a GPU; forced here on the CPU provider): one
session per det size, the letterbox joined in front with its canvas a constant and det_10g's
input fixed, so that its shape nodes fold away; the lane warm-up builds every size the governor
can step to, so a step builds nothing mid-stream (faces/scrfd.py)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import cv2
import numpy as np
import onnx
import pytest

from livecam.faces.face import Face
from livecam.faces.scrfd import FRONT, ScrfdDetector, front
from livecam.frame import FramePacket
from livecam.models.store import ModelDescription
from livecam.pipeline.engine import Engine
from livecam.pipeline.governor import default_steps
from livecam.runtime import sessions
from livecam.runtime.binding import BoundSession
from livecam.runtime.graphs import joined_model
from livecam.runtime.providers import PROFILE_FRAME_H, frame_in_profile, resolve_providers
from livecam.settings import AnalysisSettings, ProcessingSettings, RuntimeSettings, SwapSettings
from tests.standins import cpu_session
from tests.standins.scrfd import build_scrfd


pytestmark = pytest.mark.usefixtures("fresh_pool")  # tests/runtime/conftest.py


@pytest.fixture
def device_fronts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lanes join their pre-graphs in front, as on a GPU."""
    monkeypatch.setattr("livecam.runtime.lanes.uses_device_fronts", lambda providers: providers.lane is not None)


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the sessions created from now on (model file, and the front joined to it)."""
    names: list[str] = []
    real = sessions._create

    def counting(model_path: Path, providers: Any, threads: int, front: Any = None) -> Any:
        names.append(f"{Path(model_path).stem}+{front.name if front else ''}")
        return real(model_path, providers, threads, front)

    monkeypatch.setattr(sessions, "_create", counting)
    return names


def test_the_fixed_size_detector_finds_the_faces_of_the_plain_path(tmp_path: Path, faces_dir: Path) -> None:
    """On real photos, at 640 and 320, the lane's session of front(size) (uint8 frame in) finds
    the faces of the numpy letterbox and the plain session: every face scoring 0.7 or more on
    either path lies within 2 px (box and keypoints) of one on the other, and the counts agree
    to a few. (The stand-in's random "faces" sit at every score, so the one-level rounding
    difference of the two letterboxes, tests/runtime/test_graphs.py, tips a few of those at the
    threshold either way; a strong face does not move.)"""
    path = build_scrfd(tmp_path / "det.onnx")
    for name, size, fixed, plain in _both_paths(path, faces_dir):
        got = fixed.detect(cv2.imread(str(faces_dir / name)))
        want = plain.detect(cv2.imread(str(faces_dir / name)))
        assert isinstance(fixed.joined, BoundSession) and fixed.joined.get_inputs()[0].name == "pre_image"
        assert len(want) >= 5, "the stand-in should report faces"
        assert abs(len(got) - len(want)) <= max(2, len(want) // 20), (name, size, len(got), len(want))
        for ours, theirs in ((got, want), (want, got)):
            assert all(any(_near(f, g) for g in theirs) for f in ours if f.score >= 0.7), (name, size)


def test_fixing_the_shapes_changes_no_face(tmp_path: Path, faces_dir: Path) -> None:
    """A stand-in with shape nodes (its feature pyramid sized at run time, as det_10g's export):
    front(size) gives exactly the faces of the any-size join (FRONT, the canvas an input)."""
    import onnxruntime as ort

    path = build_scrfd(tmp_path / "det.onnx", shape_ops=True, score_bias=(-8.0, -8.0, -4.0))
    any_size = ort.InferenceSession(joined_model(str(path), FRONT),
                                    providers=["CPUExecutionProvider"])
    for name, size, fixed, _ in _both_paths(path, faces_dir):
        image = cv2.imread(str(faces_dir / name))
        got = fixed.detect(image)
        same = ScrfdDetector(cpu_session(path), det_size=size, joined=any_size).detect(image)
        assert len(got) >= 5 and len(got) == len(same), (name, size)
        assert all(np.allclose(g.bbox, w.bbox, atol=1e-3) and np.allclose(g.kps, w.kps, atol=1e-3)
                   and g.score == pytest.approx(w.score) for g, w in zip(got, same)), (name, size)


def _both_paths(path: Path, faces_dir: Path) -> Iterator[tuple[str, int, ScrfdDetector, ScrfdDetector]]:
    """(photo, det size, the lane's fixed-size detector, the plain detector) for obama.jpg and
    group6.jpg at 640 and 320."""
    lane = resolve_providers(["cpu"]).for_lane(0)

    def fronts(size: int) -> Any:
        return sessions.get_session(path, lane, 1, front(size))

    for name in ("obama.jpg", "group6.jpg"):
        for size in (640, 320):
            yield (name, size, ScrfdDetector(cpu_session(path), det_size=size, fronts=fronts),
                   ScrfdDetector(cpu_session(path), det_size=size))


def _near(a: Face, b: Face) -> bool:
    return bool(np.abs(a.bbox - b.bbox).max() <= 2.0 and np.abs(a.kps - b.kps).max() <= 2.0)


def test_the_fixed_model_has_no_dynamic_dim_past_the_image_input(tmp_path: Path) -> None:
    """front(size): every tensor of the detector (all but the letterbox's own, named pre_...)
    has numbers for dims by ONNX shape inference, where the any-size FRONT leaves them open."""
    path = build_scrfd(tmp_path / "det.onnx", shape_ops=True)
    for which, open_dims in ((front(640), False), (FRONT, True)):
        model = onnx.load_from_string(joined_model(str(path), which))
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
        detector = [v for v in [*inferred.value_info, *inferred.output] if not v.name.startswith("pre_")]
        dynamic = [v.name for v in detector
                   if not all(d.HasField("dim_value") for d in v.type.tensor_type.shape.dim)]
        assert len(detector) > 30 and bool(dynamic) == open_dims, (which.name, dynamic)
        inputs = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
        assert inputs["pre_image"][2] == 3 and all(isinstance(d, str) for d in inputs["pre_image"][:2])


def test_onnx_runtime_folds_the_fixed_models_shape_nodes(tmp_path: Path) -> None:
    """The optimised model (SessionOptions.optimized_model_filepath, the optimisation level
    livecam's sessions use): no Shape node left at a fixed size, fewer nodes than the any-size
    join, whose Shape nodes stay (they would run on the CPU beside a GPU)."""
    import onnxruntime as ort

    path = build_scrfd(tmp_path / "det.onnx", shape_ops=True)
    counts = {}
    for which in (front(640), front(320), FRONT):
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(tmp_path / f"{which.name}.onnx")
        ort.InferenceSession(joined_model(str(path), which),
                             sess_options=options, providers=["CPUExecutionProvider"])
        counts[which.name] = Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)
    dynamic = counts.pop(FRONT.name)
    assert dynamic["Shape"] >= 2
    for fixed in counts.values():
        assert fixed["Shape"] == 0 and sum(fixed.values()) < sum(dynamic.values())


def _settings(models: Path, source: Path, det_size: int = 640) -> ProcessingSettings:
    runtime = RuntimeSettings(providers=("cpu",), models_dir=models, offline=True, unverified_models=True,
                              quiet=True, execution_threads=2, explicit_threads=True, lanes=True)
    return ProcessingSettings(sources=(source,), frame_processors=("face_swapper",), runtime=runtime,
                              analysis=AnalysisSettings(smoothing=0.0, det_size=det_size),
                              swap=SwapSettings(model="inswapper_128"))


def _small(faces_dir: Path, name: str, tmp_path: Path) -> Path:
    img = cv2.imread(str(faces_dir / name))
    out = tmp_path / f"small_{Path(name).stem}.png"
    cv2.imwrite(str(out), cv2.resize(img, (img.shape[1] // 2, img.shape[0] // 2), interpolation=cv2.INTER_AREA))
    return out


def _detector_sessions(lane: Engine) -> dict[int, Any]:
    return dict(lane.analyser.detector._by_size)  # type: ignore[attr-defined]


def test_after_the_lane_warm_up_the_governors_det_size_step_builds_nothing(
        tmp_path: Path, faces_dir: Path, standin_models: Path, device_fronts: None, created: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A live run analyses on its analysis lane (Engine.lanes()): both of the governor's det
    sizes are built and run there before the first frame, so its step builds nothing; the live
    lanes only process, and build no detector."""
    build_scrfd(standin_models / "det_10g.onnx", shape_ops=True)
    # the stand-in's box is not on the face: FaceMesh, which confirms each new track, rejects it
    monkeypatch.setattr("livecam.faces.analyser.is_face", lambda *args, **kwargs: True)
    source = _small(faces_dir, "biden.jpg", tmp_path)
    engine = Engine.create(_settings(standin_models, source), live=True, progress=False)
    assert engine.analyser.detector.joined is None  # type: ignore[attr-defined]  # the run's own: the plain path
    lanes = engine.lanes()
    assert len(lanes) == 2
    tracking = engine.analysis_lane
    assert tracking is not None
    built = _detector_sessions(tracking)  # both sizes built and run (buffers bound)
    assert sorted(built) == [320, 640]
    assert all(isinstance(s, BoundSession) and s._bound for s in built.values())
    assert all(_detector_sessions(lane) == {} for lane in lanes)
    before = len(created)
    assert sum("scrfd_letterbox_320" in n for n in created) == 1

    step = next(s for s in default_steps(engine, det_size=640) if s.name == "detect at 320")
    frame = cv2.imread(str(faces_dir / "obama.jpg"))
    for change in (step.apply, step.undo, step.apply):
        change()
        packet = FramePacket(index=0, image=frame.copy())
        engine.analyse(packet, track=True)
        assert packet.faces
    assert len(created) == before, created[before:]
    assert tracking.analyser.det_size == 320 and tracking.analyser.detector.joined is built[320]  # type: ignore[attr-defined]


def test_a_file_run_warms_its_one_size_and_the_shared_pool_has_no_fronts(
        tmp_path: Path, faces_dir: Path, standin_models: Path, device_fronts: None) -> None:
    """A video file never changes det size: its lanes build that size alone. Without lanes
    (the shared pool) the detector is the plain path, as before."""
    build_scrfd(standin_models / "det_10g.onnx")
    source = _small(faces_dir, "biden.jpg", tmp_path)
    processing = _settings(standin_models, source)
    engine = Engine.create(processing, live=False, progress=False)
    assert [sorted(_detector_sessions(lane)) for lane in engine.lanes()] == [[640], [640]]
    sessions.clear_pool()
    shared = Engine.create(replace(processing, runtime=replace(processing.runtime, lanes=False)), live=True, progress=False)
    assert shared.lanes() == [] and shared.analyser.detector._fronts is None  # type: ignore[attr-defined]


def test_a_det_size_that_was_not_warmed_is_built_on_first_use(
        tmp_path: Path, faces_dir: Path, standin_models: Path, device_fronts: None, created: list[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """--det-size 480 is not one of a 640 run's steps: switching to it still detects, after
    opening its session (said at debug level)."""
    build_scrfd(standin_models / "det_10g.onnx")
    source = _small(faces_dir, "biden.jpg", tmp_path)
    engine = Engine.create(_settings(standin_models, source), live=True, progress=False)
    engine.lanes()
    lane = engine.analysis_lane  # a live run's detector: its analysis lane's
    assert lane is not None
    before = len(created)
    engine.set_det_size(480)
    assert len(created) == before  # switching builds nothing; the first detection does
    frame = cv2.imread(str(faces_dir / "group6.jpg"))
    plain = ScrfdDetector(cpu_session(standin_models / "det_10g.onnx"), det_size=480).detect(frame)
    with caplog.at_level(logging.DEBUG, logger="livecam"):
        got = lane.analyser.detector.detect(frame)
    assert created[before:] == ["det_10g+scrfd_letterbox_480"]
    assert "480x480 detector session on first use" in caplog.text
    assert got and abs(len(got) - len(plain)) <= max(2, len(plain) // 10)
    assert sorted(_detector_sessions(lane)) == [320, 480, 640]


def test_a_frame_outside_the_tensorrt_frame_profile_takes_the_plain_path(tmp_path: Path, faces_dir: Path) -> None:
    """ORT's TensorRT provider runs an explicitly profiled session only on shapes inside the
    profile: a frame taller than PROFILE_FRAME_H's max (portrait 4K) is detected through the
    plain session, opened then (only a description stood in for it), with the plain path's faces;
    the joined session never sees it."""
    path = build_scrfd(tmp_path / "det.onnx")
    lane = resolve_providers(["cpu"]).for_lane(0)
    opened: list[str] = []

    def plain() -> Any:
        opened.append("plain")
        return cpu_session(path)

    session = cpu_session(path)
    described = ModelDescription(path, tuple(session.get_inputs()), tuple(session.get_outputs()))
    detector = ScrfdDetector(described, det_size=640, plain=plain,
                             fronts=lambda size: sessions.get_session(path, lane, 1, front(size)))
    photo = cv2.imread(str(faces_dir / "group6.jpg"))
    tall = cv2.copyMakeBorder(photo, 0, PROFILE_FRAME_H[2] + 1 - photo.shape[0], 0, 0, cv2.BORDER_CONSTANT)
    assert detector.detect(photo) and opened == []  # in the profile: the joined session
    joined = detector.joined
    assert isinstance(joined, BoundSession) and len(joined._bound) == 1
    got = detector.detect(tall)
    assert opened == ["plain"] and len(joined._bound) == 1  # not run on the tall frame
    want = ScrfdDetector(cpu_session(path), det_size=640).detect(tall)
    assert len(got) == len(want) >= 5
    assert all(np.array_equal(g.bbox, w.bbox) for g, w in zip(got, want))
    assert frame_in_profile(*photo.shape[:2]) and not frame_in_profile(*tall.shape[:2])
    assert not frame_in_profile(PROFILE_FRAME_H[0] - 1, 640)
