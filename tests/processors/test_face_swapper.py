"""The inswapper_128 face swapper: parity with insightface 2.1's INSwapper (test oracle only),
the fp16 file, the emap reader and the swap options (colour match, blend, mouth mask)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from livecam.errors import ModelError
from livecam.faces.align import invert
from livecam.faces.face import Face
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.models.emap import read_last_initializer
from livecam.processors.face_swapper import InswapperSwapper
from livecam.settings import SwapSettings
from tests.standins.gfpgan import build_gfpgan
from tests.standins.inswapper import build_inswapper
from tests.standins import cpu_session

# Hand-placed keypoints (eyes, nose tip, mouth corners) on the shared photos.
OBAMA_KPS = np.array([[436, 214], [540, 214], [490, 270], [450, 320], [530, 320]], dtype=np.float32)
BIDEN_KPS = np.array([[530, 322], [650, 345], [590, 405], [540, 460], [635, 470]], dtype=np.float32)
NO_COLOR = SwapSettings(color_match=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("inswapper")
    return {"fp32": build_inswapper(d / "inswapper_128.onnx"),
            "fp16": build_inswapper(d / "inswapper_128_fp16.onnx", fp16=True),
            "io16": build_inswapper(d / "inswapper_io16.onnx", io_fp16=True),
            "white": build_inswapper(d / "inswapper_white.onnx", bias=40.0),
            "gfpgan": build_gfpgan(d / "gfpgan.onnx")}


@pytest.fixture(scope="module")
def session(models):
    return cpu_session(models["fp32"])


def _face(kps: np.ndarray, source_key: int = 0) -> Face:
    kps = np.asarray(kps, dtype=np.float32)
    r = float(np.linalg.norm(kps[1] - kps[0]))
    c = kps.mean(axis=0)
    return Face(bbox=[c[0] - r, c[1] - 1.2 * r, c[0] + r, c[1] + r], score=0.9, kps=kps, source_key=source_key)


def _embedding(seed: int) -> np.ndarray:
    e = np.random.default_rng(seed).standard_normal(512).astype(np.float32)
    return e / np.linalg.norm(e)


def _source(seed: int) -> SourceIdentity:
    img = np.zeros((8, 8, 3), np.uint8)
    return SourceIdentity(paths=(), image=img, face=_face(OBAMA_KPS), embedding=_embedding(seed))


def _swapper(session, settings=NO_COLOR, seeds=(1,)) -> InswapperSwapper:
    sw = InswapperSwapper(session, settings)
    sw.prepare([_source(s) for s in seeds])
    return sw


def _run(sw: InswapperSwapper, image: np.ndarray, faces: list[Face]) -> np.ndarray:
    packet = FramePacket(index=0, image=image.copy(), faces=faces)
    sw.process(packet)
    assert packet.timings["face_swapper"] >= 0.0
    return packet.image


def _quad_mask(matrix: np.ndarray, shape, size: int = 128, grow: int = 0) -> np.ndarray:
    """Frame pixels covered by the crop's pixels (centres 0..size-1, so -1..size with their
    interpolation footprint), optionally grown by `grow` px."""
    lo, hi = (-1, size) if grow else (0, size - 1)
    corners = np.array([[[lo, lo], [hi, lo], [hi, hi], [lo, hi]]], dtype=np.float64)
    quad = cv2.transform(corners, invert(matrix))[0]
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillConvexPoly(mask, np.round(quad).astype(np.int32), 1)
    if grow:
        mask = cv2.dilate(mask, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8))
    return mask.astype(bool)


def _rotated(kps: np.ndarray, degrees: float, scale: float = 1.0) -> np.ndarray:
    c = kps.mean(axis=0)
    rot = cv2.getRotationMatrix2D((float(c[0]), float(c[1])), degrees, scale)
    return (kps @ rot[:, :2].T + rot[:, 2]).astype(np.float32)


# -- emap -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fp32", "fp16"])
def test_emap_is_the_last_initializer_read_without_onnx(models, kind):
    name, emap = read_last_initializer(models[kind])
    ref = numpy_helper.to_array(onnx.load(str(models[kind])).graph.initializer[-1])
    assert name == "emap" and emap.shape == (512, 512)
    np.testing.assert_array_equal(emap, ref)


def test_damaged_file_is_a_model_error(tmp_path):
    bad = tmp_path / "inswapper_128.onnx"
    bad.write_bytes(b"\x0a\xff\xff\xff\x0f not a model")
    with pytest.raises(ModelError, match="livecam models download"):
        read_last_initializer(bad)


def test_latent_is_embedding_times_emap_normalised(session, models):
    sw = InswapperSwapper(session, NO_COLOR)  # emap found through the session's file
    emap = numpy_helper.to_array(onnx.load(str(models["fp32"])).graph.initializer[-1])
    emb = _embedding(3) * 7.0  # not normalised on purpose
    expected = (emb / np.linalg.norm(emb)) @ emap
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(sw.latent(emb)[0], expected, atol=1e-6)


# -- parity with insightface --------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::FutureWarning")  # skimage's estimate(), inside insightface
@pytest.mark.parametrize("photo,kps,degrees,scale", [
    ("obama.jpg", OBAMA_KPS, 0.0, 1.0),
    ("biden.jpg", BIDEN_KPS, 0.0, 1.0),
    ("obama.jpg", OBAMA_KPS, 25.0, 0.7),
    ("obama.jpg", OBAMA_KPS, 5.0, 0.3),  # small face: the kernel sizes' lower bounds
    ("biden.jpg", BIDEN_KPS, -10.0, 1.5),  # large face
])
def test_parity_with_insightface_inswapper(faces_dir, models, session, photo, kps, degrees, scale):
    from insightface.app.common import Face as IFace
    from insightface.model_zoo.inswapper import INSwapper
    from insightface.utils import face_align

    image = cv2.imread(str(faces_dir / photo))
    kps = _rotated(kps, degrees, scale)
    emb = _embedding(1)
    theirs = INSwapper(model_file=str(models["fp32"]), session=session)
    # float64 keypoints: skimage then estimates the similarity in double precision, as we do.
    target, source = IFace(kps=kps.astype(np.float64)), IFace(embedding=emb)
    ref = theirs.get(image.copy(), target, source, paste_back=True)

    sw = _swapper(session)
    face = _face(kps)
    aligned = sw.align(image, face)
    crop, matrix = face_align.norm_crop2(image, target.kps, 128)
    blob = cv2.dnn.blobFromImage(crop, 1.0 / 255.0, (128, 128), (0.0, 0.0, 0.0), swapRB=True)
    assert aligned.blob.shape == (1, 3, 128, 128) and aligned.blob.dtype == np.float32
    # skimage de-means insightface's float32 template in float32, so its matrix differs from
    # our double-precision one by ~1.5e-6; where a warp coordinate sits on a rounding tie, that
    # flips one pixel by one level (OpenCV 5.0: up to 4 of the 49,152 values; 5.1: 7 on the
    # large face). Everything else must be equal to 1e-5.
    np.testing.assert_allclose(aligned.matrix, matrix, atol=1e-5)
    off = np.abs(aligned.blob - blob)
    assert off.max() <= 1.0 / 255.0 + 1e-6
    assert (off > 1e-5).sum() <= 16, np.argwhere(off > 1e-5)
    latent = (emb.reshape(1, -1) @ theirs.emap)
    np.testing.assert_allclose(sw.latent(emb), latent / np.linalg.norm(latent), atol=1e-6)

    ours = _run(sw, image, [face])
    inside = _quad_mask(matrix, image.shape)
    outside = ~_quad_mask(matrix, image.shape, grow=2)
    diff = np.abs(ours.astype(np.int16) - ref.astype(np.int16))
    assert np.array_equal(ours[outside], image[outside])
    assert np.array_equal(ref[outside], image[outside])
    assert diff[inside].mean() < 1.0, diff[inside].mean()
    # ... and the face really was swapped (so the comparison above means something).
    assert np.abs(ours.astype(np.int16) - image)[inside].mean() > 5.0


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("degrees,scale", [(0.0, 1.0), (30.0, 1.0), (-15.0, 0.3), (45.0, 1.5)])
def test_paste_mask_matches_insightface(models, degrees, scale):
    """A model that outputs white, pasted on a black frame, draws the paste mask itself."""
    from insightface.app.common import Face as IFace
    from insightface.model_zoo.inswapper import INSwapper

    session = cpu_session(models["white"])
    black = np.zeros((1200, 1200, 3), np.uint8)
    kps = _rotated(OBAMA_KPS, degrees, scale) + np.float32([110, 330])  # well inside the frame
    theirs = INSwapper(model_file=str(models["white"]), session=session)
    ref = theirs.get(black.copy(), IFace(kps=kps.astype(np.float64)), IFace(embedding=_embedding(1)))
    ours = _run(_swapper(session), black, [_face(kps)])
    # insightface truncates, so its plateau is sometimes 254.
    assert ours.max() == 255 and ref.max() >= 254
    diff = np.abs(ours.astype(np.int16) - ref)
    covered = (ref > 0) | (ours > 0)
    # Within about 1% of the mask's range on average and 10% at worst: rounding against
    # truncation, and our smooth edges against its eroded pixel staircases, whose effective
    # position shifts by up to a third of a pixel with the edge's angle and phase.
    assert diff[covered].mean() < 2.5, diff[covered].mean()
    assert diff.max() <= 24, diff.max()


def test_fp16_files_load_and_run(faces_dir, models, session):
    image = cv2.imread(str(faces_dir / "obama.jpg"))
    face = _face(OBAMA_KPS)
    ref = _run(_swapper(session), image, [face])
    for kind in ("fp16", "io16"):
        sw = _swapper(cpu_session(models[kind]))
        if kind == "io16":
            assert sw.align(image, face).blob.dtype == np.float16
        out = _run(sw, image, [face])
        changed = np.any(out != image, axis=2)
        assert changed.sum() > 10_000
        # fp16 weights round the same network: the same swap, to within a level or two.
        assert np.abs(out.astype(np.int16) - ref)[changed].mean() < 2.0


# -- options ----------------------------------------------------------------------------------
def test_blend_is_the_opacity_of_the_swap(faces_dir, session):
    image = cv2.imread(str(faces_dir / "obama.jpg"))
    faces = [_face(OBAMA_KPS)]
    full = _run(_swapper(session), image, faces).astype(np.int16)
    none = _run(_swapper(session, SwapSettings(color_match=False, blend=0.0)), image, faces)
    assert np.array_equal(none, image)
    half = _run(_swapper(session, SwapSettings(color_match=False, blend=0.5)), image, faces).astype(np.int16)
    lo, hi = np.minimum(full, image), np.maximum(full, image)
    assert np.all(half >= lo - 1) and np.all(half <= hi + 1)
    changed = full != image
    expected = (full[changed] + image[changed]) / 2.0
    assert np.abs(half[changed] - expected).mean() < 1.0


def test_a_swap_too_faint_to_change_a_pixel_is_not_counted(faces_dir, session):
    # A video's face just over the size limit (the fade-in) at --blend 0.01: the paste rounded
    # back to every pixel's own value, and the summary said "1 face swapped".
    from livecam.processors.base import changed_faces

    image = cv2.imread(str(faces_dir / "obama.jpg"))
    face = _face(_rotated(OBAMA_KPS, 0.0, 24.2 / 104.0))  # 24.2 px between the eyes
    packet = FramePacket(index=0, image=image.copy(), faces=[face])
    sw = _swapper(session, SwapSettings(color_match=False, blend=0.01))
    sw.process(packet)
    assert np.array_equal(packet.image, image)
    assert (packet.left_as_is, packet.faint, changed_faces(packet)) == (1, 1, 0)
    # At full blend the same face moves pixels, and is counted.
    packet = FramePacket(index=0, image=image.copy(), faces=[face])
    _swapper(session).process(packet)
    assert not np.array_equal(packet.image, image)
    assert (packet.left_as_is, packet.faint, changed_faces(packet)) == (0, 0, 1)


def test_color_match_moves_the_face_towards_the_target_skin(faces_dir, session):
    image = cv2.imread(str(faces_dir / "biden.jpg"))
    face = _face(BIDEN_KPS)
    sw_off = _swapper(session, NO_COLOR)
    sw_on = _swapper(session, SwapSettings(color_match=True))
    inner = np.zeros(image.shape[:2], bool)
    c = BIDEN_KPS.mean(axis=0).astype(int)
    inner[c[1] - 40:c[1] + 40, c[0] - 40:c[0] + 40] = True
    target_mean = image[inner].mean(axis=0)
    off = _run(sw_off, image, [face])[inner].mean(axis=0)
    on = _run(sw_on, image, [face])[inner].mean(axis=0)
    assert np.linalg.norm(on - target_mean) < 0.5 * np.linalg.norm(off - target_mean)


def test_mouth_mask_keeps_the_target_mouth(faces_dir, session):
    from livecam.processors.masks import mouth_polygon

    image = cv2.imread(str(faces_dir / "obama.jpg"))
    face = _face(OBAMA_KPS)
    plain = _run(_swapper(session), image, [face])
    kept = _run(_swapper(session, SwapSettings(color_match=False, mouth_mask=0)), image, [face])
    mouth = np.zeros(image.shape[:2], np.uint8)
    cv2.fillPoly(mouth, [np.round(mouth_polygon(None, face.kps, 0)).astype(np.int32)], 1)
    mouth = cv2.erode(mouth, np.ones((3, 3), np.uint8)).astype(bool)
    assert mouth.sum() > 500
    assert np.array_equal(kept[mouth], image[mouth])
    assert not np.array_equal(plain[mouth], image[mouth])
    # Elsewhere the face is still swapped.
    cheeks = np.zeros(image.shape[:2], bool)
    cheeks[230:260, 420:440] = True
    assert np.array_equal(kept[cheeks], plain[cheeks])


def test_each_face_gets_its_mapped_source(faces_dir, session):
    image = cv2.imread(str(faces_dir / "obama.jpg"))
    left = _rotated(OBAMA_KPS, 0.0, 0.35) - np.float32([250, 0])
    right = _rotated(OBAMA_KPS, 0.0, 0.35) + np.float32([250, 0])
    sw = _swapper(session, seeds=(1, 2))
    both = _run(sw, image, [_face(left, 0), _face(right, 1)])
    only_left = _run(_swapper(session, seeds=(1,)), image, [_face(left)])
    only_right = _run(_swapper(session, seeds=(2,)), image, [_face(right)])
    m = sw.align(image, _face(left)).matrix
    left_region = _quad_mask(m, image.shape, grow=2)
    assert np.array_equal(both[left_region], only_left[left_region])
    assert np.array_equal(both[~left_region], only_right[~left_region])
    swapped_with_1 = _run(_swapper(session, seeds=(1,)), image, [_face(right)])
    assert not np.array_equal(swapped_with_1, only_right)


def test_small_faces_and_empty_frames_pass_through(session):
    image = np.random.default_rng(0).integers(0, 255, (240, 320, 3), dtype=np.uint8)
    tiny = _face(_rotated(OBAMA_KPS, 0.0, 0.2) - OBAMA_KPS.mean(axis=0) + np.float32([160, 120]))
    assert tiny.eye_distance < 24
    sw = _swapper(session)
    assert np.array_equal(_run(sw, image, [tiny]), image)
    assert np.array_equal(_run(sw, image, []), image)


def test_face_partly_outside_the_frame(faces_dir, session):
    image = cv2.imread(str(faces_dir / "obama.jpg"))[150:, 460:]  # face cut on the left and top
    kps = OBAMA_KPS - np.float32([460, 150])
    out = _run(_swapper(session), image, [_face(kps)])
    changed = np.any(out != image, axis=2)
    assert changed.sum() > 5_000
    m = _swapper(session).align(image, _face(kps)).matrix
    assert not changed[~_quad_mask(m, image.shape, grow=2)].any()


def test_errors(models, session):
    with pytest.raises(ModelError, match="not an inswapper model"):
        InswapperSwapper(cpu_session(models["gfpgan"]), NO_COLOR)
    sw = InswapperSwapper(session, NO_COLOR)
    with pytest.raises(RuntimeError):
        sw.process(FramePacket(index=0, image=np.zeros((10, 10, 3), np.uint8)))
    src = _source(1)
    no_embedding = SourceIdentity(paths=(Path("source.jpg"),), image=src.image, face=src.face, embedding=None)
    with pytest.raises(ModelError, match="source.jpg.*w600k_r50"):
        sw.prepare([no_embedding])


# -- pixel boost ------------------------------------------------------------------------------
BOOSTS = (128, 256, 384, 512)


class _CountingSession:
    """An ORT session that records the batch size of every run() call."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self._session = session
        self.batches: list[int] = []

    def get_inputs(self):
        return self._session.get_inputs()

    def get_outputs(self):
        return self._session.get_outputs()

    def run(self, names, feeds):
        sizes = {len(v) for v in feeds.values()}
        assert len(sizes) == 1  # target and source batches agree
        self.batches.append(sizes.pop())
        return self._session.run(names, feeds)


