"""GPU memory on lanes: a GPU lane holds the swapper's and the enhancer's weights once, in their
joined sessions (runtime/graphs.pixel_front); the plain session's place is taken by the model's
description (ModelStore.open_joined / describe), read once per file on the CPU. Only a join
that fails opens the plain session on the lane, whose frames then come out as before.

No GPU here: test_joined_tuning.on_a_fake_gpu gives the run a CUDA ProviderChoice, creates every
session on the CPU provider and lists the choice each was asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.frame import FramePacket
from livecam.models import store as store_module
from livecam.models.store import ModelDescription, ModelStore
from livecam.pipeline.engine import Engine
from livecam.runtime import sessions
from livecam.runtime.binding import BoundSession
from livecam.runtime.providers import resolve_providers
from livecam.settings import RuntimeSettings
from tests.runtime.test_device_io import within_a_level
from tests.runtime.test_joined_tuning import GPU_BOX, Created, engine, on_a_fake_gpu, photo
from tests.standins.enhancers import build_enhancer
from tests.standins.gfpgan import build_gfpgan
from tests.standins.scrfd import build_scrfd

pytestmark = pytest.mark.usefixtures("fresh_pool")  # tests/runtime/conftest.py

HEAVY = ("inswapper_128", "gfpgan_1.4")  # the files whose weights a lane must hold once


def on_lanes(created: list[Created], model: str) -> list[Created]:
    return [c for c in created if c.model == model and c.choice.lane is not None]


def lane_frame(run: Engine, lane: Engine) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input, the run's own engine's frame, the lane's frame) for the source photo, on the same faces."""
    image = np.ascontiguousarray(run.sources[0].image[..., :3])
    packet = FramePacket(index=0, image=image.copy())
    run.analyse(packet, track=False)
    assert packet.faces, "the source photo's face was not found"
    faces = list(packet.faces)
    run.process(packet)
    on_lane = FramePacket(index=0, image=image.copy(), faces=faces)
    lane.process(on_lane)
    return image, packet.image, on_lane.image


def test_each_lane_holds_the_swap_and_enhance_weights_once(tmp_path: Path, faces_dir: Path, standin_models: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    created = on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    run = engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=False)
    lanes = run.lanes()
    assert len(lanes) == 2
    for model in HEAVY:
        sessions_of = on_lanes(created, model)
        assert sorted(c.choice.lane for c in sessions_of) == [0, 1], sessions_of  # one per lane
        assert all(c.front for c in sessions_of), sessions_of  # and that one joined: no plain lane session
    for lane in lanes:
        swapper, enhancer = lane.processors
        assert isinstance(swapper._session, ModelDescription) and swapper._joined is not None
        assert isinstance(enhancer._chosen._session, ModelDescription) and enhancer._chosen._joined is not None
    # The lane's frame is the plain path's (the run's own engine), within the joined rounding.
    image, plain, got = lane_frame(run, lanes[0])
    assert not np.array_equal(plain, image)
    within_a_level(got, plain, exact=0.95)


def test_the_lanes_read_a_models_description_once(tmp_path: Path, faces_dir: Path, standin_models: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    read: list[str] = []
    real = store_module._cpu_session

    def counted(path: Path) -> Any:
        read.append(Path(path).stem)
        return real(path)

    monkeypatch.setattr(store_module, "_cpu_session", counted)
    engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=False).lanes()
    assert sorted(read) == sorted(HEAVY)  # K = 2 lanes, one reading per file


def test_a_lane_whose_join_fails_opens_the_plain_session_and_swaps(tmp_path: Path, faces_dir: Path,
                                                                   standin_models: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    created = on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("no such graph")

    monkeypatch.setattr(sessions, "joined_model", refused)  # every Front's build fails
    run = engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=False)
    lanes = run.lanes()
    for model in HEAVY:
        sessions_of = on_lanes(created, model)
        assert sorted(c.choice.lane for c in sessions_of if not c.front) == [0, 1], sessions_of
    swapper, enhancer = lanes[1].processors
    assert swapper._joined is None and not isinstance(swapper._session, ModelDescription)
    assert enhancer._chosen._joined is None and not isinstance(enhancer._chosen._session, ModelDescription)
    image, plain, got = lane_frame(run, lanes[1])
    assert not np.array_equal(got, image)  # the face was swapped and restored
    within_a_level(got, plain)  # the same plain path as the run's own engine


