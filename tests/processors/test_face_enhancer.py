"""The GFPGAN face enhancer: pre/post-processing round trip, blend, batching, the weight input."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.errors import ModelError
from livecam.faces.align import FFHQ_512, align_matrix, invert, warp_crop
from livecam.faces.face import Face
from livecam.frame import FramePacket
from livecam.processors.base import changed_faces, why_unchanged
from livecam.processors.crop_masks import FaceMasker
from livecam.processors.face_enhancer import FaceEnhancer
from livecam.processors.face_parser import FaceParser
from livecam.processors.occluder import Occluder
from livecam.settings import EnhanceSettings, ProcessingSettings, SwapSettings
from tests.standins.gfpgan import build_gfpgan
from tests.standins.inswapper import build_inswapper
from tests.standins.masks import build_bisenet, build_xseg
from tests.standins import cpu_session

OBAMA_KPS = np.array([[436, 214], [540, 214], [490, 270], [450, 320], [530, 320]], dtype=np.float32)
BIDEN_KPS = np.array([[530, 322], [650, 345], [590, 405], [540, 460], [635, 470]], dtype=np.float32)


class CountingSession:
    """Wraps a session and records the batch size of every run() call."""

    def __init__(self, session) -> None:
        self._session = session
        self.batches: list[int] = []

    def get_inputs(self):
        return self._session.get_inputs()

    def get_outputs(self):
        return self._session.get_outputs()

    def run(self, names, feeds):
        self.batches.append(int(feeds["input"].shape[0]))
        return self._session.run(names, feeds)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("gfpgan")
    return {
        "identity": build_gfpgan(d / "identity.onnx"),
        "identity_weight": build_gfpgan(d / "identity_weight.onnx", weight=True, dynamic_batch=True),
        "random": build_gfpgan(d / "random.onnx", kind="random"),
        "random_dynamic": build_gfpgan(d / "random_dynamic.onnx", kind="random", dynamic_batch=True),
        "inswapper": build_inswapper(d / "inswapper.onnx"),
        "xseg": build_xseg(d / "xseg_1.onnx"),  # crop columns right of the middle: covered
        "hair_skin": build_bisenet(d / "bisenet.onnx", top=17, bottom=1),  # top half of the crop hair, bottom skin
    }


def _face(kps: np.ndarray) -> Face:
    kps = np.asarray(kps, dtype=np.float32)
    r = float(np.linalg.norm(kps[1] - kps[0]))
    c = kps.mean(axis=0)
    return Face(bbox=[c[0] - r, c[1] - 1.2 * r, c[0] + r, c[1] + r], score=0.9, kps=kps)


def _scaled(kps: np.ndarray, scale: float, offset=(0.0, 0.0)) -> np.ndarray:
    return (kps * scale + np.float32(offset)).astype(np.float32)


@pytest.fixture
def two_faces(faces_dir):
    """Obama and Biden side by side at half size (faces smaller than the 512 crop's, as usual)."""
    obama = cv2.resize(cv2.imread(str(faces_dir / "obama.jpg")), None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    biden = cv2.resize(cv2.imread(str(faces_dir / "biden.jpg")), None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    h = 480
    frame = np.concatenate([obama[:h], biden[:h]], axis=1)
    faces = [_face(_scaled(OBAMA_KPS, 0.5)), _face(_scaled(BIDEN_KPS, 0.5, (obama.shape[1], 0)))]
    return frame, faces


def _run(enhancer: FaceEnhancer, image: np.ndarray, faces: list[Face]) -> np.ndarray:
    packet = FramePacket(index=0, image=image.copy(), faces=faces)
    enhancer.process(packet)
    assert packet.timings["face_enhancer"] >= 0.0
    return packet.image


def _crop_region(face: Face, shape, inset: float = 0.0) -> np.ndarray:
    """Frame pixels covered by the face's 512 crop (inset by `inset` crop px)."""
    m = align_matrix(face.kps, FFHQ_512)
    lo, hi = inset, 512 - inset
    quad = cv2.transform(np.array([[[lo, lo], [hi, lo], [hi, hi], [lo, hi]]], np.float64), invert(m))[0]
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillConvexPoly(mask, np.round(quad).astype(np.int32), 1)
    return mask.astype(bool)


def test_identity_model_round_trip(models, two_faces):
    frame, faces = two_faces
    out = _run(FaceEnhancer(cpu_session(models["identity"]), EnhanceSettings(blend=1.0)), frame, faces)
    touched = np.zeros(frame.shape[:2], bool)
    for face in faces:
        inner = np.zeros(frame.shape[:2], bool)
        x1, y1, x2, y2 = face.bbox.astype(int)
        inner[y1:y2, x1:x2] = True
        diff = np.abs(out[inner].astype(np.int16) - frame[inner])
        assert diff.mean() < 2.0, diff.mean()  # alignment, normalisation and paste-back only
        region = _crop_region(face, frame.shape)
        touched |= cv2.dilate(region.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    assert np.array_equal(out[~touched], frame[~touched])


def test_weight_input_is_fed_one(models, two_faces):
    frame, faces = two_faces
    plain = _run(FaceEnhancer(cpu_session(models["identity"]), EnhanceSettings(blend=1.0)), frame, faces)
    weighted = _run(FaceEnhancer(cpu_session(models["identity_weight"]), EnhanceSettings(blend=1.0)), frame, faces)
    assert np.array_equal(plain, weighted)


def test_pre_and_post_processing_match_the_spec(models, two_faces):
    frame, faces = two_faces
    session = cpu_session(models["random"])
    enhancer = FaceEnhancer(session, EnhanceSettings())
    m = align_matrix(faces[0].kps, FFHQ_512)
    crop = warp_crop(frame, m, 512, interpolation=cv2.INTER_LINEAR, border=cv2.BORDER_REPLICATE)
    x = (crop[:, :, ::-1].astype(np.float32) / 255.0 - 0.5) / 0.5
    y = session.run(None, {"input": x.transpose(2, 0, 1)[None].copy()})[0][0]
    assert y.max() > 1.0 or y.min() < -1.0  # the stand-in overshoots: the clamp matters
    expected = np.rint((np.clip(y, -1, 1) + 1.0) / 2.0 * 255.0).astype(np.uint8).transpose(1, 2, 0)[:, :, ::-1]
    got = enhancer.restore([crop])[0]
    assert got.shape == (512, 512, 3) and got.dtype == np.uint8
    assert np.abs(got.astype(np.int16) - expected).max() <= 1


def test_blend(models, two_faces):
    frame, faces = two_faces
    session = cpu_session(models["random"])
    full = _run(FaceEnhancer(session, EnhanceSettings(blend=1.0)), frame, faces).astype(np.int16)
    assert not np.array_equal(full, frame)
    assert np.array_equal(_run(FaceEnhancer(session, EnhanceSettings(blend=0.0)), frame, faces), frame)
    half = _run(FaceEnhancer(session, EnhanceSettings(blend=0.5)), frame, faces).astype(np.int16)
    lo, hi = np.minimum(full, frame), np.maximum(full, frame)
    assert np.all(half >= lo - 1) and np.all(half <= hi + 1)
    changed = np.abs(full - frame) > 4
    assert changed.sum() > 1000
    expected = (full[changed] + frame[changed].astype(np.int16)) / 2.0
    assert np.abs(half[changed] - expected).mean() < 1.0


def test_batched_call_gives_the_same_pixels_as_single_calls(models, two_faces):
    frame, faces = two_faces
    batched = CountingSession(cpu_session(models["random_dynamic"]))
    single = CountingSession(cpu_session(models["random"]))
    a = FaceEnhancer(batched, EnhanceSettings(blend=1.0))
    b = FaceEnhancer(single, EnhanceSettings(blend=1.0))
    assert a.batched and not b.batched
    out_a, out_b = _run(a, frame, faces), _run(b, frame, faces)
    assert batched.batches == [2]
    assert single.batches == [1, 1]
    assert np.array_equal(out_a, out_b)
    for face in faces:  # both faces were enhanced
        region = _crop_region(face, frame.shape, inset=200)
        assert np.any(out_a[region] != frame[region])


def test_a_batched_model_takes_at_most_the_tensorrt_batch_range_a_call(models):
    """More crops than PROFILE_BATCH's max (ORT's TensorRT provider refuses a batch outside its
    profile): slices of MAX_BATCH, the same pixels as one crop a call."""
    from livecam.runtime.providers import MAX_BATCH

    rng = np.random.default_rng(5)
    crops = [rng.integers(0, 256, (512, 512, 3), dtype=np.uint8) for _ in range(MAX_BATCH + 2)]
    batched = CountingSession(cpu_session(models["random_dynamic"]))
    together = FaceEnhancer(batched, EnhanceSettings()).restore(crops)
    assert batched.batches == [MAX_BATCH, 2]
    alone = FaceEnhancer(cpu_session(models["random"]), EnhanceSettings()).restore(crops)
    assert all(np.array_equal(a, b) for a, b in zip(together, alone))


def test_small_faces_are_skipped(models):
    session = CountingSession(cpu_session(models["random"]))
    frame = np.random.default_rng(0).integers(0, 255, (200, 200, 3), dtype=np.uint8)
    tiny = _face(_scaled(OBAMA_KPS, 0.2, (-0.2 * 490 + 100, -0.2 * 270 + 100)))
    assert tiny.eye_distance < 24
    assert np.array_equal(_run(FaceEnhancer(session, EnhanceSettings()), frame, [tiny]), frame)
    assert np.array_equal(_run(FaceEnhancer(session, EnhanceSettings()), frame, []), frame)
    assert session.batches == []


def test_not_a_gfpgan_model(models):
    with pytest.raises(ModelError, match="not a gfpgan_1.4 model"):
        FaceEnhancer(cpu_session(models["inswapper"]), EnhanceSettings())


@pytest.mark.parametrize("centre", [(300.0, 200.0), (20.0, 30.0), (630.0, 470.0)])
def test_fast_alignment_matches_the_plain_warp(faces_dir, centre):
    from livecam.processors.paste import align_crop

    frame = cv2.resize(cv2.imread(str(faces_dir / "obama.jpg")), (640, 480))
    kps = OBAMA_KPS * 0.5 - OBAMA_KPS.mean(axis=0) * 0.5 + np.float32(centre)
    m = align_matrix(kps, FFHQ_512)
    plain = warp_crop(frame, m, 512, interpolation=cv2.INTER_LINEAR, border=cv2.BORDER_REPLICATE)
    diff = np.abs(align_crop(frame, m, 512).astype(np.int16) - plain)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.001


def test_group_photo_faces_from_the_embedded_detector_go_in_one_call(faces_dir, models):
    from pathlib import Path

    import livecam
    from livecam.faces.blazeface import BlazeFaceDetector

    detector_file = Path(livecam.__file__).parent / "models" / "default" / "blazeface_full_range.onnx"
    if not detector_file.is_file():
        pytest.skip(f"embedded detector not found at {detector_file}")
    frame = cv2.imread(str(faces_dir / "group6.jpg"))
    faces = BlazeFaceDetector(cpu_session(detector_file), "full").detect(frame)
    faces = sorted(faces, key=lambda f: -f.area)[:2]
    assert len(faces) == 2 and all(f.eye_distance >= 24 for f in faces)
    batched = CountingSession(cpu_session(models["random_dynamic"]))
    single = CountingSession(cpu_session(models["random"]))
    out_batched = _run(FaceEnhancer(batched, EnhanceSettings()), frame, faces)
    out_single = _run(FaceEnhancer(single, EnhanceSettings()), frame, faces)
    assert batched.batches == [2] and single.batches == [1, 1]
    assert np.array_equal(out_batched, out_single)
    for face in faces:
        x1, y1, x2, y2 = face.bbox.astype(int)
        assert np.any(out_batched[y1:y2, x1:x2] != frame[y1:y2, x1:x2])


@pytest.mark.parametrize("size", [0, 60])
def test_the_mouth_kept_by_the_mouth_mask_is_not_enhanced(models, two_faces, size):
    """--mouth-mask keeps the target's mouth through the swapper; the enhancer after it re-rendered
    the whole crop, the kept mouth too. Now its paste-back leaves that mouth out."""
    from livecam.processors.masks import mouth_polygon

    frame, faces = two_faces
    session = cpu_session(models["random"])
    out = _run(FaceEnhancer(session, EnhanceSettings(blend=1.0), masker=FaceMasker(SwapSettings(mouth_mask=size))),
               frame, faces)
    plain = _run(FaceEnhancer(session, EnhanceSettings(blend=1.0)), frame, faces)
    for face in faces:
        mouth = np.zeros(frame.shape[:2], np.uint8)
        cv2.fillPoly(mouth, [np.round(mouth_polygon(None, face.kps, size)).astype(np.int32)], 1)
        inside = cv2.erode(mouth, np.ones((3, 3), np.uint8)).astype(bool)  # whole pixels of the polygon
        assert inside.sum() > 200
        assert np.array_equal(out[inside], frame[inside])
        assert (np.abs(plain[inside].astype(int) - frame[inside]).max(axis=1) > 4).mean() > 0.3  # it would change
        # The rest of the face is enhanced as before.
        face_px = _crop_region(face, frame.shape, inset=200) & ~cv2.dilate(mouth, np.ones((41, 41), np.uint8)).astype(bool)
        assert np.array_equal(out[face_px], plain[face_px])
        assert (np.abs(out[face_px].astype(int) - frame[face_px]).max(axis=1) > 4).mean() > 0.3


def _in_crop(face: Face, shape, crop_mask: np.ndarray) -> np.ndarray:
    """Frame pixels whose place in the face's 512 crop is set in `crop_mask` (nearest crop pixel)."""
    m = align_matrix(face.kps, FFHQ_512)
    ys, xs = np.mgrid[0:shape[0], 0:shape[1]].astype(np.float64)
    u = np.rint(m[0, 0] * xs + m[0, 1] * ys + m[0, 2]).astype(int)
    v = np.rint(m[1, 0] * xs + m[1, 1] * ys + m[1, 2]).astype(int)
    inside = (u >= 0) & (u < 512) & (v >= 0) & (v < 512)
    out = np.zeros(shape[:2], bool)
    out[inside] = crop_mask[v[inside], u[inside]].astype(bool)
    return out


@pytest.mark.parametrize("swap", [
    SwapSettings(face_mask=("box", "occlusion")),  # the hand over the face stays in front
    SwapSettings(face_mask=("box", "region")),  # the hair (not a chosen region) stays the target's
    SwapSettings(face_mask=("box", "area"), face_mask_areas=("lower-face",)),  # the eyes stay
    SwapSettings(face_mask=("occlusion", "region", "area"), face_mask_areas=("upper-face", "lower-face"),
                 mouth_mask=20),
], ids=["occlusion", "region", "area", "all"])
def test_what_the_swappers_face_mask_keeps_is_not_enhanced(models, two_faces, swap):
    """--face-mask occlusion, region and area keep parts of the face as the target's through the
    swapper; the enhancer after it re-rendered its whole crop, those parts too (a hand over the
    face restored into skin). Its paste-back now leaves out the same kept target."""
    frame, faces = two_faces
    session = cpu_session(models["random"])
    masker = FaceMasker(swap, occluder=Occluder(cpu_session(models["xseg"])),
                        parser=FaceParser(cpu_session(models["hair_skin"])))
    out = _run(FaceEnhancer(session, EnhanceSettings(blend=1.0), masker=masker), frame, faces)
    plain = _run(FaceEnhancer(session, EnhanceSettings(blend=1.0)), frame, faces)
    grow = np.ones((13, 13), np.uint8)  # 6 crop px (2.5 frame px here): past the bilinear footprint
    for face in faces:
        crop = warp_crop(frame, align_matrix(face.kps, FFHQ_512), 512)
        changeable = masker.changeable(crop, align_matrix(face.kps, FFHQ_512), face)
        assert changeable is not None
        box = np.zeros((512, 512), np.uint8)
        box[80:432, 80:432] = 1  # inside the enhancer's own feathered box (fully opaque there)
        kept = _in_crop(face, frame.shape, cv2.erode(((changeable == 0) & (box == 1)).astype(np.uint8), grow))
        free = _in_crop(face, frame.shape, cv2.erode(((changeable == 1) & (box == 1)).astype(np.uint8), grow))
        assert kept.sum() > 500 and free.sum() > 500
        assert (np.abs(plain[kept].astype(int) - frame[kept]).max(axis=1) > 4).mean() > 0.3  # it would change
        assert np.array_equal(out[kept], frame[kept])
        assert np.array_equal(out[free], plain[free])  # the rest is enhanced as before


def test_the_swappers_mask_models_step_reaches_the_enhancer(models, two_faces):
    """The live governor's "mask models off" step: the enhancer's kept target follows the
    swapper's (the occluder off: the covered half is enhanced again)."""
    frame, faces = two_faces
    session = cpu_session(models["random"])
    swap = SwapSettings(face_mask=("box", "occlusion"))
    enhancer = FaceEnhancer(session, EnhanceSettings(blend=1.0),
                            masker=FaceMasker(swap, occluder=Occluder(cpu_session(models["xseg"]))))
    assert enhancer.uses_mask_models
    kept = _run(enhancer, frame, faces)
    plain = _run(FaceEnhancer(session, EnhanceSettings(blend=1.0)), frame, faces)
    assert not np.array_equal(kept, plain)
    enhancer.set_mask_models(False)
    assert np.array_equal(_run(enhancer, frame, faces), plain)
    enhancer.set_mask_models(True)
    assert np.array_equal(_run(enhancer, frame, faces), kept)


def test_a_paste_too_faint_to_change_a_pixel_is_not_counted_as_enhanced(models, two_faces):
    # At a blend this low the mix rounds back to every pixel's own value: the summary counted
    # both faces as enhanced. After a swapper the swap is what counts, so nothing is said there.
    frame, faces = two_faces
    alone = FramePacket(index=0, image=frame.copy(), faces=faces)
    FaceEnhancer(cpu_session(models["identity"]), EnhanceSettings(blend=0.001)).process(alone)
    assert np.array_equal(alone.image, frame)
    assert changed_faces(alone) == 0 and alone.faint == 2
    processing = ProcessingSettings(sources=(), frame_processors=("face_enhancer",),
                                    enhance=EnhanceSettings(blend=0.001))
    assert why_unchanged("the faces found in x.jpg", False, processing, alone.faint > 0) == (
        "--enhancer-blend 0.001 is too faint to change a pixel of the faces found in x.jpg; "
        "give a larger --enhancer-blend")
    after_swap = FramePacket(index=0, image=frame.copy(), faces=faces)
    FaceEnhancer(cpu_session(models["identity"]), EnhanceSettings(blend=0.001), counts=False).process(after_swap)
    assert after_swap.left_as_is == 0 and after_swap.faint == 0
