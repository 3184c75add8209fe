"""--face-selector-order and --face-min-size end to end on a photo of six people (group6.jpg):
which faces change, in `image`, `video` and `run`. The embedded models (BlazeFace, FaceMesh, the
mesh swapper) do the work, so nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from livecam.faces.blazeface import BlazeFaceDetector
from livecam.media.images import read_image
from livecam.models.catalog import DEFAULT_DIR
from tests.conftest import run_cli
from tests.standins import cpu_session
from tests.videos import make_clip

MESH = ["--swap-model", "mesh", "--no-label"]


def _boxes(image: np.ndarray) -> list[tuple[np.ndarray, float]]:
    """The faces BlazeFace (full range, as the CLI uses without det_10g) finds: (box, score)."""
    detector = BlazeFaceDetector(cpu_session(DEFAULT_DIR / "blazeface_full_range.onnx"), "full")
    return [(f.bbox.copy(), float(f.score)) for f in detector.detect(image)]


def _changed(before: np.ndarray, after: np.ndarray, boxes) -> list[float]:
    """Mean change inside the middle of each face box (eyes to mouth)."""
    out = []
    for box, _ in boxes:
        x1, y1, x2, y2 = box
        w, h = x2 - x1, y2 - y1
        sl = (slice(int(y1 + 0.3 * h), int(y2 - 0.15 * h)), slice(int(x1 + 0.2 * w), int(x2 - 0.2 * w)))
        out.append(float(np.abs(after[sl].astype(int) - before[sl]).mean()))
    return out


@pytest.fixture
def group(faces_dir: Path) -> tuple[Path, np.ndarray, list]:
    path = faces_dir / "group6.jpg"
    image = read_image(path)
    boxes = _boxes(image)
    assert len(boxes) == 6
    return path, image, boxes


def _centre(box: np.ndarray) -> tuple[float, float]:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def test_order_picks_the_one_face_swapped_without_many_faces(tmp_path, faces_dir, group, isolated_env):
    path, before, boxes = group
    expected = {  # the face each order puts first, from the boxes themselves
        "left-right": min(range(6), key=lambda i: _centre(boxes[i][0])[0]),
        "bottom-top": max(range(6), key=lambda i: _centre(boxes[i][0])[1]),
        "best-worst": max(range(6), key=lambda i: boxes[i][1]),
        None: max(range(6), key=lambda i: np.prod(boxes[i][0][2:] - boxes[i][0][:2])),  # default: the largest
    }
    assert len(set(expected.values())) == 4  # four different faces: the option decides
    for order, index in expected.items():
        out = tmp_path / f"{order}.png"
        args = ["image", str(path), str(out), "-s", str(faces_dir / "biden.jpg"), *MESH, "--no-watermark",
                "--no-c2pa"] + (["--face-selector-order", order] if order else [])
        result = run_cli(args, env=isolated_env, timeout=300)
        assert result.returncode == 0, result.stderr
        changed = _changed(before, read_image(out), boxes)
        assert changed[index] > 4, (order, changed)
        assert all(c == 0 for i, c in enumerate(changed) if i != index), (order, changed)


def test_min_size_leaves_small_faces_alone_with_many_faces(tmp_path, faces_dir, group, isolated_env):
    path, before, boxes = group
    sides = [min(b[2] - b[0], b[3] - b[1]) for b, _ in boxes]
    limit = float(np.median(sides))  # half of them under it
    big = [s >= limit for s in sides]
    assert 0 < sum(big) < 6
    out = tmp_path / "o.png"
    result = run_cli(["image", str(path), str(out), "-s", str(faces_dir / "biden.jpg"), *MESH, "--many-faces",
                      "--face-min-size", str(int(np.ceil(limit))), "--no-watermark", "--no-c2pa"],
                     env=isolated_env, timeout=300)
    assert result.returncode == 0, result.stderr
    changed = _changed(before, read_image(out), boxes)
    for side, is_big, c in zip(sides, big, changed):
        if side >= np.ceil(limit):
            assert c > 4, (sides, changed)
        else:
            assert c == 0, (sides, changed)
    # Without the minimum, every face changes.
    every = tmp_path / "all.png"
    result = run_cli(["image", str(path), str(every), "-s", str(faces_dir / "biden.jpg"), *MESH, "--many-faces",
                      "--no-watermark", "--no-c2pa"], env=isolated_env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert all(c > 4 for c in _changed(before, read_image(every), boxes))


def _group_clip(tmp_path: Path, faces_dir: Path) -> Path:
    image = cv2.imread(str(faces_dir / "group6.jpg"))
    h, w = image.shape[:2]
    return make_clip(tmp_path / "group.mp4", frames=3, size=(w - w % 2, h - h % 2), fps=10, audio=False,
                     source_image=faces_dir / "group6.jpg", moving_crop=False)


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


@pytest.mark.parametrize("command", ["video", "run"])
def test_the_filters_work_in_video_and_run(tmp_path, faces_dir, isolated_env, command):
    clip = _group_clip(tmp_path, faces_dir)
    first = _frames(clip)[0]
    boxes = _boxes(first)
    assert len(boxes) >= 4  # the clip is a crop of the photo
    right = max(range(len(boxes)), key=lambda i: _centre(boxes[i][0])[0])

    def encoded(out: Path, *extra: str) -> np.ndarray:
        if command == "video":
            args = ["video", str(clip), str(out)]
        else:
            args = ["run", "--camera", str(clip), "--no-realtime", "--output", str(out)]
        result = run_cli([*args, "-s", str(faces_dir / "biden.jpg"), *MESH, *extra], env=isolated_env,
                         timeout=300, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return _frames(out)[0]

    # Against the same clip through the same command untouched (no face large enough to change;
    # --blend 0 is refused): only the swap differs.
    untouched = encoded(tmp_path / "b0.mp4", "--face-min-size", "10000")
    one = _changed(untouched, encoded(tmp_path / "rl.mp4", "--face-selector-order", "right-left"), boxes)
    assert one[right] > 6, one
    assert all(c < 3 for i, c in enumerate(one) if i != right), one  # re-encoding noise only
    sides = [min(b[2] - b[0], b[3] - b[1]) for b, _ in boxes]
    limit = int(np.ceil(np.median(sides)))
    many = _changed(untouched, encoded(tmp_path / "min.mp4", "--many-faces", "--face-min-size", str(limit)), boxes)
    for side, c in zip(sides, many):
        assert (c > 6) if side >= limit else (c < 3), (sides, many)


def test_no_face_large_enough_says_so_and_writes_the_image_unchanged(tmp_path, faces_dir, group, isolated_env):
    path, before, _ = group
    out = tmp_path / "o.png"
    result = run_cli(["image", str(path), str(out), "-s", str(faces_dir / "biden.jpg"), *MESH, "--many-faces",
                      "--face-min-size", "1000", "--no-watermark", "--no-c2pa"], env=isolated_env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "no face of at least 1000 px (--face-min-size) found" in result.stderr
    assert np.array_equal(read_image(out), before)
