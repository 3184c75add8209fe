"""Device-side I/O of the swapper and the enhancer (issue 17 item 2), on the CPU provider.

On a GPU lane each of them runs a second session, the model with runtime/graphs.pixel_front
joined around it: the uint8 crop in (the blob is built on the device), the uint8 BGR result out
(the conversion back runs on the device). Here `uses_device_fronts` is forced on for lanes, as
in tests/runtime/test_lanes.py, and every joined result is held to the plain path's, within one
grey level, on the real photos."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import cv2
import numpy as np
import pytest

from livecam.faces.align import FFHQ_512, align_matrix
from livecam.faces.face import Face
from livecam.faces.source import SourceIdentity
from livecam.models.store import ModelStore
from livecam.processors import face_enhancer, face_swapper
from livecam.processors.paste import align_crop
from livecam.processors.registry import BuildContext
from livecam.runtime import graphs, sessions
from livecam.runtime.binding import BoundSession
from livecam.runtime.providers import resolve_providers
from livecam.settings import EnhanceSettings, ProcessingSettings, RuntimeSettings, SwapSettings
from tests.standins.enhancers import build_enhancer
from tests.standins.gfpgan import build_gfpgan
from tests.standins.hyperswap import build_hyperswap
from tests.standins.inswapper import build_inswapper

# Hand-placed keypoints (eyes, nose tip, mouth corners) on the shared photos.
OBAMA_KPS = np.array([[436, 214], [540, 214], [490, 270], [450, 320], [530, 320]], dtype=np.float32)
BIDEN_KPS = np.array([[530, 322], [650, 345], [590, 405], [540, 460], [635, 470]], dtype=np.float32)
PHOTOS = {"obama.jpg": OBAMA_KPS, "biden.jpg": BIDEN_KPS}


@pytest.fixture(autouse=True)
def device_fronts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fronts on for every lane (on a GPU: lanes on CUDA only), a fresh pool and cache."""
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("livecam.runtime.lanes.uses_device_fronts", lambda providers: providers.lane is not None)
    sessions.clear_pool()
    yield
    sessions.clear_pool()


def runtime(models: Path, **more: Any) -> RuntimeSettings:
    return RuntimeSettings(**{"providers": ("cpu",), "models_dir": models, "offline": True, "unverified_models": True,
                              "quiet": True, "lanes": True, **more})


