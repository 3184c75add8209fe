"""SCRFD and ArcFace on ONNX Runtime: parity with insightface 2.1 on stand-in models, and
the behaviour of livecam's own pre- and post-processing."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import onnxruntime as ort
import pytest

from livecam.errors import InputError, ModelError
from livecam.faces.arcface import ArcFaceEmbedder
from livecam.faces.face import Face
from livecam.faces.scrfd import ScrfdDetector
from tests.standins.arcface import build_arcface
from tests.standins.scrfd import build_scrfd


def session(path: Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> SimpleNamespace:
    d = tmp_path_factory.mktemp("standins")
    scrfd, arcface = build_scrfd(d / "det_10g.onnx"), build_arcface(d / "w600k_r50.onnx")
    return SimpleNamespace(scrfd=scrfd, arcface=arcface, det=session(scrfd), rec=session(arcface))


def synthetic_frame(h: int, w: int, seed: int = 0) -> np.ndarray:
    """Smooth shapes on a gradient: gives the stand-in detector something to fire on."""
    rng = np.random.default_rng(seed)
    img = np.zeros((h, w, 3), np.uint8)
    img[:] = np.linspace(30, 200, w, dtype=np.uint8)[None, :, None]
    for _ in range(12):
        centre = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        axes = (int(rng.integers(10, w // 6)), int(rng.integers(10, h // 6)))
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        cv2.ellipse(img, centre, axes, float(rng.uniform(0, 180)), 0, 360, color, -1)
    return cv2.GaussianBlur(img, (5, 5), 0)


def reference_scrfd(path: Path, det_size: int):
    from insightface.model_zoo.scrfd import SCRFD

    ref = SCRFD(model_file=str(path))
    ref.prepare(ctx_id=-1, input_size=(det_size, det_size))
    return ref


def assert_same_detections(ours: list[Face], det: np.ndarray, kps: np.ndarray) -> None:
    assert len(ours) == det.shape[0]
    np.testing.assert_allclose(np.stack([f.bbox for f in ours]), det[:, :4], rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose([f.score for f in ours], det[:, 4], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.stack([f.kps for f in ours]), kps, rtol=1e-5, atol=1e-3)


# --- parity with insightface -------------------------------------------------------------------

@pytest.mark.parametrize(("shape", "det_size"), [((480, 640), 640), ((720, 1280), 480), ((640, 360), 320)])
def test_scrfd_matches_insightface_on_generated_frames(models, shape, det_size):
    frame = synthetic_frame(*shape, seed=det_size)
    det, kps = reference_scrfd(models.scrfd, det_size).detect(frame)
    assert det.shape[0] >= 3, "the stand-in should fire a few times on this frame"
    ours = ScrfdDetector(models.det, det_size=det_size).detect(frame)
    assert_same_detections(ours, det, kps)


@pytest.mark.parametrize(("photo", "det_size"), [("group6.jpg", 640), ("obama.jpg", 320), ("astronaut.png", 480)])
def test_scrfd_matches_insightface_on_real_photos(models, faces_dir, photo, det_size):
    frame = cv2.imread(str(faces_dir / photo))
    det, kps = reference_scrfd(models.scrfd, det_size).detect(frame)
    assert det.shape[0] >= 3
    assert_same_detections(ScrfdDetector(models.det, det_size=det_size).detect(frame), det, kps)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # scikit-image deprecation inside insightface
def test_arcface_matches_insightface_to_1e5(models, faces_dir, monkeypatch):
    from insightface.model_zoo.arcface_onnx import ArcFaceONNX
    from insightface.utils import face_align

    # The reference fits the similarity transform with scikit-image, which keeps float32 inputs
    # (its float32 template, SCRFD's float32 keypoints) in float32: matrices come out up to 3e-4
    # off the float64 fit livecam uses, which moves a few crop pixels by one level and the
    # embedding by about 1e-4. Fed float64, the reference agrees to 1e-5.
    monkeypatch.setattr(face_align, "arcface_dst", face_align.arcface_dst.astype(np.float64))

    frame = cv2.imread(str(faces_dir / "group6.jpg"))
    faces = ScrfdDetector(models.det).detect(frame)[:8]
    assert len(faces) == 8
    ref = ArcFaceONNX(model_file=str(models.arcface))
    ref.prepare(ctx_id=-1)
    expected = []
    for f in faces:
        e = ref.get(frame, SimpleNamespace(kps=f.kps.astype(np.float64)))
        expected.append(e / np.linalg.norm(e))
    ours = ArcFaceEmbedder(models.rec).embed(frame, faces)
    np.testing.assert_allclose(np.stack([f.embedding for f in ours]), np.stack(expected), atol=1e-5)


def test_arcface_crop_preprocessing_matches_insightface(models, faces_dir):
    from insightface.model_zoo.arcface_onnx import ArcFaceONNX

    frame = cv2.imread(str(faces_dir / "obama.jpg"))
    rng = np.random.default_rng(0)
    crops = [cv2.resize(frame, (112, 112)), rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)]
    ref = ArcFaceONNX(model_file=str(models.arcface))
    expected = ref.get_feat(crops)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(ArcFaceEmbedder(models.rec).embed_crops(crops), expected, atol=1e-5)


# --- SCRFD behaviour ---------------------------------------------------------------------------

def test_scrfd_maps_detections_back_to_frame_pixels(models):
    # A 2x nearest-neighbour enlargement letterboxes to the very same canvas, so every box and
    # keypoint must come out exactly twice as large. (NMS is off here: its inclusive-pixel IoU,
    # as in the reference, is measured in frame pixels and so is not scale-invariant.)
    small = synthetic_frame(240, 320, seed=4)
    big = cv2.resize(small, (640, 480), interpolation=cv2.INTER_NEAREST)
    det = ScrfdDetector(models.det, det_size=320, nms_iou=1.0)
    a, b = det.detect(small), det.detect(big)
    assert len(a) == len(b) > 0
    np.testing.assert_allclose(np.stack([f.bbox for f in b]), 2 * np.stack([f.bbox for f in a]), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(np.stack([f.kps for f in b]), 2 * np.stack([f.kps for f in a]), rtol=1e-5, atol=1e-3)


def test_scrfd_results_are_sorted_thresholded_and_suppressed(models):
    frame = synthetic_frame(480, 640, seed=1)
    faces = ScrfdDetector(models.det).detect(frame)
    scores = [f.score for f in faces]
    assert scores == sorted(scores, reverse=True) and min(scores) >= 0.5
    boxes = np.stack([f.bbox for f in faces])
    # No two kept boxes overlap by more than the NMS threshold (inclusive-pixel IoU, as SCRFD).
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            x1, y1 = np.maximum(boxes[i, :2], boxes[j, :2])
            x2, y2 = np.minimum(boxes[i, 2:], boxes[j, 2:])
            inter = max(0.0, x2 - x1 + 1) * max(0.0, y2 - y1 + 1)
            area = lambda b: (b[2] - b[0] + 1) * (b[3] - b[1] + 1)  # noqa: E731
            assert inter / (area(boxes[i]) + area(boxes[j]) - inter) <= 0.4 + 1e-6
    strict = ScrfdDetector(models.det, threshold=0.9).detect(frame)
    assert 0 < len(strict) < len(faces) and all(f.score >= 0.9 for f in strict)
    assert ScrfdDetector(models.det, threshold=1.01).detect(frame) == []


def test_scrfd_max_faces_keeps_the_largest(models):
    frame = synthetic_frame(480, 640, seed=2)
    det = ScrfdDetector(models.det)
    every = det.detect(frame)
    top = det.detect(frame, max_faces=2)
    assert len(top) == 2
    assert [f.area for f in top] == sorted((f.area for f in every), reverse=True)[:2]


def test_scrfd_accepts_bgra_and_grayscale_frames(models):
    bgr = synthetic_frame(480, 640, seed=3)
    det = ScrfdDetector(models.det)
    expected = [f.bbox for f in det.detect(bgr)]
    bgra = cv2.cvtColor(bgr, cv2.COLOR_BGR2BGRA)
    np.testing.assert_array_equal(np.stack([f.bbox for f in det.detect(bgra)]), np.stack(expected))
    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    assert isinstance(det.detect(gray), list)
    with pytest.raises(InputError):
        det.detect(bgr.astype(np.float32))


def test_scrfd_det_size_is_validated_and_changeable(models):
    with pytest.raises(InputError, match="multiple of 32"):
        ScrfdDetector(models.det, det_size=300)
    det = ScrfdDetector(models.det, det_size=640)
    frame = synthetic_frame(480, 640, seed=5)
    det.set_det_size(320)
    np.testing.assert_array_equal(
        np.stack([f.bbox for f in det.detect(frame)]),
        np.stack([f.bbox for f in ScrfdDetector(models.det, det_size=320).detect(frame)]))


def test_scrfd_refuses_a_model_of_the_wrong_kind(models):
    with pytest.raises(ModelError, match="9 outputs"):
        ScrfdDetector(models.rec)
    with pytest.raises(ModelError, match=r"\[N,3,112,112\]"):
        ArcFaceEmbedder(models.det)


# --- ArcFace behaviour -------------------------------------------------------------------------

class CountingSession:
    """Wraps a session and counts run() calls."""

    def __init__(self, inner):
        self.inner, self.calls, self.batches = inner, 0, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, outputs, feeds):
        self.calls += 1
        self.batches.append(next(iter(feeds.values())).shape[0])
        return self.inner.run(outputs, feeds)


def face_from_template(shift: tuple[float, float], scale: float = 1.5) -> Face:
    from livecam.faces.align import ARCFACE_112

    kps = ARCFACE_112 * scale + np.array(shift, np.float32)
    return Face(bbox=[shift[0], shift[1], shift[0] + 112 * scale, shift[1] + 112 * scale], score=1.0, kps=kps)


def test_arcface_embeds_all_faces_in_one_normalised_batch(models):
    frame = synthetic_frame(480, 640, seed=6)
    faces = [face_from_template((20, 30)), face_from_template((300, 200)), face_from_template((450, 40), 1.2)]
    counting = CountingSession(models.rec)
    out = ArcFaceEmbedder(counting).embed(frame, faces)
    assert counting.calls == 1 and counting.batches == [3]
    assert [f.bbox.tolist() for f in out] == [f.bbox.tolist() for f in faces]
    emb = np.stack([f.embedding for f in out])
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert np.abs(emb[0] - emb[1]).max() > 1e-3  # different content, different embedding
    assert ArcFaceEmbedder(counting).embed(frame, []) == [] and counting.calls == 1


def test_arcface_embeds_a_crowd_in_slices_of_the_tensorrt_batch_range(models):
    """More faces than PROFILE_BATCH's max (ORT's TensorRT provider refuses a batch outside its
    profile): slices of MAX_BATCH, the same embeddings as one face at a time."""
    from livecam.runtime.providers import MAX_BATCH, PROFILE_BATCH

    assert MAX_BATCH == PROFILE_BATCH[2] == 8
    rng = np.random.default_rng(3)
    crops = rng.integers(0, 256, (MAX_BATCH + 3, 112, 112, 3), dtype=np.uint8)
    counting = CountingSession(models.rec)
    together = ArcFaceEmbedder(counting).embed_crops(crops)
    assert counting.batches == [MAX_BATCH, 3]
    alone = np.concatenate([ArcFaceEmbedder(models.rec).embed_crops(c) for c in crops])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_arcface_embedding_follows_the_face_not_the_frame(models):
    # The same face content moved elsewhere in a frame gives the same embedding: alignment works.
    # (Not bit-exact: float32 keypoints at other coordinates round differently, and warpAffine
    # quantises sample positions to 1/32 px, so a few pixels may differ by one level.)
    frame = synthetic_frame(300, 300, seed=7)
    canvas = np.zeros((600, 700, 3), np.uint8)
    canvas[150:450, 260:560] = frame
    emb = ArcFaceEmbedder(models.rec)
    a = emb.embed(frame, [face_from_template((40, 50))])[0].embedding
    b = emb.embed(canvas, [face_from_template((40 + 260, 50 + 150))])[0].embedding
    elsewhere = emb.embed(canvas, [face_from_template((40 + 200, 50 + 150))])[0].embedding
    assert np.abs(a - b).max() < 1e-3
    assert np.abs(a - elsewhere).max() > 2e-2


def test_arcface_embed_crops_equals_embed(models):
    frame = synthetic_frame(480, 640, seed=8)
    face = face_from_template((100, 100), 2.0)
    emb = ArcFaceEmbedder(models.rec)
    crop = emb.align(frame, face.kps)
    assert crop.shape == (112, 112, 3)
    np.testing.assert_allclose(emb.embed_crops([crop])[0], emb.embed(frame, [face])[0].embedding, atol=1e-6)
    assert emb.embed_crops(np.zeros((0, 112, 112, 3), np.uint8)).shape == (0, 512)


# --- NMS (shared with BlazeFace) ---------------------------------------------------------------

def test_nms_keeps_the_best_of_each_overlapping_group():
    from livecam.faces.nms import iou_matrix, nms

    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60], [0, 0, 10, 10.5]], np.float32)
    scores = np.array([0.8, 0.9, 0.7, 0.6], np.float32)
    assert nms(boxes, scores, 0.4).tolist() == [1, 2]
    assert nms(boxes, scores, 0.99).tolist() == [1, 0, 2, 3]
    assert nms(np.empty((0, 4)), np.empty(0), 0.4).tolist() == []
    np.testing.assert_allclose(iou_matrix(boxes[:1], boxes[:3]), [[1.0, 81 / 119, 0.0]])
    # Inclusive-pixel convention: a 10x10 box counts 11x11 pixels.
    np.testing.assert_allclose(iou_matrix(boxes[:1], boxes[1:2], offset=1.0), [[100 / 142]])


def test_nms_matrix_and_loop_paths_agree(monkeypatch):
    from livecam.faces import nms as nms_module

    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 300, (400, 2))
    boxes = np.hstack([xy, xy + rng.uniform(10, 60, (400, 2))])
    scores = rng.uniform(0, 1, 400)
    fast = nms_module.nms(boxes, scores, 0.4, offset=1.0)
    monkeypatch.setattr(nms_module, "MATRIX_LIMIT", 0)
    assert fast.tolist() == nms_module.nms(boxes, scores, 0.4, offset=1.0).tolist()
    assert 10 < len(fast) < 400


def test_scrfd_with_a_fixed_size_export_keeps_its_size(tmp_path, caplog):
    fixed = session(build_scrfd(tmp_path / "fixed.onnx", fixed_size=640))
    det = ScrfdDetector(fixed, det_size=320)
    assert det.det_size == 640
    assert "only takes 640x640" in caplog.text
    frame = synthetic_frame(480, 640, seed=9)
    dynamic = ScrfdDetector(session(build_scrfd(tmp_path / "dyn.onnx")), det_size=640)
    assert [f.score for f in det.detect(frame)] == [f.score for f in dynamic.detect(frame)]