@pytest.fixture(scope="module")
def boost_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("boost")
    return {"identity": build_inswapper(d / "identity.onnx", identity=True),
            "identity_dyn": build_inswapper(d / "identity_dyn.onnx", identity=True, batch="N"),
            "dyn": build_inswapper(d / "dyn.onnx", batch="N")}


def _boosted(path, boost: int, seeds=(1,)) -> InswapperSwapper:
    sw = InswapperSwapper(_CountingSession(cpu_session(path)), SwapSettings(color_match=False, pixel_boost=boost),
                          model_path=path)
    sw.prepare([_source(s) for s in seeds])
    return sw


def _noise_frame() -> tuple[np.ndarray, Face]:
    rng = np.random.default_rng(5)
    # Smooth noise (a real image's spectrum, roughly): sub-pixel shifts change every tile.
    image = cv2.GaussianBlur(rng.integers(0, 256, (640, 720, 3), dtype=np.uint8), (0, 0), 1.5)
    return image, _face(OBAMA_KPS - np.float32([130, 0]))


@pytest.mark.parametrize("model", ["identity", "identity_dyn"])
@pytest.mark.parametrize("boost", BOOSTS)
def test_pixel_boost_tiles_reassemble_the_crop_exactly(boost_models, model, boost):
    image, face = _noise_frame()
    sw = _boosted(boost_models[model], boost)
    aligned = sw.align(image, face)
    k = boost // 128
    assert aligned.crop.shape == (boost, boost, 3) and aligned.blob.shape == (k * k, 3, 128, 128)
    # The N-scaled template: the 128 matrix times k.
    base = _boosted(boost_models[model], 128).align(image, face)
    np.testing.assert_allclose(aligned.matrix, base.matrix * k, rtol=1e-5, atol=1e-4)
    # A model that returns its input: the reassembled output is the N x N crop, bit for bit.
    full = aligned.crop[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) * np.float32(1.0 / 255.0)
    out = sw.predict(aligned, sw.latent(_embedding(1)))
    assert out.shape == (1, 3, boost, boost)
    assert np.array_equal(out[0], full)
    # Each tile is a whole 128 face shifted by (j/k, i/k) of a 128-crop pixel (OpenCV's 1/32 px
    # fixed-point warp may round a few pixels differently by a level).
    for t, tile in enumerate(aligned.blob):
        i, j = divmod(t, k)
        shifted = base.matrix.copy()
        shifted[:, 2] -= (j / k, i / k)
        ref = cv2.warpAffine(image, shifted, (128, 128), flags=cv2.INTER_LINEAR)
        mine = np.rint(tile[::-1].transpose(1, 2, 0) * 255.0).astype(np.int16)
        diff = np.abs(mine - ref)
        assert diff.max() <= 1 and (diff > 0).mean() < 0.05
    if k > 1:  # and the tiles differ: a sub-pixel shift, not copies
        assert not np.array_equal(aligned.blob[0], aligned.blob[-1])


