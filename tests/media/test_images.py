"""Still-image I/O: formats, alpha, grayscale, 16-bit, EXIF orientation, bombs, atomic writes."""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.atomic import OutputConflictError
from livecam.media import provenance
from livecam.errors import EXIT_USAGE, InputError, OutputError, OutputExistsError
from livecam.media import images
from livecam.media import metadata as md
from tests.conftest import unwritable_folder


def _pattern(h: int = 48, w: int = 64) -> np.ndarray:
    """Blocky colours that survive JPEG well and show any rotation or flip."""
    img = np.zeros((h, w, 3), np.uint8)
    img[: h // 2, : w // 2] = (0, 0, 255)
    img[: h // 2, w // 2:] = (0, 255, 0)
    img[h // 2:, : w // 2] = (255, 0, 0)
    img[h // 2:, w // 2:] = (255, 255, 255)
    img[:8, :8] = (0, 255, 255)
    return img


@pytest.mark.parametrize("ext", [".jpg", ".jpeg", ".png", ".webp", ".tif", ".tiff"])
def test_round_trip_every_format(tmp_path: Path, ext: str) -> None:
    img = _pattern()
    out = tmp_path / f"x{ext}"
    images.write_image_atomic(out, img, force=False, label=False)
    back = images.read_image(out)
    assert back.shape == img.shape and back.dtype == np.uint8
    assert np.abs(back.astype(int) - img).mean() < 4
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left behind
    assert provenance.is_marked_synthetic(out)  # every format written says it is synthetic


@pytest.mark.parametrize("alpha", [False, True])
def test_tiff_carries_the_synthetic_tags_where_tiff_readers_look(tmp_path: Path, alpha: bool) -> None:
    Image = pytest.importorskip("PIL.Image", reason="Pillow (an independent TIFF reader) is not installed")
    img = _pattern()
    if alpha:
        img = np.dstack([img, np.full(img.shape[:2], 200, np.uint8)])
    out = tmp_path / "x.tif"
    images.write_image_atomic(out, img, force=False, label=False)
    with Image.open(out) as tiff:
        assert tiff.size == (img.shape[1], img.shape[0])
        assert tiff.tag_v2[md.TAG_IMAGE_DESCRIPTION] == provenance.DESCRIPTION
        assert tiff.tag_v2[md.TAG_SOFTWARE] == provenance.SOFTWARE
        assert provenance.DIGITAL_SOURCE_TYPE.encode() in bytes(tiff.tag_v2[md.TAG_XMP])
    assert np.array_equal(images.read_image(out), img)


def test_bmp_is_read_but_not_written(tmp_path: Path) -> None:
    bmp = tmp_path / "in.bmp"
    cv2.imwrite(str(bmp), _pattern())
    assert images.read_image(bmp).shape == _pattern().shape
    # the fix names the file to write and the other formats, as a GIF output's does (it said "write .png")
    with pytest.raises(InputError, match=r"\.bmp files hold no metadata.*; write out\.png \(lossless\) instead, "
                                         r"or another of JPEG, PNG, WebP, TIFF \(\.jpg"):
        images.check_output_path(tmp_path / "out.bmp", force=False)
    with pytest.raises(InputError, match="hold no metadata"):
        images.write_image_atomic(tmp_path / "out.bmp", _pattern(), force=False, label=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.bmp"]


@pytest.mark.parametrize("ext", [".png", ".webp", ".tif"])
def test_rgba_keeps_alpha(tmp_path: Path, ext: str) -> None:
    img = _pattern()
    alpha = np.tile(np.linspace(0, 255, img.shape[1]).astype(np.uint8), (img.shape[0], 1))
    out = tmp_path / f"a{ext}"
    images.write_image_atomic(out, np.dstack([img, alpha]), force=False, label=False)
    back = images.read_image(out)
    assert back.shape == (*img.shape[:2], 4)
    tol = 0 if ext != ".webp" else 3
    assert np.abs(back[..., 3].astype(int) - alpha).max() <= tol


def test_alpha_argument_and_jpeg_drops_alpha(tmp_path: Path) -> None:
    img = _pattern()
    alpha = np.full(img.shape[:2], 77, np.uint8)
    images.write_image_atomic(tmp_path / "a.png", img, force=False, label=False, alpha=alpha)
    assert (images.read_image(tmp_path / "a.png")[..., 3] == 77).all()
    images.write_image_atomic(tmp_path / "a.jpg", np.dstack([img, alpha]), force=False, label=False)
    assert images.read_image(tmp_path / "a.jpg").shape == img.shape


def test_transparency_written_to_a_jpeg_is_white_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Alpha was dropped: the colour hidden under transparent pixels (here green) showed.
    img = _pattern()
    img[:, :16] = (0, 255, 0)
    alpha = np.full(img.shape[:2], 255, np.uint8)
    alpha[:, :16] = 0
    alpha[:, 16:24] = 128
    with caplog.at_level(logging.INFO, logger="livecam"):
        images.write_image_atomic(tmp_path / "a.jpg", img, force=False, label=False, alpha=alpha)
    out = images.read_image(tmp_path / "a.jpg").astype(int)
    assert np.abs(out[4:-4, 2:14] - 255).max() <= 3  # white, not green
    half = np.abs(out[10:18, 18:22] - (img[10:18, 18:22].astype(int) + 255) / 2).max()
    assert half <= 6  # half transparent: half way to white
    assert np.abs(out[10:18, 27:30] - img[10:18, 27:30]).max() <= 6  # opaque: as it was
    notes = [r.getMessage() for r in caplog.records if "transparen" in r.getMessage()]
    assert len(notes) == 1 and "a.jpg" in notes[0] and ".png" in notes[0]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="livecam"):  # fully opaque: nothing to say
        images.write_image_atomic(tmp_path / "b.jpg", img, force=False, label=False, alpha=np.full_like(alpha, 255))
    assert not [r for r in caplog.records if "transparen" in r.getMessage()]


def test_grayscale_becomes_bgr(tmp_path: Path) -> None:
    gray = _pattern()[..., 1]
    for ext in (".png", ".jpg"):
        path = tmp_path / f"g{ext}"
        cv2.imwrite(str(path), gray)
        back = images.read_image(path)
        assert back.shape == (*gray.shape, 3)
        assert np.array_equal(back[..., 0], back[..., 2])
        assert np.abs(back[..., 1].astype(int) - gray).mean() < 3


def test_sixteen_bit_png_is_scaled_to_eight_bits(tmp_path: Path) -> None:
    img16 = np.zeros((10, 12, 3), np.uint16)
    img16[:5] = 65535
    img16[5:] = 257 * 100
    path = tmp_path / "deep.png"
    cv2.imwrite(str(path), img16)
    assert cv2.imread(str(path), cv2.IMREAD_UNCHANGED).dtype == np.uint16  # really 16-bit
    back = images.read_image(path)
    assert back.dtype == np.uint8
    assert (back[:5] == 255).all() and (back[5:] == 100).all()
    gray16 = np.full((6, 6), 65535, np.uint16)
    cv2.imwrite(str(tmp_path / "g16.png"), gray16)
    assert (images.read_image(tmp_path / "g16.png") == 255).all()


def _with_orientation(jpeg: bytes, orientation: int) -> bytes:
    exif = md.EXIF_HEADER + md.build_exif(short_tags={md.TAG_ORIENTATION: orientation})
    return md.jpeg_insert_segments(jpeg, [(0xE1, exif)])


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_honoured(tmp_path: Path, orientation: int) -> None:
    img = _pattern()
    jpeg = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 100])[1].tobytes()
    path = tmp_path / "rot.jpg"
    path.write_bytes(_with_orientation(jpeg, orientation))
    back = images.read_image(path)
    # OpenCV's IMREAD_COLOR applies EXIF orientation: an independent oracle for 3-channel JPEGs.
    oracle = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert back.shape == oracle.shape
    assert np.array_equal(back, oracle)
    if orientation == 6:  # rotate 90 degrees clockwise: the yellow corner goes top-right
        assert back.shape[:2] == img.shape[1::-1]
        assert tuple(back[2, -3]) == pytest.approx((0, 255, 255), abs=30)


def test_exif_orientation_matches_pillow(tmp_path: Path) -> None:
    pil = pytest.importorskip("PIL.Image")
    ops = pytest.importorskip("PIL.ImageOps")
    jpeg = cv2.imencode(".jpg", _pattern(), [cv2.IMWRITE_JPEG_QUALITY, 100])[1].tobytes()
    for orientation in (5, 7, 8):
        path = tmp_path / f"o{orientation}.jpg"
        path.write_bytes(_with_orientation(jpeg, orientation))
        ref = np.asarray(ops.exif_transpose(pil.open(path)).convert("RGB"))[..., ::-1]
        assert np.array_equal(images.read_image(path), ref)


def _png_header_only(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    idat = zlib.compress(b"\x00" * 1000)
    return md.PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_decompression_bomb_refused_before_decoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_decode(*args: object, **kwargs: object) -> None:
        raise AssertionError("the image was decoded")

    monkeypatch.setattr(images.cv2, "imdecode", no_decode)
    png = tmp_path / "bomb.png"
    png.write_bytes(_png_header_only(100_000, 100_000))
    with pytest.raises(InputError, match=r"bomb\.png declares 100000x100000"):
        images.read_image(png)
    # A JPEG whose frame header claims 60000x60000.
    jpeg = bytearray(cv2.imencode(".jpg", _pattern())[1].tobytes())
    for marker, start, _ in md.jpeg_segments(bytes(jpeg)):
        if marker == 0xC0:
            jpeg[start + 1:start + 5] = struct.pack(">HH", 60000, 60000)
    (tmp_path / "bomb.jpg").write_bytes(bytes(jpeg))
    with pytest.raises(InputError, match="megapixels"):
        images.read_image(tmp_path / "bomb.jpg")


def test_declared_size_of_every_format() -> None:
    img = _pattern(30, 50)
    for ext in (".png", ".jpg", ".webp", ".bmp", ".tif"):
        data = cv2.imencode(ext, img)[1].tobytes()
        assert md.declared_size(data) == (50, 30), ext
    rgba = cv2.imencode(".webp", np.dstack([img, img[..., 0]]))[1].tobytes()
    assert md.declared_size(rgba) == (50, 30)
    gif = b"GIF89a" + struct.pack("<HH", 50, 30) + b"\x00" * 10
    assert md.declared_size(gif) == (50, 30)


@pytest.mark.parametrize("content,what", [
    (b"hello, this is text\n", "not an image"),
    (b"", "empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "damaged"),
    # a phone's photo and videos were "not an image livecam can read; check the file"
    (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", "is a HEIC image, which livecam cannot read; convert it"),
    (b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf", "is an AVIF image"),
    (b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41", "is a video, not a photo.*`livecam video`"),
    (b"\x1a\x45\xdf\xa3\x01\x00\x00\x00\x00\x00\x00\x1f\x42\x86\x81\x01", "is a video"),
    # a Windows icon opens with 00 00 01, as an MPEG start code does, but is no video
    (b"\x00\x00\x01\x00\x01\x00\x10\x10\x00\x00\x01\x00\x20\x00", "not an image livecam can read"),
])
def test_unreadable_files_give_one_line_input_errors(tmp_path: Path, content: bytes, what: str) -> None:
    path = tmp_path / "photo.jpg"
    path.write_bytes(content)
    with pytest.raises(InputError, match=what) as info:
        images.read_image(path)
    assert str(path) in info.value.message and "\n" not in info.value.message
    assert info.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("content", [b"hello, this is text\n", b"",
                                     b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41"],
                         ids=["text", "empty", "video"])
def test_the_formats_an_error_lists_are_the_formats_read(tmp_path: Path, content: bytes) -> None:
    """GIF was read but no list said so (they said "JPEG, PNG, WebP, BMP, TIFF")."""
    gif = tmp_path / "photo.gif"
    Image = pytest.importorskip("PIL.Image", reason="Pillow (the GIF writer here) is not installed")
    Image.fromarray(_pattern()[..., ::-1]).convert("P").save(gif)
    assert images.read_image(gif).shape == (48, 64, 3)
    path = tmp_path / "photo.jpg"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        images.read_image(path)
    assert "JPEG, PNG, WebP, TIFF, BMP, GIF" in info.value.message, info.value.message


def test_missing_folder_and_truncated_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        images.read_image(tmp_path / "nope.png")
    with pytest.raises(InputError, match="is a folder"):
        images.read_image(tmp_path)
    data = cv2.imencode(".png", np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8))[1].tobytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="could not be decoded"):
        images.read_image(tmp_path / "cut.png")


def test_a_link_to_nothing_or_a_loop_of_links_is_named_as_such(tmp_path: Path) -> None:
    # both were "X does not exist; check the path" while `ls` listed X
    (tmp_path / "face.jpg").symlink_to(tmp_path / "moved.jpg")
    with pytest.raises(InputError) as info:
        images.read_image(tmp_path / "face.jpg")
    assert info.value.message == (f"{tmp_path / 'face.jpg'} is a link to {tmp_path / 'moved.jpg'}, which does not "
                                  f"exist; fix or remove the link")
    (tmp_path / "a.jpg").symlink_to("b.jpg")
    (tmp_path / "b.jpg").symlink_to("a.jpg")
    with pytest.raises(InputError, match=r"a\.jpg is a link in a loop of links .*; fix or remove the link$"):
        images.read_image(tmp_path / "a.jpg")


def test_an_output_folder_that_is_a_link_to_nothing_says_so(tmp_path: Path) -> None:
    # "the output folder X does not exist; create it first": creating it fails, X being a link
    (tmp_path / "out").symlink_to(tmp_path / "gone")
    with pytest.raises(InputError, match=r"the output folder .*out is a link to .*gone, which does not exist; fix or "
                                         r"remove the link$"):
        images.check_output_path(tmp_path / "out" / "o.png", force=False)


def test_existing_output_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "o.png"
    out.write_bytes(b"keep me")
    with pytest.raises(OutputExistsError, match="--force") as info:
        images.write_image_atomic(out, _pattern(), force=False, label=False)
    assert info.value.exit_code == EXIT_USAGE
    assert out.read_bytes() == b"keep me"
    with pytest.raises(OutputExistsError):
        images.check_output_path(out, force=False)
    images.write_image_atomic(out, _pattern(), force=True, label=False)
    assert images.read_image(out).shape == (48, 64, 3)


def test_output_path_checks(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"\.png"):
        images.check_output_path(tmp_path / "o.gifx", force=False)
    with pytest.raises(InputError, match="does not exist"):
        images.check_output_path(tmp_path / "missing" / "o.png", force=False)
    with pytest.raises(InputError, match="is a folder"):
        images.check_output_path(tmp_path, force=True)
    images.check_output_path(tmp_path / "fine.webp", force=False)
    with pytest.raises(InputError, match="missing .*exist"):
        images.write_image_atomic(tmp_path / "missing" / "o.png", _pattern(), force=False, label=False)


@pytest.mark.skipif(os.name != "posix", reason="POSIX folder permissions")
def test_unwritable_folder(tmp_path: Path) -> None:
    folder = unwritable_folder(tmp_path)  # as root (permissions do not apply): /sys
    with pytest.raises(InputError, match="not writable"):
        images.check_output_path(folder / "o.png", force=False)
    with pytest.raises(OutputError, match="permission denied"):
        images.write_image_atomic(folder / "o.png", _pattern(), force=False, label=False)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux's /proc")
def test_an_output_in_proc_names_the_problem_not_a_missing_file() -> None:
    # it was "the output folder /proc is not writable (No such file or directory)", to root
    with pytest.raises(InputError) as info:
        images.check_output_path(Path("/proc/o.png"), force=False)
    message = info.value.message
    assert message.startswith("the output folder /proc is not writable (") and "No such file" not in message
    assert message.endswith("); choose another output path"), message


def test_a_folder_that_answers_enoent_is_called_a_kernel_file_system(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def no_new_name(**kw: object) -> None:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(images.tempfile, "TemporaryFile", no_new_name)
    with pytest.raises(InputError) as info:
        images.check_output_path(tmp_path / "o.png", force=False)
    assert info.value.message == (f"the output folder {tmp_path} is not writable (a kernel file system, which "
                                  "takes no new files); choose another output path")


def test_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    monkeypatch.setattr(os, "link", broken_replace)  # AtomicOutput's no-clobber rename
    out = tmp_path / "o.jpg"
    with pytest.raises(OutputError, match=r"o\.jpg failed: the disk is full"):
        images.write_image_atomic(out, _pattern(), force=False, label=True)
    assert list(tmp_path.iterdir()) == []


def test_written_files_are_tagged_and_labelled(tmp_path: Path) -> None:
    img = np.full((300, 400, 3), 90, np.uint8)
    for ext in (".png", ".jpg", ".webp"):
        out = tmp_path / f"t{ext}"
        images.write_image_atomic(out, img, force=False, label=True)
        assert provenance.is_marked_synthetic(out), ext
        back = images.read_image(out)
        x1, y1, x2, y2 = provenance.label_box(img.shape)
        assert np.abs(back[y1:y2, x1:x2].astype(int) - 90).max() > 60  # label drawn
        assert np.abs(back[: y1 - 4].astype(int) - 90).max() <= 3  # nothing else
    out = tmp_path / "plain.png"
    images.write_image_atomic(out, img, force=False, label=False)
    assert np.array_equal(images.read_image(out), img)


# --- orientation in every format, whatever the decoder does with it (issue 16) -------------------

def _oriented_file(tmp_path: Path, fmt: str, orientation: int) -> Path:
    """A file of the pattern in `fmt` tagged with EXIF `orientation`, written by Pillow."""
    pil = pytest.importorskip("PIL.Image")
    image = pil.fromarray(_pattern()[..., ::-1].copy())
    exif = pil.Exif()
    exif[md.TAG_ORIENTATION] = orientation
    options = {"JPEG": {"quality": 100}, "WEBP": {"lossless": True}}.get(fmt, {})
    path = tmp_path / f"o{orientation}.{fmt.lower()}"
    image.save(path, fmt, exif=exif, **options)
    return path


def _pillow_upright(path: Path) -> np.ndarray:
    pil = pytest.importorskip("PIL.Image")
    ops = pytest.importorskip("PIL.ImageOps")
    return np.asarray(ops.exif_transpose(pil.open(path)).convert("RGB"))[..., ::-1]


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF"])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_orientation_in_every_format_is_applied_once(tmp_path: Path, fmt: str, orientation: int) -> None:
    # OpenCV 5 turns TIFFs upright itself, so orientations 2-8 were applied twice.
    path = _oriented_file(tmp_path, fmt, orientation)
    back = images.read_image(path)
    ref = _pillow_upright(path)
    assert back.shape == ref.shape
    assert np.abs(back.astype(int) - ref).mean() < 6


@pytest.mark.parametrize("decoder_orients", [False, True])
@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF"])
def test_orientation_does_not_depend_on_the_decoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     fmt: str, decoder_orients: bool) -> None:
    # OpenCV 4.x leaves every format as stored with IMREAD_UNCHANGED; 5.x orients TIFFs: model a
    # decoder that orients everything and one that orients nothing, on the bytes it is given.
    real = cv2.imdecode

    def decode(buf: np.ndarray, flags: int) -> np.ndarray:
        image = real(buf, flags)
        stored_as = md.exif_orientation(buf.tobytes())
        if fmt == "TIFF" and stored_as != 1:  # undo what OpenCV 5 did to a TIFF
            image = _undo(image, stored_as)
        return images.apply_orientation(image, stored_as) if decoder_orients else image

    monkeypatch.setattr(images.cv2, "imdecode", decode)
    for orientation in (2, 5, 6, 7):
        path = _oriented_file(tmp_path, fmt, orientation)
        back = images.read_image(path)
        assert np.abs(back.astype(int) - _pillow_upright(path)).mean() < 6, orientation


def _undo(image: np.ndarray, orientation: int) -> np.ndarray:
    inverse = {6: 8, 8: 6}.get(orientation, orientation)  # the flips and transposes are their own inverse
    return np.ascontiguousarray(images.apply_orientation(image, inverse))


# --- damaged, animated, deep -----------------------------------------------------------------------

def test_a_jpeg_whose_header_size_disagrees_with_its_data_is_refused(tmp_path: Path) -> None:
    # Was a 900x900 grey picture, exit 0 ("Corrupt JPEG data" only with -v).
    jpeg = bytearray(cv2.imencode(".jpg", _pattern())[1].tobytes())
    for marker, start, _ in md.jpeg_segments(bytes(jpeg)):
        if marker == 0xC0:
            jpeg[start + 1:start + 5] = struct.pack(">HH", 900, 900)
    path = tmp_path / "liar.jpg"
    path.write_bytes(bytes(jpeg))
    with pytest.raises(InputError, match=r"liar\.jpg could not be decoded as JPEG \(.*premature end") as info:
        images.read_image(path)
    assert info.value.exit_code == EXIT_USAGE and "\n" not in info.value.message


def test_extraneous_bytes_before_a_marker_are_not_damage(tmp_path: Path) -> None:
    # Many camera files make libjpeg say "N extraneous bytes before marker"; their pixels are fine.
    jpeg = cv2.imencode(".jpg", _pattern())[1].tobytes()
    path = tmp_path / "ok.jpg"
    path.write_bytes(jpeg[:-2] + b"\x00\x00" + jpeg[-2:])
    assert images.read_image(path).shape == (48, 64, 3)


# PNG: an APNG gave its first frame, the animation silently dropped. WebP: it said to use
# `livecam video anim.webp`, which this FFmpeg cannot decode; a GIF always can.
@pytest.mark.parametrize("fmt, what", [("GIF", "animated GIF"), ("WEBP", "animated WebP"), ("TIFF", "several pages"),
                                       ("PNG", "animated PNG")])
def test_animations_and_multi_page_files_are_refused_with_what_to_do(tmp_path: Path, fmt: str, what: str) -> None:
    pil = pytest.importorskip("PIL.Image")
    frames = [pil.fromarray(np.full((32, 32, 3), v, np.uint8)) for v in (0, 120, 240)]
    path = tmp_path / f"anim.{fmt.lower()}"
    frames[0].save(path, fmt, save_all=True, append_images=frames[1:])
    with pytest.raises(InputError, match=what) as info:
        images.read_image(path)
    assert ("livecam video anim" in info.value.message) == (fmt != "TIFF")
    assert ("magick anim.webp anim.gif" in info.value.message) == (fmt == "WEBP")
    still = tmp_path / f"still.{fmt.lower()}"
    frames[1].save(still, fmt)
    assert images.read_image(still).shape == (32, 32, 3)


def test_small_files_that_decode_to_huge_arrays_are_refused_before_decoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A 778 KB 16-bit RGBA PNG of 10000x10000 peaked at 3.9 GB; a float32 TIFF at 4.6 GB.
    monkeypatch.setattr(images.cv2, "imdecode", lambda *a: pytest.fail("the image was decoded"))
    png = bytearray(_png_header_only(10_000, 10_000))
    png[24:26] = bytes([16, 6])  # 16-bit RGBA
    png[29:33] = struct.pack(">I", zlib.crc32(bytes(png[12:29])) & 0xFFFFFFFF)
    (tmp_path / "deep.png").write_bytes(bytes(png))
    with pytest.raises(InputError, match=r"deep\.png is 10000x10000 with 4 channels of 16 bits, 763 MB") as info:
        images.read_image(tmp_path / "deep.png")
    assert "8-bit" in info.value.message
    tiff = md.build_exif(short_tags={256: 10_000, 257: 10_000, 258: 32, 277: 3, 339: 3})
    (tmp_path / "float.tif").write_bytes(tiff)
    with pytest.raises(InputError, match="3 channels of 32 bits"):
        images.read_image(tmp_path / "float.tif")


def test_sixteen_bit_and_float_images_convert_without_wide_copies() -> None:
    deep = np.array([[[0, 257 * 100, 65535]]], np.uint16)
    assert images._to_uint8_bgr(deep).tolist() == [[[0, 100, 255]]]
    flt = np.array([[[-0.5, 0.5, 2.0]]], np.float32)
    assert images._to_uint8_bgr(flt).tolist() == [[[0, 128, 255]]]


def test_check_not_an_input_covers_every_photo_option(tmp_path: Path) -> None:
    from livecam.settings import AnalysisSettings, ProcessingSettings

    photos = {n: tmp_path / f"{n}.png" for n in ("target", "me", "ref", "a", "b", "other")}
    for p in photos.values():
        p.write_bytes(b"x")
    cases = [ProcessingSettings(sources=(photos["me"],)),
             ProcessingSettings(sources=(), analysis=AnalysisSettings(reference=(photos["me"],))),
             ProcessingSettings(sources=(), analysis=AnalysisSettings(face_map=((photos["me"], photos["a"]),))),
             ProcessingSettings(sources=(), analysis=AnalysisSettings(face_map=((photos["a"], photos["me"]),))),
             ProcessingSettings(sources=(tmp_path,))]  # a --source folder: its photos
    for processing in cases:
        with pytest.raises(InputError, match="--force never replaces an input") as info:
            images.check_output_path(photos["me"], force=True, input_path=photos["target"], processing=processing)
        assert info.value.exit_code == EXIT_USAGE
    fine = ProcessingSettings(sources=(photos["a"],), analysis=AnalysisSettings(reference=(photos["b"],)))
    images.check_output_path(photos["other"], force=True, input_path=photos["target"], processing=fine)
    images.check_output_path(tmp_path / "new.png", force=False, processing=ProcessingSettings(sources=(tmp_path,)))


def test_image_writes_go_through_atomic_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # images.py had its own temporary name (".NAME.XXXX.part": too long near the 255-byte limit)
    # and its own exists check; AtomicOutput's short name fits, and a file that appears while
    # the image is encoded is kept, not replaced.
    long_name = tmp_path / ("a" * 240 + ".png")
    images.write_image_atomic(long_name, _pattern(), force=False, label=False)
    assert images.read_image(long_name).shape == (48, 64, 3)
    out = tmp_path / "o.png"
    real = images.encode_image

    def encode_while_someone_writes(*args: object, **kwargs: object) -> bytes:
        out.write_bytes(b"theirs")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(images, "encode_image", encode_while_someone_writes)
    with pytest.raises(OutputConflictError, match="appeared while livecam was writing it"):
        images.write_image_atomic(out, _pattern(), force=False, label=False)
    assert out.read_bytes() == b"theirs"


def _profile(space: bytes = b"RGB ", size: int = 150_000) -> bytes:
    """An ICC profile header (what readers check) padded to `size`: over 64 KB, a JPEG splits it."""
    head = struct.pack(">I", size) + b"lcms" + b"\x04\x30\x00\x00" + b"mntr" + space + b"XYZ " + bytes(12) + b"acsp"
    return (head + bytes(range(256)) * (size // 256 + 1))[:size]


@pytest.mark.parametrize("source", ["JPEG", "PNG", "WEBP", "TIFF"])
def test_the_colour_profile_of_the_input_is_carried_to_every_output_format(tmp_path: Path, source: str) -> None:
    # Outputs had no ICC profile: a Display P3 or Adobe RGB photo came out looking duller.
    Image = pytest.importorskip("PIL.Image")
    profile = _profile()
    path = tmp_path / f"in.{source.lower()}"
    Image.fromarray(_pattern()[..., ::-1]).save(path, format=source, icc_profile=profile)
    assert images.read_image_and_profile(path)[1] == profile
    for ext in images.WRITE_FORMATS:
        out = tmp_path / f"out{ext}"
        pixels, icc, _, _ = images.read_image_and_profile(path)
        images.write_image_atomic(out, pixels, force=True, label=False, icc=icc)
        with Image.open(out) as written:
            assert written.info.get("icc_profile") == profile, ext
        assert provenance.is_marked_synthetic(out)  # the tags are still there beside it


def test_a_cmyk_or_grey_profile_is_not_put_on_rgb_pixels(tmp_path: Path) -> None:
    Image = pytest.importorskip("PIL.Image")
    for mode, space in (("CMYK", b"CMYK"), ("L", b"GRAY")):
        path = tmp_path / f"{mode}.jpg"
        Image.new(mode, (32, 16)).save(path, icc_profile=_profile(space, 600))
        assert md.icc_profile(path.read_bytes()) == _profile(space, 600)
        assert images.read_image_and_profile(path)[1] is None
    damaged = tmp_path / "damaged.jpg"  # a slice of the profile missing: its header says so
    Image.new("RGB", (32, 16)).save(damaged, icc_profile=_profile(size=600)[:-100])
    assert md.icc_profile(damaged.read_bytes()) is None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX pipes")
def test_a_photo_piped_in_is_read_once_with_its_profile(tmp_path: Path) -> None:
    # `cat photo.jpg | livecam image /dev/stdin out.jpg` was "/dev/stdin is empty (0 bytes)".
    Image = pytest.importorskip("PIL.Image")
    import io
    import threading

    buffer = io.BytesIO()
    Image.fromarray(_pattern()[..., ::-1]).save(buffer, format="PNG", icc_profile=_profile(size=600))
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    # daemon: a reader that never opens the pipe must not hang the tests
    writer = threading.Thread(target=pipe.write_bytes, args=(buffer.getvalue(),), daemon=True)
    writer.start()
    pixels, icc, _, _ = images.read_image_and_profile(pipe)
    writer.join(timeout=10)
    assert np.array_equal(pixels, _pattern()) and icc == _profile(size=600)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX pipes")
def test_a_stream_that_starts_as_no_picture_is_refused_without_reading_on(tmp_path: Path) -> None:
    # `livecam image /dev/zero out.png` read 1 GB before saying it was too large for an image.
    import threading

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    done = threading.Event()

    def endless_writer() -> None:  # 8 KB of no picture, then the stream stays open
        with pipe.open("wb") as stream:
            stream.write(bytes(8192))
            stream.flush()
            done.wait(30)

    refused: list[BaseException] = []

    def reader() -> None:
        try:
            images.read_image(pipe)
        except BaseException as exc:  # noqa: BLE001 - checked below
            refused.append(exc)

    threading.Thread(target=endless_writer, daemon=True).start()
    reading = threading.Thread(target=reader, daemon=True)
    reading.start()
    reading.join(timeout=15)
    done.set()
    assert not reading.is_alive(), "the reader waited for the rest of the stream"
    assert isinstance(refused[0], InputError) and "is not an image livecam can read" in refused[0].message


@pytest.mark.parametrize("ext", [".png", ".webp", ".tif"])
def test_a_cmyk_tiff_comes_out_without_alpha_like_any_opaque_input(tmp_path: Path, ext: str) -> None:
    """libtiff's RGBA reader gave a CMYK TIFF an all-opaque alpha, which every output kept."""
    Image = pytest.importorskip("PIL.Image", reason="Pillow (the CMYK TIFF writer here) is not installed")
    rgb = _pattern()[..., ::-1]
    Image.fromarray(rgb).convert("CMYK").save(tmp_path / "cmyk.tif")
    image, _, _, _ = images.read_image_and_profile(tmp_path / "cmyk.tif")
    assert image.shape == (48, 64, 3)
    assert np.abs(image.astype(int) - _pattern()).max() <= 2  # the colours still converted from CMYK
    bgr, alpha = images.split_alpha(image)
    out = tmp_path / f"out{ext}"
    images.write_image_atomic(out, bgr, force=False, label=False, alpha=alpha)
    written = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert written.ndim == 3 and written.shape[2] == 3, written.shape
