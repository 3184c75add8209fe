"""Outputs marked as synthetic: metadata readable by other tools, and the visible label."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest

from livecam.media import provenance
from livecam.media import images
from livecam.media import metadata as md


def _noise(h: int, w: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, channels), dtype=np.uint8)


def test_container_metadata_says_synthetic() -> None:
    meta = provenance.CONTAINER_METADATA
    assert "AI-generated" in meta["comment"] and "livecam" in meta["comment"]
    assert meta["synthetic"] == "true"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())


def test_png_text_chunks() -> None:
    data = images.encode_image(_noise(20, 30), "png", keep_alpha=False)
    text = provenance.read_png_text(data)
    assert text["Software"].startswith("livecam")
    assert text["Comment"] == provenance.DESCRIPTION
    assert provenance.DIGITAL_SOURCE_TYPE in provenance.read_xmp(data)
    assert provenance.is_marked_synthetic(data)
    # Still a valid PNG with the same pixels.
    assert np.array_equal(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED), _noise(20, 30))


def test_png_chunks_have_valid_crcs_for_pillow() -> None:
    pil = pytest.importorskip("PIL.Image")
    data = images.encode_image(_noise(20, 30, 4), "png", keep_alpha=True)
    img = pil.open(io.BytesIO(data))
    img.load()
    assert img.text["Comment"] == provenance.DESCRIPTION
    pil.open(io.BytesIO(data)).verify()  # checks every chunk's CRC


def test_jpeg_exif_and_xmp() -> None:
    data = images.encode_image(_noise(20, 30), "jpeg", keep_alpha=False)
    assert provenance.read_jpeg_description(data) == provenance.DESCRIPTION
    assert provenance.DIGITAL_SOURCE_TYPE in provenance.read_xmp(data)
    assert cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).shape == (20, 30, 3)
    pil = pytest.importorskip("PIL.Image")
    exif = pil.open(io.BytesIO(data)).getexif()
    assert exif[md.TAG_IMAGE_DESCRIPTION] == provenance.DESCRIPTION
    assert exif[md.TAG_SOFTWARE].startswith("livecam")


@pytest.mark.parametrize("channels", [3, 4])
def test_webp_exif_and_xmp(channels: int) -> None:
    data = images.encode_image(_noise(20, 30, channels), "webp", keep_alpha=True)
    assert data[12:16] == b"VP8X"
    assert provenance.read_jpeg_description(data) == provenance.DESCRIPTION
    assert provenance.is_marked_synthetic(data)
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    assert decoded.shape == (20, 30, channels)
    pil = pytest.importorskip("PIL.Image")
    img = pil.open(io.BytesIO(data))
    assert img.size == (30, 20) and img.getexif()[md.TAG_IMAGE_DESCRIPTION] == provenance.DESCRIPTION


def test_untagged_files_are_not_marked() -> None:
    plain = cv2.imencode(".png", _noise(8, 8))[1].tobytes()
    assert not provenance.is_marked_synthetic(plain)
    assert provenance.read_jpeg_description(cv2.imencode(".jpg", _noise(8, 8))[1].tobytes()) is None


@pytest.mark.parametrize("shape", [(48, 64), (480, 640), (1080, 1920), (1920, 1080), (30, 500)])
def test_label_changes_only_its_corner(shape: tuple[int, int]) -> None:
    img = _noise(*shape)
    before = img.copy()
    provenance.draw_label(img)
    x1, y1, x2, y2 = provenance.label_box(img.shape)
    changed = np.any(img != before, axis=2)
    assert changed.any()
    outside = changed.copy()
    outside[y1:y2, x1:x2] = False
    assert not outside.any()
    h, w = shape
    # Bottom-right and small: under 20% of the width and 8% of the height (above tiny sizes).
    assert x2 > w * 0.8 and y2 > h * 0.8
    if min(h, w) >= 480:
        assert (x2 - x1) < 0.2 * w and (y2 - y1) < 0.08 * h


def test_label_is_readable_white_on_dark() -> None:
    img = np.full((720, 1280, 3), 200, np.uint8)
    provenance.draw_label(img)
    x1, y1, x2, y2 = provenance.label_box(img.shape)
    box = img[y1:y2, x1:x2]
    assert box.max() == 255 and box.min() < 120  # white text on a darkened backdrop
    assert provenance.label_box((1080, 1920))[3] - provenance.label_box((1080, 1920))[1] > \
        provenance.label_box((360, 640))[3] - provenance.label_box((360, 640))[1]  # scales with size


def test_label_on_bgra_makes_its_box_opaque() -> None:
    img = np.zeros((200, 300, 4), np.uint8)
    provenance.draw_label(img)
    x1, y1, x2, y2 = provenance.label_box(img.shape)
    assert (img[y1:y2, x1:x2, 3] == 255).all()
    assert (img[:y1, :, 3] == 0).all()


def _label_pixels(img: np.ndarray, faces: list[tuple[int, int, int, int]]) -> np.ndarray:
    """The mask of pixels draw_label changed in a copy of img, with these face boxes."""
    before = img.copy()
    provenance.draw_label(img, faces)
    return np.any(img != before, axis=2)


@pytest.mark.parametrize("shape", [(480, 640), (1280, 720), (240, 320)])
def test_label_keeps_off_a_face_in_the_bottom_right_corner(shape: tuple[int, int]) -> None:
    # The label was always drawn bottom-right, over whatever face was there.
    h, w = shape
    face = (w // 2, h // 2, w - 4, h - 4)  # a face reaching into the bottom-right corner
    changed = _label_pixels(_noise(h, w), [face])
    assert changed.any()
    assert not changed[face[1]:face[3], face[0]:face[2]].any()  # no label pixel on the face
    ys, xs = np.nonzero(changed)
    assert ys.min() > h * 0.8 and xs.max() < w * 0.5  # bottom-left, the next corner a viewer looks at


def test_label_stays_bottom_right_when_no_face_is_near() -> None:
    img = _noise(480, 640)
    assert provenance.draw_label(img.copy(), [(100, 50, 300, 250)]) == "bottom-right"
    changed = _label_pixels(img, [(100, 50, 300, 250)])
    x1, y1, x2, y2 = provenance.label_box(img.shape)
    assert changed[y1:y2, x1:x2].any() and not changed[:y1].any()


def test_label_goes_where_faces_cover_it_least_when_every_corner_has_one() -> None:
    h, w = 480, 640
    faces = [(w - 200, h - 150, w, h), (0, h - 150, 200, h), (w - 200, 0, w, 150)]  # top-left free
    assert provenance.label_corner((h, w), faces) == "top-left"
    everywhere = faces + [(0, 0, 40, 20)]  # a small face in the top-left corner too
    assert provenance.label_corner((h, w), everywhere) == "top-left"


def test_label_in_a_video_moves_only_when_a_face_comes_near_it() -> None:
    # A face crossing the picture at 30 fps: the label stays bottom-right until the face comes
    # near and moves once (it would jump back and forth as the face passed each corner).
    h, w = 360, 640
    placement = provenance.LabelPlacement()
    corners = []
    for i, x in enumerate(range(0, w - 120, 20)):
        img = _noise(h, w)
        face = (x, h - 140, x + 120, h - 4)
        before = img.copy()
        corners.append(placement.draw(img, [face], i / 30))
        changed = np.any(img != before, axis=2)
        assert not changed[face[1]:face[3], face[0]:face[2]].any()
    assert corners[0] == "bottom-right" and corners[-1] != "bottom-right"
    moves = sum(a != b for a, b in zip(corners, corners[1:]))
    assert moves == 1  # right -> left as it passes; never back and forth
    assert corners[:len(corners) // 3] == ["bottom-right"] * (len(corners) // 3)


def test_label_in_a_video_goes_back_a_second_after_the_face_left_and_only_that_second_decides() -> None:
    # Bounded memory is what lets a cluster segment, which sees only the second before its start
    # (observe(): its warm-up), place the label as the whole-file run does.
    h, w = 360, 640
    near = [(w - 200, h - 150, w, h)]  # a face at the bottom-right corner, for 0.2 s from 0.5 s
    faces = [near if 15 <= i <= 21 else [] for i in range(120)]
    whole = provenance.LabelPlacement()
    corners = [whole.draw(_noise(h, w), faces[i], i / 30) for i in range(120)]
    assert corners[:15] == ["bottom-right"] * 15
    assert set(corners[15:50]) == {"bottom-left"}  # away while the face was near in the last second
    assert corners[52:] == ["bottom-right"] * 68  # back once 21/30 s is more than a second ago
    assert sum(a != b for a, b in zip(corners, corners[1:])) == 2
    segment = provenance.LabelPlacement()  # starts at frame 40, having seen 10..39
    for i in range(10, 40):
        segment.observe(i / 30, faces[i])
    assert [segment.draw(_noise(h, w), faces[i], i / 30) for i in range(40, 120)] == corners[40:]
    cold = provenance.LabelPlacement()  # without the look back it would start bottom-right
    assert cold.draw(_noise(h, w), faces[40], 40 / 30) == "bottom-right" != corners[40]