@pytest.mark.parametrize("model,batched", [("identity", False), ("identity_dyn", True)])
@pytest.mark.parametrize("boost", BOOSTS)
def test_pixel_boost_costs_k_squared_tiles_batched_when_the_model_allows(boost_models, model, batched, boost):
    image, face = _noise_frame()
    sw = _boosted(boost_models[model], boost)
    session = sw._session
    _run(sw, image, [face])
    tiles = (boost // 128) ** 2
    if batched:
        assert session.batches == [tiles]  # one call, every tile in it
    else:
        assert session.batches == [1] * tiles  # one call per tile


def test_batched_and_per_tile_calls_give_the_same_swap(models, boost_models):
    image, face = _noise_frame()
    outs = []
    for path in (models["fp32"], boost_models["dyn"]):  # the same weights, static and dynamic batch
        sw = _boosted(path, 384)
        outs.append(sw.predict(sw.align(image, face), sw.latent(_embedding(1))))
    assert len(sw._session.batches) == 1
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-6)


@pytest.mark.parametrize("boost", BOOSTS)
def test_pixel_boost_pastes_back_inside_the_face_only(models, boost):
    image, face = _noise_frame()
    sw = _boosted(models["fp32"], boost)
    out = _run(sw, image, [face])
    matrix = sw.align(image, face).matrix
    changed = np.any(out != image, axis=2)
    # Inside the crop's footprint the face changed; beyond it (2 px for interpolation) nothing did.
    assert not changed[~_quad_mask(matrix, image.shape, size=boost, grow=2)].any()
    inside = _quad_mask(matrix, image.shape, size=boost)
    assert changed[inside].mean() > 0.5
    # The paste covers the same part of the frame at every size (the mask is the same region).
    plain = _run(_boosted(models["fp32"], 128), image, [face])
    base = np.any(plain != image, axis=2)
    assert abs(int(changed.sum()) - int(base.sum())) < 0.03 * base.sum()


def test_pixel_boost_128_is_the_plain_path(models):
    image, face = _noise_frame()
    boosted = _run(_boosted(models["fp32"], 128), image, [face])
    default = _run(_swapper(cpu_session(models["fp32"])), image, [face])  # SwapSettings() default: the model's size
    assert SwapSettings().pixel_boost is None and np.array_equal(boosted, default)


def test_pixel_boost_must_be_a_multiple_of_the_model_size(models):
    from livecam.errors import InputError

    for bad in (64, 200):
        with pytest.raises(InputError, match="--pixel-boost"):
            InswapperSwapper(cpu_session(models["fp32"]), SwapSettings(pixel_boost=bad), model_path=models["fp32"])