def cpu_session(model: bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def built(models: Path, spec: Any, lane: int | None, *, swap: SwapSettings | None = None,
          enhance: EnhanceSettings | None = None, swap_model: str | None = None) -> Any:
    """The processor `spec` as Engine.create or a lane builds it: `lane` None is the run's own
    engine (the plain path), a number that lane (the joined path here)."""
    settings = ProcessingSettings(sources=(), runtime=runtime(models), swap=swap or SwapSettings(color_match=False),
                                  enhance=enhance or EnhanceSettings())
    providers = resolve_providers(["cpu"]).for_lane(lane)
    return spec.build(BuildContext(settings, ModelStore(settings.runtime), providers, 1, swap_model))


def photo(faces_dir: Path, name: str) -> np.ndarray:
    image = cv2.imread(str(faces_dir / name))
    assert image is not None
    return image


def face_at(kps: np.ndarray) -> Face:
    r = float(np.linalg.norm(kps[1] - kps[0]))
    c = kps.mean(axis=0)
    return Face(bbox=[c[0] - r, c[1] - 1.2 * r, c[0] + r, c[1] + r], score=0.9, kps=kps)


def source(seed: int = 1) -> SourceIdentity:
    e = np.random.default_rng(seed).standard_normal(512).astype(np.float32)
    return SourceIdentity(paths=(), image=np.zeros((8, 8, 3), np.uint8), face=face_at(OBAMA_KPS),
                          embedding=e / np.linalg.norm(e))


def takes_pixels(session: Any) -> bool:
    """A lane's joined session: IO-bound, a uint8 image in and only the uint8 result out."""
    image = [i for i in session.get_inputs() if i.name == graphs.PIXELS_IN]
    return (isinstance(session, BoundSession) and len(image) == 1 and image[0].type == "tensor(uint8)"
            and [(o.name, o.type) for o in session.get_outputs()] == [(graphs.PIXELS_OUT, "tensor(uint8)")])


def within_a_level(got: np.ndarray, want: np.ndarray, exact: float = 0.99) -> None:
    """At most one level apart, and only where a value sits on a rounding edge (`exact`: the
    share of values that must be equal)."""
    assert got.dtype == want.dtype == np.uint8 and got.shape == want.shape
    diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
    assert diff.max() <= 1, f"{int(diff.max())} levels apart at {np.argwhere(diff > 1)[:5].tolist()}"
    assert (diff == 0).mean() > exact


# ---- the swapper ------------------------------------------------------------------------------

SWAPPERS: dict[str, tuple[str, Callable[[Path], Path]]] = {
    "inswapper_128": ("inswapper_128", lambda p: build_inswapper(p)),
    # float16 inputs and output: the front ends in a Cast to float16, the back starts with one to float
    "inswapper_128_fp16 (float16 I/O)": ("inswapper_128_fp16", lambda p: build_inswapper(p, io_fp16=True)),
    "inswapper_128_fp16 (float32 I/O)": ("inswapper_128_fp16", lambda p: build_inswapper(p, fp16=True)),
    # offset -1 and scale 2/255 both ways; a second output (its mask) that the join leaves out
    "hyperswap_1a_256": ("hyperswap_1a_256", lambda p: build_hyperswap(p)),
}


def swappers(tmp_path: Path, case: str, swap: SwapSettings) -> tuple[Any, Any]:
    """(plain, joined) swappers of the stand-in for `case`, prepared with one source."""
    model, build = SWAPPERS[case]
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    build(models / f"{model}.onnx")
    plain = built(models, face_swapper.PROCESSOR, None, swap=swap, swap_model=model)
    joined = built(models, face_swapper.PROCESSOR, 0, swap=swap, swap_model=model)
    for sw in (plain, joined):
        sw.prepare([source()])
    return plain, joined


@pytest.mark.parametrize("case", list(SWAPPERS))
def test_the_joined_swapper_gives_the_plain_swap_in_uint8(tmp_path: Path, faces_dir: Path, case: str) -> None:
    plain, joined = swappers(tmp_path, case, SwapSettings(color_match=False))
    assert plain._joined is None and takes_pixels(joined._joined)
    for name, kps in PHOTOS.items():
        image = photo(faces_dir, name)
        aligned = joined.align(image, face_at(kps))
        assert aligned.blob is None  # no float blob on the CPU: the crop goes up as it is
        latent = joined._latents[0]
        got = joined.swap_crop(aligned, latent)
        want = plain.swap_crop(plain.align(image, face_at(kps)), plain._latents[0])
        assert not np.array_equal(want, aligned.crop)  # the stand-in changed the face
        # Float16 I/O on the CPU: ORT runs the stand-in's Conv and Sigmoid in float32 behind Casts
        # of its own, which cancel the join's Casts, so the joined model skips the plain path's
        # float16 rounding of the blob and the output (3% of values a level off; on a GPU the
        # float16 kernels keep both roundings).
        within_a_level(got, want, exact=0.95 if "float16" in case else 0.99)


@pytest.mark.parametrize("batch", [1, "N"])
@pytest.mark.parametrize("boost", [256, 512])
def test_pixel_boost_tiles_go_up_as_uint8_and_come_back_in_place(tmp_path: Path, faces_dir: Path, boost: int,
                                                                 batch: int | str) -> None:
    """k x k tiles of the uint8 crop, in split_tiles' order: one batched call (a dynamic batch)
    or one call per tile; the swap interleaved back is the plain path's."""
    models = tmp_path / "models"
    models.mkdir()
    build_inswapper(models / "inswapper_128.onnx", batch=batch)
    swap = SwapSettings(color_match=False, pixel_boost=boost)
    plain = built(models, face_swapper.PROCESSOR, None, swap=swap, swap_model="inswapper_128")
    joined = built(models, face_swapper.PROCESSOR, 0, swap=swap, swap_model="inswapper_128")
    for sw in (plain, joined):
        sw.prepare([source()])
    image = photo(faces_dir, "obama.jpg")
    calls: list[tuple[int, ...]] = []
    session = joined._joined
    run = session.run

    def counted(names: Any, feeds: dict[str, np.ndarray]) -> Any:
        calls.append(feeds[graphs.PIXELS_IN].shape)
        return run(names, feeds)

    session.run = counted
    got = joined.swap_crop(joined.align(image, face_at(OBAMA_KPS)), joined._latents[0])
    want = plain.swap_crop(plain.align(image, face_at(OBAMA_KPS)), plain._latents[0])
    k = boost // 128
    assert got.shape == (boost, boost, 3)
    assert calls == ([(k * k, 128, 128, 3)] if batch == "N" else [(1, 128, 128, 3)] * (k * k))
    within_a_level(got, want)
    # Each tile lands where it was taken from: a swap of the tiles in another order is far off.
    shuffled = np.ascontiguousarray(want.reshape(boost // k, k, boost // k, k, 3)[:, ::-1, :, ::-1].reshape(want.shape))
    assert np.abs(got.astype(int) - shuffled).mean() > 1.0


def same_frame_as_the_plain_path(plain: Any, joined: Any, image: np.ndarray, kps: Any) -> None:
    """Both processors on one face of `image`: the plain one changes the frame, the joined one's
    frame is within one level of it."""
    from livecam.frame import FramePacket

    frames = []
    for processor in (plain, joined):
        packet = FramePacket(index=0, image=image.copy(), faces=[face_at(kps)])
        processor.process(packet)
        frames.append(packet.image)
    assert not np.array_equal(frames[0], image)
    within_a_level(frames[1], frames[0])


def test_the_swapped_frame_is_the_plain_paths(tmp_path: Path, faces_dir: Path) -> None:
    """The whole per-face step (colour match, masks, paste-back) after the joined swap."""
    plain, joined = swappers(tmp_path, "inswapper_128", SwapSettings(color_match=True, face_mask=("box",)))
    same_frame_as_the_plain_path(plain, joined, photo(faces_dir, "biden.jpg"), BIDEN_KPS)


def test_a_swapper_whose_join_fails_runs_the_plain_path(tmp_path: Path, faces_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("no such graph")

    monkeypatch.setattr(graphs, "output_graph", refused)
    plain, joined = swappers(tmp_path, "inswapper_128", SwapSettings(color_match=False))
    assert joined._joined is None
    image = photo(faces_dir, "obama.jpg")
    got = joined.swap_crop(joined.align(image, face_at(OBAMA_KPS)), joined._latents[0])
    assert np.array_equal(got, plain.swap_crop(plain.align(image, face_at(OBAMA_KPS)), plain._latents[0]))


# ---- the enhancer -----------------------------------------------------------------------------

ENHANCERS: dict[str, tuple[str, Callable[[Path], Path]]] = {
    # random: the output overshoots [-1, 1], so the back graph's clamp is exercised
    "gfpgan_1.4": ("gfpgan_1.4", lambda p: build_gfpgan(p, kind="random")),
    "gfpgan_1.4 (dynamic batch)": ("gfpgan_1.4", lambda p: build_gfpgan(p, kind="random", dynamic_batch=True)),
    "gpen_bfr_256": ("gpen_bfr_256", lambda p: build_enhancer(p, "gpen_bfr_256")),
    "gpen_bfr_512": ("gpen_bfr_512", lambda p: build_enhancer(p, "gpen_bfr_512")),
    "codeformer": ("codeformer", lambda p: build_enhancer(p, "codeformer")),  # its weight input still fed
}


@pytest.mark.parametrize("case", list(ENHANCERS))
def test_the_joined_enhancer_gives_the_plain_restoration_in_uint8(tmp_path: Path, faces_dir: Path, case: str) -> None:
    model, build = ENHANCERS[case]
    models = tmp_path / "models"
    models.mkdir()
    build(models / f"{model}.onnx")
    enhance = EnhanceSettings(model=model, weight=0.3 if model == "codeformer" else None)
    plain = built(models, face_enhancer.PROCESSOR, None, enhance=enhance)
    joined = built(models, face_enhancer.PROCESSOR, 0, enhance=enhance)
    assert plain._chosen._joined is None and takes_pixels(joined._chosen._joined)
    template, size = face_enhancer.ENHANCERS[model].template, face_enhancer.ENHANCERS[model].size
    crops = [align_crop(photo(faces_dir, name), align_matrix(kps, template), size) for name, kps in PHOTOS.items()]
    want, got = plain.restore(crops), joined.restore(crops)
    assert len(got) == len(want) == 2
    for g, w, crop in zip(got, want, crops):
        assert not np.array_equal(w, crop)
        within_a_level(g, w)


def test_the_enhanced_frame_is_the_plain_paths(tmp_path: Path, faces_dir: Path) -> None:
    """Alignment, the joined restoration, the weight blend and the paste-back, on a frame."""
    models = tmp_path / "models"
    models.mkdir()
    build_gfpgan(models / "gfpgan_1.4.onnx", kind="random")
    plain = built(models, face_enhancer.PROCESSOR, None, enhance=EnhanceSettings(blend=0.6))
    joined = built(models, face_enhancer.PROCESSOR, 0, enhance=EnhanceSettings(blend=0.6))
    same_frame_as_the_plain_path(plain, joined, photo(faces_dir, "obama.jpg"), OBAMA_KPS)


# ---- the graphs joined around a model -------------------------------------------------------------

def test_a_wrong_conversion_in_the_back_graph_is_seen(tmp_path: Path, faces_dir: Path) -> None:
    """The checks above can fail: HyperSwap's back graph without its offset (as inswapper's)
    is far from the plain swap."""
    models = tmp_path / "models"
    models.mkdir()
    path = build_hyperswap(models / "hyperswap_1a_256.onnx")
    kind = face_swapper.HYPERSWAP
    wrong = graphs.pixel_front("wrong", "target", "output", kind.scale, 0.0, rounded=False)
    right = graphs.pixel_front("right", "target", "output", kind.scale, kind.offset, rounded=False)
    image = align_crop(photo(faces_dir, "obama.jpg"), align_matrix(OBAMA_KPS, FFHQ_512), 256)[None]
    feeds = {graphs.PIXELS_IN: image, "source": source().embedding.reshape(1, 512)}
    outs = [cpu_session(graphs.joined_model(str(path), front)).run(None, feeds)[0] for front in (wrong, right)]
    assert np.abs(outs[0].astype(int) - outs[1]).mean() > 10


# ---- lanes ----------------------------------------------------------------------------------------

def test_lanes_with_device_io_give_the_shared_paths_frames_in_order(tmp_path: Path, faces_dir: Path,
                                                                    standin_models: Path) -> None:
    """Engine.lanes() with the swapper and the enhancer: each lane's two run sessions that take
    and give uint8 (the run's own engine does not), and the frames, in order, are those of the
    shared path within one level."""
    from livecam.pipeline.engine import Engine
    from livecam.pipeline.file import OutFrame, run_frames

    build_gfpgan(standin_models / "gfpgan_1.4.onnx", kind="random")
    source_photo = tmp_path / "biden.png"
    cv2.imwrite(str(source_photo), cv2.resize(photo(faces_dir, "biden.jpg"), None, fx=0.5, fy=0.5,
                                              interpolation=cv2.INTER_AREA))
    base = cv2.resize(photo(faces_dir, "obama.jpg"), None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    frames = [np.roll(base, 3 * i, axis=1) for i in range(6)]

    def engine(lanes: bool) -> Engine:
        settings = ProcessingSettings(sources=(source_photo,), frame_processors=("face_swapper", "face_enhancer"),
                                      runtime=runtime(standin_models, execution_threads=3, explicit_threads=True)
                                      if lanes else runtime(standin_models, lanes=None),
                                      swap=SwapSettings(model="inswapper_128"), enhance=EnhanceSettings())
        return Engine.create(settings, live=False, progress=False)

    def run(e: Engine, lanes: list[Engine]) -> list[Any]:
        out: list[Any] = []
        run_frames((OutFrame(f.copy(), i / 25) for i, f in enumerate(frames)), out.append, e, workers=3,
                   label=False, max_in_flight=6, lanes=lanes)
        return out

    shared = engine(False)
    assert shared.lanes() == []
    expected = run(shared, [])
    laned = engine(True)
    lanes = laned.lanes()
    assert len(lanes) == 3
    for lane in [laned, *lanes]:
        swapper, enhancer = lane.processors
        on_lane = lane is not laned
        assert (swapper._joined is not None) == (enhancer._chosen._joined is not None) == on_lane
        if on_lane:
            assert takes_pixels(swapper._joined) and takes_pixels(enhancer._chosen._joined)
    assert len({id(lane.processors[0]._joined) for lane in lanes}) == 3  # each lane its own
    got = run(laned, lanes)
    assert [p.index for p in got] == list(range(len(frames)))
    for want, have, original in zip(expected, got, frames):
        assert have.faces and not np.array_equal(have.image, original)
        within_a_level(have.image, want.image)
