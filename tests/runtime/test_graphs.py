"""The pre/post-processing graphs (runtime/graphs.py) against the numpy/OpenCV path they
replace on a GPU, on the CPU provider: within one grey level, for upright and rolled faces,
faces cut by the frame edge and odd frame sizes."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.faces.align import FFHQ_512, align_matrix, arcface_template, invert, to_blob, warp_crop
from livecam.faces.scrfd import INPUT_MEAN, INPUT_STD, ScrfdDetector
from livecam.processors.paste import align_crop
from livecam.runtime.graphs import blob_graph, letterbox_graph, output_graph, session_of, warp_crop_graph
from tests.standins import cpu_session
from tests.standins.scrfd import build_scrfd

LEVEL = 1.0  # one grey level, in pixel units


def photo(faces_dir: Path, size: tuple[int, int] | None = None) -> np.ndarray:
    img = cv2.imread(str(faces_dir / "obama.jpg"))
    return img if size is None else cv2.resize(img, size, interpolation=cv2.INTER_AREA)


def kps_for(centre: tuple[float, float], eye_gap: float, roll_deg: float) -> np.ndarray:
    """Five plausible keypoints around `centre`, rolled by `roll_deg`."""
    unit = np.array([[-0.5, -0.4], [0.5, -0.4], [0.0, 0.1], [-0.4, 0.55], [0.4, 0.55]])
    a = np.deg2rad(roll_deg)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return (unit @ rot.T * eye_gap + np.asarray(centre)).astype(np.float32)


def in_levels(blob: np.ndarray, scale: float) -> np.ndarray:
    return blob.astype(np.float64) / scale


def test_blob_graph_is_to_blob(faces_dir: Path) -> None:
    image = photo(faces_dir, (321, 243))
    session = session_of(blob_graph(1.0 / 127.5, -1.0))
    (got,) = session.run(None, {"image": image})
    want = to_blob([image], 1.0 / 127.5, -1.0)
    assert got.shape == want.shape == (1, 3, 243, 321)
    assert np.array_equal(got, want)  # to the bit: a truncating conversion back gives the same levels


@pytest.mark.parametrize("scale, offset", [(1.0 / 255.0, 0.0), (2.0 / 255.0, -1.0)])
def test_a_batch_of_crops_through_the_blob_graph_and_back_is_the_plain_round_trip(faces_dir: Path, scale: float,
                                                                                   offset: float) -> None:
    """The joined swapper's two ends on a model that passes pixels through: the batch's blobs
    are to_blob's, and the swapper's truncating conversion back gives the levels its numpy
    path gives (HyperSwap's range loses a level on some values in both)."""
    crops = [photo(faces_dir, (128, 128)), np.ascontiguousarray(photo(faces_dir, (128, 128))[::-1])]
    (blob,) = session_of(blob_graph(scale, offset, batch=True)).run(None, {"image": np.stack(crops)})
    assert np.array_equal(blob, to_blob(crops, scale, offset))
    (back,) = session_of(output_graph(128, scale, offset, rounded=False)).run(None, {"output": blob})
    for crop, got, plane in zip(crops, back, blob):
        rgb = (plane.transpose(1, 2, 0) - np.float32(offset)) * np.float32(1.0 / (scale * 255.0))
        want = np.clip(255.0 * rgb, 0, 255).astype(np.uint8)[:, :, ::-1]  # NeuralSwapper.swap_crop's steps
        assert np.array_equal(got, want)
        assert np.abs(got.astype(int) - crop).max() <= 1


@pytest.mark.parametrize("size", [(1280, 720), (641, 359), (360, 641)])
def test_letterbox_graph_is_the_detectors_input(tmp_path: Path, faces_dir: Path, size: tuple[int, int]) -> None:
    detector = ScrfdDetector(cpu_session(build_scrfd(tmp_path / "det.onnx")), det_size=640)
    image = photo(faces_dir, size)
    want, det_scale = detector._letterbox(image)
    h, w = image.shape[:2]
    # The canvas part the frame fills: the longer side 640, the other truncated (as the detector).
    resized = np.array([640, int(640 * w / h)] if h > w else [int(640 * h / w), 640], np.int64)
    assert resized[0] == round(det_scale * h)
    session = session_of(letterbox_graph(640, 1.0 / INPUT_STD, -INPUT_MEAN / INPUT_STD))
    (got,) = session.run(None, {"image": image, "resized": resized})
    diff = np.abs(in_levels(got, 1.0 / INPUT_STD) - in_levels(want, 1.0 / INPUT_STD))
    assert got.shape == want.shape
    assert diff.max() <= LEVEL + 1e-3
    # OpenCV's uint8 resize works in fixed point: a level off where the value is near a tie.
    assert (diff > 0.5).mean() < 0.15


CASES = {
    "upright": ((640, 330), 90.0, 0.0),
    "rolled": ((600, 360), 80.0, 35.0),
    "cut by the left edge": ((20, 300), 90.0, -10.0),
    "cut by the bottom edge": ((700, 700), 120.0, 170.0),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("frame", [(1280, 720), (641, 359)])
def test_swapper_crop_graph_is_warp_crop_and_to_blob(faces_dir: Path, case: str, frame: tuple[int, int]) -> None:
    image = photo(faces_dir, frame)
    centre, gap, roll = CASES[case]
    kps = kps_for((centre[0] * frame[0] / 1280, centre[1] * frame[1] / 720), gap * frame[0] / 1280, roll)
    matrix = align_matrix(kps, arcface_template(128))
    want = to_blob([warp_crop(image, matrix, 128)], 1.0 / 255.0)
    session = session_of(warp_crop_graph(128, 1.0 / 255.0, 0.0))
    (got,) = session.run(None, {"image": image, "inverse": invert(matrix).astype(np.float32)})
    diff = np.abs(in_levels(got, 1.0 / 255.0) - in_levels(want, 1.0 / 255.0))
    assert diff.max() <= LEVEL + 1e-3, case
    assert (diff > 0.5).mean() < 0.02, case


@pytest.mark.parametrize("case", list(CASES))
def test_enhancer_crop_graph_replicates_the_border_as_align_crop(faces_dir: Path, case: str) -> None:
    image = photo(faces_dir, (1280, 720))
    centre, gap, roll = CASES[case]
    matrix = align_matrix(kps_for(centre, gap, roll), FFHQ_512)
    want = to_blob([align_crop(image, matrix, 512)], 1.0 / 127.5, -1.0)
    session = session_of(warp_crop_graph(512, 1.0 / 127.5, -1.0, replicate=True))
    (got,) = session.run(None, {"image": image, "inverse": invert(matrix).astype(np.float32)})
    diff = np.abs(in_levels(got, 1.0 / 127.5) - in_levels(want, 1.0 / 127.5))
    assert diff.max() <= LEVEL + 1e-3, case
    assert (diff > 0.5).mean() < 0.02, case


def test_output_graphs_are_the_swappers_and_the_enhancers_conversions() -> None:
    rng = np.random.default_rng(0)
    # Values beyond the range too: both paths clip.
    swapped = rng.uniform(-0.1, 1.1, (1, 3, 128, 128)).astype(np.float32)
    want = np.ascontiguousarray(np.clip(255.0 * swapped[0].transpose(1, 2, 0), 0, 255).astype(np.uint8)[:, :, ::-1])
    (got,) = session_of(output_graph(128, 1.0 / 255.0, 0.0, rounded=False)).run(None, {"output": swapped})
    assert got.dtype == np.uint8 and got.shape == (1, 128, 128, 3)
    got = got[0]
    assert np.abs(got.astype(int) - want).max() <= 1 and (got == want).mean() > 0.99
    restored = rng.uniform(-1.2, 1.2, (1, 3, 512, 512)).astype(np.float32)
    rows = restored[0].reshape(3 * 512, 512)
    u8 = cv2.addWeighted(rows, 127.5, rows, 0.0, 127.5, dtype=cv2.CV_8U)
    want = cv2.merge([u8[1024:], u8[512:1024], u8[:512]])
    (got,) = session_of(output_graph(512, 1.0 / 127.5, -1.0, rounded=True)).run(None, {"output": restored})
    assert np.abs(got[0].astype(int) - want).max() <= 1 and (got[0] == want).mean() > 0.99
    # planar: the B, G, R planes the enhancer merges with its alpha
    (planes,) = session_of(output_graph(512, 1.0 / 127.5, -1.0, rounded=True, planar=True)).run(None, {"output": restored})
    assert planes.shape == (1, 3, 512, 512) and np.array_equal(planes[0].transpose(1, 2, 0), got[0])


def test_the_letterbox_joined_to_the_detector_takes_uint8_and_gives_its_outputs(tmp_path: Path, faces_dir: Path) -> None:
    """with_preprocessing: one session, uint8 frame in (what crosses the bus on a GPU), the
    detector's own outputs out, as from the numpy letterbox (to the one-level rounding)."""
    import onnx

    from livecam.runtime.graphs import with_preprocessing

    path = build_scrfd(tmp_path / "det.onnx")
    model = onnx.load(str(path))
    pre = letterbox_graph(640, 1.0 / INPUT_STD, -INPUT_MEAN / INPUT_STD, opset=model.opset_import[0].version)
    joined = session_of(with_preprocessing(pre, model, "input.1"))
    plain = cpu_session(path)
    assert [i.name for i in joined.get_inputs()] == ["pre_image", "pre_resized"]
    assert [o.name for o in joined.get_outputs()] == [o.name for o in plain.get_outputs()]
    image = photo(faces_dir, (1280, 720))
    blob, _ = ScrfdDetector(plain, det_size=640)._letterbox(image)
    want = plain.run(None, {"input.1": blob})
    got = joined.run(None, {"pre_image": image, "pre_resized": np.array([360, 640], np.int64)})
    assert all(np.allclose(g, w, atol=0.05) for g, w in zip(got, want))


@pytest.mark.parametrize("det_size", [640, 320])
@pytest.mark.parametrize("frame", [(1280, 720), (480, 641)])
def test_the_detector_with_its_front_finds_the_same_faces(tmp_path: Path, faces_dir: Path, det_size: int,
                                                          frame: tuple[int, int]) -> None:
    """ScrfdDetector(joined=...): one session takes the uint8 frame (a lane on a GPU); the faces
    are those of the numpy letterbox path, at either det size (the canvas is an input)."""
    from livecam.faces.scrfd import FRONT
    from livecam.runtime.graphs import joined_model

    path = build_scrfd(tmp_path / "det.onnx")
    joined = session_of_bytes(joined_model(str(path), FRONT))
    plain = ScrfdDetector(cpu_session(path), det_size=det_size)
    fronted = ScrfdDetector(cpu_session(path), det_size=det_size, joined=joined)
    image = photo(faces_dir, frame)
    want, got = plain.detect(image), fronted.detect(image)
    assert want, "the stand-in should report faces"
    # The stand-in reports dozens of overlapping random boxes: a one-level difference in the input
    # may tip a threshold or an NMS tie between two of them, so nearly all (not all) must match.
    strong = [f for f in want if f.score > 0.6]
    matched = [f for f in strong
               if any(np.abs(g.bbox - f.bbox).max() < 1.0 and abs(g.score - f.score) < 0.02 for g in got)]
    assert len(strong) >= 10 and len(matched) >= 0.95 * len(strong)
    assert abs(len(got) - len(want)) <= max(2, len(want) // 10)


def session_of_bytes(model: bytes):  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