def test_a_file_the_cpu_cannot_describe_keeps_the_plain_session_beside_the_joined(
        standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    created = on_a_fake_gpu(monkeypatch, "cuda")
    monkeypatch.setattr(store_module, "_description", lambda path: None)  # as for an fp16 kernel the CPU lacks
    store = ModelStore(RuntimeSettings(models_dir=standin_models, offline=True, unverified_models=True, quiet=True))
    lane = resolve_providers(["cuda"], ort_available=GPU_BOX).for_lane(0)
    from livecam.processors.face_swapper import INSWAPPER, pixel_front

    model, joined = store.open_joined("inswapper_128", lane, 1, lambda described: pixel_front(INSWAPPER, described))
    assert joined is not None and not isinstance(model, ModelDescription)
    assert [c.front.startswith("swap_pixels_") for c in created] == [False, True]  # plain, then joined


def test_a_description_is_what_onnx_runtime_reports(standin_models: Path) -> None:
    store = ModelStore(RuntimeSettings(models_dir=standin_models, offline=True, unverified_models=True, quiet=True))
    described = store.describe("inswapper_128")
    assert described is not None
    session = sessions.get_session(store.path("inswapper_128"), resolve_providers(["cpu"]))
    for mine, ort in ((described.get_inputs(), session.get_inputs()), (described.get_outputs(), session.get_outputs())):
        assert [(a.name, a.shape, a.type) for a in mine] == [(a.name, a.shape, a.type) for a in ort]
    with pytest.raises(RuntimeError, match="cannot run"):
        described.run(None, {})


def test_a_live_lane_holds_the_governors_fast_enhancer_once_too(tmp_path: Path, faces_dir: Path,
                                                                 standin_models: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    created = on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    build_enhancer(standin_models / "gpen_bfr_256.onnx", "gpen_bfr_256")
    lanes = engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=False, live=True).lanes()
    for model in (*HEAVY, "gpen_bfr_256"):
        sessions_of = on_lanes(created, model)
        assert sorted(c.choice.lane for c in sessions_of) == [0, 1] and all(c.front for c in sessions_of), model
    fast = lanes[0].processors[1]._fast
    assert isinstance(fast._session, ModelDescription) and fast._joined is not None


@pytest.mark.parametrize("live", [False, True])
def test_a_lanes_detector_runs_in_its_joined_sessions_only(tmp_path: Path, faces_dir: Path, standin_models: Path,
                                                            monkeypatch: pytest.MonkeyPatch, live: bool) -> None:
    """det_10g on a GPU lane: one joined session per det size the run can step to, and no plain
    session beside them (its description stands in for it). A file's lanes detect at their one
    size; a live run detects on its analysis lane (lane 2 of 2 + 1) at the governor's two sizes,
    and its processing lanes hold no detector. The lanes still find the face, as the run's own
    analyser does."""
    created = on_a_fake_gpu(monkeypatch, "cuda")
    build_scrfd(standin_models / "det_10g.onnx")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    # the stand-in's box is not on the face: FaceMesh, which confirms each new track, rejects it
    monkeypatch.setattr("livecam.faces.analyser.is_face", lambda *args, **kwargs: True)
    run = engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=False, live=live)
    lanes = run.lanes()
    expected = ([(2, "scrfd_letterbox_320"), (2, "scrfd_letterbox_640")] if live
                else [(0, "scrfd_letterbox_640"), (1, "scrfd_letterbox_640")])
    assert sorted((c.choice.lane, c.front) for c in on_lanes(created, "det_10g")) == expected
    image = np.ascontiguousarray(run.sources[0].image[..., :3])
    own = FramePacket(index=0, image=image.copy())
    run.analyse(own, track=False)
    packets = [FramePacket(index=0, image=image.copy()) for _ in range(1 if live else len(lanes))]
    for packet, lane in zip(packets, [run] if live else lanes):
        lane.analyse(packet, track=live)  # live: track=True runs on the analysis lane
        assert len(packet.faces) == len(own.faces) == 1
        assert np.allclose(packet.faces[0].bbox, own.faces[0].bbox, atol=2.0)  # the letterbox's rounding


def test_a_lane_whose_detector_join_fails_opens_the_plain_detector_and_finds_the_face(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    created = on_a_fake_gpu(monkeypatch, "cuda")
    build_scrfd(standin_models / "det_10g.onnx")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("no such graph")

    monkeypatch.setattr(sessions, "joined_model", refused)
    run = engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=False)
    lanes = run.lanes()
    assert sorted(c.choice.lane for c in on_lanes(created, "det_10g") if not c.front) == [0, 1]
    image = np.ascontiguousarray(run.sources[0].image[..., :3])
    expected = FramePacket(index=0, image=image.copy())
    run.analyse(expected, track=False)
    for lane in lanes:
        packet = FramePacket(index=0, image=image.copy())
        lane.analyse(packet, track=False)
        assert [f.bbox.tolist() for f in packet.faces] == [f.bbox.tolist() for f in expected.faces]


def test_a_lanes_dynamic_batch_enhancer_whose_join_fails_restores_one_crop_a_call(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of every face would be a new shape for each face count (a cuDNN search or a
    TensorRT tuning mid-stream): on a GPU lane the plain enhancer takes one crop a call too."""
    on_a_fake_gpu(monkeypatch, "cuda")
    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random", dynamic_batch=True)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("no such graph")

    monkeypatch.setattr(sessions, "joined_model", refused)
    batches: list[int] = []
    real_run = BoundSession.run

    def recorded(self: BoundSession, output_names: Any, feeds: Any, *args: Any, **kwargs: Any) -> Any:
        if "input" in feeds and feeds["input"].shape[1:] == (3, 512, 512):
            batches.append(feeds["input"].shape[0])
        return real_run(self, output_names, feeds, *args, **kwargs)

    monkeypatch.setattr(BoundSession, "run", recorded)
    run = engine(standin_models, photo(faces_dir, tmp_path), cuda_graphs=False)
    _, enhancer = run.lanes()[0].processors
    assert enhancer._chosen._joined is None and not enhancer.batched
    rng = np.random.default_rng(0)
    crops = [rng.integers(0, 256, (512, 512, 3), dtype=np.uint8) for _ in range(3)]
    batches.clear()
    restored = enhancer.restore(crops)
    assert batches == [1, 1, 1] and len(restored) == 3
    # the same restorations as the run's own batched session would give, crop by crop
    alone = [enhancer.restore([crop])[0] for crop in crops]
    assert all(np.array_equal(a, b) for a, b in zip(restored, alone))
