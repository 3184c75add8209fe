"""The run's own engine beside its lanes: where a run hands every frame to Engine.lanes()
(`livecam video`, `livecam run`, bench), Engine.create(lanes=True) builds the run's processors on
their models' descriptions (BuildContext.describe_only): the swapper, the enhancer (and its fast
model), the occluder and the face parser get no session with the run's choice (lane None), so
each heavy model is created once per lane only. The run's engine still analyses, prepares and
holds the knobs, which reach every lane; `livecam image` still processes on real sessions.

No GPU here: test_joined_tuning.on_a_fake_gpu gives the run a CUDA ProviderChoice, creates every
session on the CPU provider and lists the choice each was asked for."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.frame import FramePacket
from livecam.models.store import ModelDescription
from livecam.pipeline.engine import Engine
from livecam.pipeline.file import OutFrame, run_frames
from livecam.pipeline.governor import default_steps
from livecam.settings import (AnalysisSettings, EnhanceSettings, ImageJob, LiveJob, ProcessingSettings,
                              RuntimeSettings, SwapSettings, VideoJob)
from tests.runtime.test_device_io import within_a_level
from tests.runtime.test_joined_tuning import Created, on_a_fake_gpu, photo
from tests.standins.enhancers import build_enhancer
from tests.standins.gfpgan import build_gfpgan
from tests.standins.masks import build_bisenet, build_xseg
from tests.standins.scrfd import build_scrfd

pytestmark = pytest.mark.usefixtures("fresh_pool")  # tests/runtime/conftest.py

HEAVY = ("inswapper_128", "gfpgan_1.4")
MASKS = ("xseg_1", "bisenet_resnet_34")
K = 2


def settings(models: Path, source: Path, *, masks: bool = False) -> ProcessingSettings:
    runtime = RuntimeSettings(providers=("cuda",), models_dir=models, offline=True, unverified_models=True, quiet=True,
                              execution_threads=K, explicit_threads=True, cuda_graphs=False)
    swap = SwapSettings(model="inswapper_128", face_mask=("box", "occlusion", "region") if masks else ("box",))
    return ProcessingSettings(sources=(source,), frame_processors=("face_swapper", "face_enhancer"), runtime=runtime,
                              swap=swap, enhance=EnhanceSettings(precision="fp32"),
                              analysis=AnalysisSettings(smoothing=0.0))


def with_models(models: Path, *, masks: bool = False, fast: bool = False) -> None:
    build_gfpgan(models / "gfpgan_1.4.onnx", kind="random")
    if fast:
        build_enhancer(models / "gpen_bfr_256.onnx", "gpen_bfr_256")
    if masks:
        build_xseg(models / "xseg_1.onnx")
        build_bisenet(models / "bisenet_resnet_34.onnx")


def made(created: list[Created], model: str) -> list[int | None]:
    """The lanes (None: the run's own choice) that a session of `model` was created for."""
    return sorted((c.choice.lane for c in created if c.model == model), key=lambda lane: -1 if lane is None else lane)


def frames(source: Path, n: int = 4) -> list[np.ndarray]:
    base = cv2.imread(str(source))
    return [np.ascontiguousarray(np.roll(base, 4 * i, axis=1)) for i in range(n)]


def test_the_video_paths_run_engine_holds_no_session_of_the_processors_models(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from livecam.commands.video import create_engine

    created = on_a_fake_gpu(monkeypatch, "cuda")
    with_models(standin_models, masks=True)
    source = photo(faces_dir, tmp_path)
    processing = settings(standin_models, source, masks=True)
    run = create_engine(VideoJob(input=tmp_path / "in.mp4", output=tmp_path / "out.mp4", processing=processing))
    assert isinstance(run, Engine)
    assert all(not made(created, model) for model in HEAVY + MASKS), created  # nothing yet, on any choice
    swapper, enhancer = run.processors
    assert isinstance(swapper._session, ModelDescription) and isinstance(enhancer._chosen._session, ModelDescription)
    lanes = run.lanes()
    assert len(lanes) == K
    for model in HEAVY + MASKS:
        assert made(created, model) == list(range(K)), (model, made(created, model))  # once per lane, never None
    with pytest.raises(RuntimeError, match="lanes"):  # the run's engine never processes a frame
        run.process(FramePacket(index=0, image=frames(source, 1)[0]))

    # The frames the video path writes are the shared path's (the run engine of `image`: real
    # sessions, plain numpy path), within the joined rounding.
    clip = frames(source)
    out: list[FramePacket] = []
    run_frames((OutFrame(f.copy(), i / 25) for i, f in enumerate(clip)), out.append, run, workers=K, label=False,
               max_in_flight=4, lanes=lanes)
    shared = Engine.create(processing, live=False, progress=False)
    assert None in made(created, "inswapper_128")  # the engine without lanes=True opened the real sessions
    assert len(out) == len(clip)
    for packet in out:
        want = FramePacket(index=0, image=clip[packet.index].copy())
        shared.analyse(want, track=False)
        assert want.faces
        shared.process(want)
        assert not np.array_equal(want.image, clip[packet.index])
        within_a_level(packet.image, want.image, exact=0.95)


def test_the_live_paths_run_engine_holds_no_session_and_its_warm_up_processes_on_the_lanes(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from livecam.commands import live
    from tests.videos import make_clip

    created = on_a_fake_gpu(monkeypatch, "cuda")
    with_models(standin_models, fast=True)
    build_scrfd(standin_models / "det_10g.onnx")
    source = photo(faces_dir, tmp_path)
    camera = make_clip(tmp_path / "clip.mp4", frames=6, size=(320, 240), fps=12, audio=False,
                       source_image=faces_dir / "biden.jpg")
    built: list[Engine] = []
    warm_up = live.warm_up

    def kept(engine: Engine) -> None:
        built.append(engine)
        warm_up(engine)

    monkeypatch.setattr(live, "warm_up", kept)
    rec = tmp_path / "rec.mp4"
    live.run_live(LiveJob(processing=settings(standin_models, source), camera=str(camera), output=str(rec),
                          realtime=False, degrade=False, watermark=False, label=False))
    assert rec.is_file()
    for model in (*HEAVY, "gpen_bfr_256"):
        assert made(created, model) == list(range(K)), (model, made(created, model))
    # det_10g: the run's own session (the photos) and the analysis lane's, one per det size the
    # governor steps through (the frames); the processing lanes, warmed on the faces the run
    # found, build none.
    assert made(created, "det_10g") == [None, K, K]
    (run,) = built
    assert run.fast_enhancer == "gpen_bfr_256"  # the governor's knob, from the descriptions


def test_image_on_a_gpu_choice_still_opens_the_run_engines_sessions(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from livecam.commands.image import run_image

    created = on_a_fake_gpu(monkeypatch, "cuda")
    with_models(standin_models)
    source = photo(faces_dir, tmp_path)
    out = tmp_path / "out.png"
    run_image(ImageJob(input=source, output=out, processing=settings(standin_models, source), label=False,
                       watermark=False))
    for model in HEAVY:
        assert made(created, model) == [None], (model, made(created, model))
    before, after = cv2.imread(str(source)), cv2.imread(str(out))
    assert before.shape == after.shape and not np.array_equal(before, after)


def test_the_governors_fast_enhancer_and_mask_model_steps_reach_every_lane(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_a_fake_gpu(monkeypatch, "cuda")
    with_models(standin_models, masks=True, fast=True)
    processing = settings(standin_models, photo(faces_dir, tmp_path), masks=True)
    run = Engine.create(replace(processing, runtime=replace(processing.runtime, quiet=True)), live=True,
                        progress=False, lanes=True)
    lanes = run.lanes()
    assert len(lanes) == K
    steps = {s.name: s for s in default_steps(run, det_size=None)}
    assert {"mask models off", "enhancer gpen_bfr_256"} <= steps.keys()
    steps["mask models off"].apply()
    steps["enhancer gpen_bfr_256"].apply()
    for lane in lanes:
        swapper, enhancer = lane.processors
        assert not swapper._masker.models_on and enhancer.model_name == "gpen_bfr_256"
    steps["mask models off"].undo()
    steps["enhancer gpen_bfr_256"].undo()
    for lane in lanes:
        swapper, enhancer = lane.processors
        assert swapper._masker.models_on and enhancer.model_name == "gfpgan_1.4"


@pytest.mark.parametrize("mode", ["live", "video"])
def test_bench_processes_on_the_lanes_only(mode: str, tmp_path: Path, faces_dir: Path, standin_models: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from livecam.commands.bench import _run_bench
    from livecam.settings import BenchJob

    created = on_a_fake_gpu(monkeypatch, "cuda")
    with_models(standin_models)
    build_scrfd(standin_models / "det_10g.onnx")
    job = BenchJob(processing=settings(standin_models, photo(faces_dir, tmp_path)), mode=mode, frames=4,
                   resolution=(320, 240))
    _run_bench(job)  # the run's engine warms up by analysing only: its process() would raise
    for model in HEAVY:
        assert made(created, model) == list(range(K)), (model, made(created, model))
    # live detects on the analysis lane (two det sizes), a file on every lane (one)
    assert made(created, "det_10g") == ([None, K, K] if mode == "live" else [None, *range(K)])


def test_next_source_on_the_described_run_engine_reaches_every_lane(
        tmp_path: Path, faces_dir: Path, standin_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_a_fake_gpu(monkeypatch, "cuda")
    with_models(standin_models)
    folder = tmp_path / "sources"
    folder.mkdir()
    for name in ("biden.jpg", "obama.jpg"):
        image = cv2.imread(str(faces_dir / name))
        cv2.imwrite(str(folder / name), cv2.resize(image, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA))
    run = Engine.create(settings(standin_models, folder), live=True, progress=False, lanes=True)
    lanes = run.lanes()
    assert len(lanes) == K and isinstance(run.processors[0]._session, ModelDescription)
    before = [lane.processors[0]._latents[0].copy() for lane in lanes]
    assert run.next_source() == "obama.jpg"  # prepare() on the descriptions: the emap is read from the file
    for lane, old in zip(lanes, before):
        assert lane.sources == run.sources and not np.allclose(lane.processors[0]._latents[0], old)


@pytest.mark.parametrize("live", [False, True])
def test_arcface_sits_only_on_the_lanes_that_match_references(live: bool, tmp_path: Path, faces_dir: Path,
                                                              standin_models: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """--reference: frames' faces are embedded where they are analysed, a file's lanes or a
    live run's analysis lane (lane K), and that lane still keeps the reference's face; a live
    run's processing lanes, and any lane of a run without --reference or --map, hold no ArcFace
    (the source is embedded once, on the run's own engine)."""
    created = on_a_fake_gpu(monkeypatch, "cuda")
    with_models(standin_models)
    source = photo(faces_dir, tmp_path)
    plain = settings(standin_models, source)
    Engine.create(plain, live=live, progress=False, lanes=True).lanes()
    assert made(created, "w600k_r50") == [None]
    created.clear()
    matching = replace(plain, analysis=replace(plain.analysis, reference=(source,), many_faces=True))
    run = Engine.create(matching, live=live, progress=False, lanes=True)
    lanes = run.lanes()
    assert made(created, "w600k_r50") == ([K] if live else list(range(K)))  # the run's own: pooled above
    group, face = cv2.imread(str(faces_dir / "group6.jpg")), run.sources[0].image[..., :3]
    crowd = np.zeros((max(group.shape[0], face.shape[0]), group.shape[1] + face.shape[1], 3), np.uint8)
    crowd[:group.shape[0], :group.shape[1]] = group
    crowd[:face.shape[0], group.shape[1]:] = face
    packet = FramePacket(index=0, image=crowd)
    (run if live else lanes[0]).analyse(packet, track=live)
    assert len(packet.faces) == 1 and packet.faces[0].bbox[0] >= group.shape[1]  # of all faces, the reference's
    everyone = FramePacket(index=0, image=crowd)
    Engine.create(replace(plain, analysis=replace(plain.analysis, many_faces=True)), live=False,
                  progress=False).analyse(everyone, track=False)
    assert len(everyone.faces) > 2
