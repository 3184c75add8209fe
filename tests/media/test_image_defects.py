"""Still images in encodings a user brings from other tools (sessions 9 and 10's hostile passes):
each test failed before its fix."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from livecam.errors import InputError
from livecam.media import images


def plain_tiff(samples: np.ndarray, photometric: int, sample_format: int = 1) -> bytes:
    """An uncompressed little-endian one-strip TIFF of HxWxN `samples` as stored (no conversion):
    written by hand, as no tool here writes Lab or float samples as given."""
    height, width, n = samples.shape
    bits = samples.dtype.itemsize * 8
    pixels = np.ascontiguousarray(samples).astype(samples.dtype.newbyteorder("<")).tobytes()
    entries = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, n, [bits] * n), (259, 3, 1, 1),
               (262, 3, 1, photometric), (273, 4, 1, 0), (277, 3, 1, n), (278, 4, 1, height),
               (279, 4, 1, len(pixels)), (284, 3, 1, 1)]
    if n in (2, 4):
        entries.append((338, 3, 1, 2))  # unassociated alpha
    entries.append((339, 3, n, [sample_format] * n))
    ifd_at = 8
    extra_at = ifd_at + 2 + 12 * len(entries) + 4
    extra = b""
    body = struct.pack("<H", len(entries))
    pixels_at = extra_at + 2 * n * 2  # two SHORT arrays of n values
    for tag, typ, count, value in entries:
        if isinstance(value, list):
            if count > 2:
                body += struct.pack("<HHII", tag, typ, count, extra_at + len(extra))
                extra += struct.pack(f"<{count}H", *value)
            else:
                body += struct.pack("<HHI", tag, typ, count) + struct.pack(f"<{count}H", *value).ljust(4, b"\0")
            continue
        if tag == 273:
            value = pixels_at
        body += struct.pack("<HHI", tag, typ, count) + (struct.pack("<I", value) if typ == 4
                                                         else struct.pack("<HH", value, 0))
    body += struct.pack("<I", 0)
    head = b"II*\0" + struct.pack("<I", ifd_at) + body + extra
    return head.ljust(pixels_at, b"\0") + pixels


# sRGB red, green, blue, white, mid grey and black as L*a*b* relative to D50 (Photoshop's values),
# and the sRGB (R, G, B) each shows.
LAB_D50 = [(54.29, 80.81, 69.89), (87.82, -79.29, 80.99), (29.57, 68.30, -112.03), (100.0, 0.0, 0.0),
           (50.0, 0.0, 0.0), (0.0, 0.0, 0.0)]
SRGB = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255), (119, 119, 119), (0, 0, 0)]


def _lab_samples(encoding: str) -> tuple[np.ndarray, int, int]:
    """(samples, photometric, sample format) of LAB_D50 as one row of pixels in `encoding`."""
    lab = np.array([LAB_D50], np.float64)
    lum, ab = lab[..., :1], lab[..., 1:]
    if encoding == "CIELab 8-bit":  # L* 0..255, a*, b* signed bytes
        return np.concatenate([np.round(lum * 2.55), np.round(ab) % 256], -1).astype(np.uint8), 8, 1
    if encoding == "CIELab 16-bit":
        return np.concatenate([np.round(lum * 655.35), np.round(ab * 256) % 65536], -1).astype(np.uint16), 8, 1
    if encoding == "ICCLab 8-bit":  # a*, b* offset by 128
        return np.concatenate([np.round(lum * 2.55), np.round(ab) + 128], -1).astype(np.uint8), 9, 1
    return lab.astype(np.float32), 8, 3  # CIELab float: L* 0..100


@pytest.mark.parametrize("encoding", ["CIELab 8-bit", "CIELab 16-bit", "ICCLab 8-bit", "CIELab float"])
def test_a_lab_tiff_is_converted_to_the_colours_it_shows(tmp_path: Path, encoding: str) -> None:
    # An 8-bit CIELab TIFF (Photoshop's Lab mode) read with white as (255, 252, 222) and greys
    # brown (libtiff's conversion has no D50 -> D65 adaptation); 16-bit and float ones and any
    # ICCLab one were 'could not be decoded ... (truncated or corrupt?)' or Lab read as RGB.
    samples, photometric, sample_format = _lab_samples(encoding)
    path = tmp_path / "lab.tif"
    path.write_bytes(plain_tiff(samples, photometric, sample_format))
    rgb = images.read_image(path)[0, :, ::-1].astype(int)
    assert np.abs(rgb - np.array(SRGB)).max() <= 12, rgb.tolist()
    assert np.abs(rgb[3:] - np.array(SRGB[3:])).max() <= 2  # white, grey and black stay neutral


def test_a_lab_tiff_keeps_its_alpha(tmp_path: Path) -> None:
    samples, _, _ = _lab_samples("CIELab 8-bit")
    alpha = np.array([[[255], [0], [128], [255], [255], [255]]], np.uint8)
    path = tmp_path / "lab_alpha.tif"
    path.write_bytes(plain_tiff(np.concatenate([samples, alpha], -1), 8))
    image = images.read_image(path)
    assert image.shape == (1, 6, 4)
    assert image[0, :, 3].tolist() == alpha[0, :, 0].tolist()
    assert np.abs(image[0, :, 2::-1].astype(int) - np.array(SRGB)).max() <= 12


def test_an_itu_lab_tiff_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "fax.tif"
    path.write_bytes(plain_tiff(np.zeros((2, 2, 3), np.uint8), 10))
    with pytest.raises(InputError, match=r"fax\.tif stores its colours as ITU L\*a\*b\*.*save it as an RGB"):
        images.read_image(path)


@pytest.mark.parametrize("white", [255.0, 65535.0])
def test_a_float_tiff_of_integer_scaled_values_is_read_on_that_scale(tmp_path: Path, white: float) -> None:
    # Float samples from 0 to 255 (numbers saved from uint8 arithmetic) were taken as 0..1: all
    # but the darkest pixels clipped to white.
    ramp = np.linspace(0.0, 1.0, 11, dtype=np.float32)
    samples = np.repeat(ramp[None, :, None], 3, axis=2) * np.float32(white)
    path = tmp_path / "float.tif"
    path.write_bytes(plain_tiff(samples, 2, 3))
    got = images.read_image(path)[0, :, 0].astype(int)
    assert np.abs(got - np.round(ramp * 255)).max() <= 1, got.tolist()


def test_a_float_image_on_the_0_to_1_scale_clips_only_its_highlights() -> None:
    # An HDR photo: most of it within 0..1, a few highlights above (kept as before: clipped).
    hdr = np.full((10, 10, 3), 0.5, np.float32)
    hdr[0, 0] = 40.0
    out = images._to_uint8_bgr(hdr)
    assert out[5, 5].tolist() == [128, 128, 128] and out[0, 0].tolist() == [255, 255, 255]


def test_a_tiff_with_unassociated_alpha_keeps_its_colours(tmp_path: Path) -> None:
    # GIMP, Photoshop and Pillow mark TIFF alpha unassociated; libtiff's RGBA reader multiplied the
    # colours by it: a half-transparent white came out grey, a transparent pixel's colour black.
    rgba = np.array([[[255, 255, 255, 128], [200, 100, 50, 0], [200, 100, 50, 255]]], np.uint8)
    path = tmp_path / "cutout.tif"
    path.write_bytes(plain_tiff(rgba, 2))
    assert images.read_image(path)[0, :, [2, 1, 0, 3]].T.tolist() == rgba[0].tolist()


@pytest.mark.parametrize("dtype", [np.uint32, np.int16, np.int32])
def test_32_bit_and_signed_integer_tiffs_are_scaled_by_their_range(tmp_path: Path, dtype: type) -> None:
    # They were clipped at 255: a 32-bit TIFF read white wherever it was not black.
    ramp = np.linspace(0.0, 1.0, 11)
    top = np.iinfo(dtype).max
    samples = np.repeat(np.round(ramp * top)[None, :, None], 3, axis=2).astype(dtype)
    path = tmp_path / "deep.tif"
    path.write_bytes(plain_tiff(samples, 2, 2 if np.issubdtype(dtype, np.signedinteger) else 1))
    got = images.read_image(path)[0, :, 0].astype(int)
    assert np.abs(got - np.round(ramp * 255)).max() <= 1, got.tolist()


def test_a_half_float_tiff_is_refused_saying_what_to_save_instead(tmp_path: Path) -> None:
    path = tmp_path / "half.tif"
    path.write_bytes(plain_tiff(np.full((2, 2, 3), 0.5, np.float16), 2, 3))
    with pytest.raises(InputError, match=r"half\.tif holds 16-bit floating-point samples.*32-bit float"):
        images.read_image(path)


def test_a_tiff_written_with_alpha_says_the_alpha_is_unassociated(tmp_path: Path) -> None:
    # OpenCV writes no ExtraSamples tag, which libtiff-based readers take for premultiplied alpha
    # (half-transparent colours shown too bright); livecam's pixels are not premultiplied.
    from livecam.media import metadata as md

    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., :3], rgba[..., 3] = (40, 90, 200), 128
    out = tmp_path / "cutout.tif"
    images.write_image_atomic(out, rgba, force=False, label=False)
    assert md.tiff_ifd0(out.read_bytes()).get(338) == 2  # ExtraSamples: unassociated alpha
    assert images.read_image(out)[0, 0].tolist() == [40, 90, 200, 128]
    opaque = tmp_path / "opaque.tif"
    images.write_image_atomic(opaque, rgba[..., :3], force=False, label=False)
    assert 338 not in md.tiff_ifd0(opaque.read_bytes())


def test_a_grey_tiff_whose_transparency_opencv_drops_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # OpenCV reads grey + alpha TIFFs without their alpha: the transparency went silently.
    import logging

    path = tmp_path / "mask.tif"
    path.write_bytes(plain_tiff(np.array([[[200, 128], [100, 0]]], np.uint8), 1))
    with caplog.at_level(logging.WARNING, logger="livecam"):
        image = images.read_image(path)
    assert image[0, :, 0].tolist() == [200, 100]
    assert "mask.tif is a grey TIFF with transparency" in caplog.text


@pytest.fixture
def opencv_without_gif(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenCV before 4.11 (or a build with WITH_IMGCODEC_GIF=OFF): imdecode gives None for a GIF."""
    import cv2

    real = cv2.imdecode

    def imdecode(buf: np.ndarray, flags: int) -> np.ndarray | None:
        return None if bytes(np.asarray(buf)[:3]) == b"GIF" else real(buf, flags)

    monkeypatch.setattr(cv2, "imdecode", imdecode)


def _gifs(tmp_path: Path) -> tuple[Path, Path]:
    """(an opaque GIF, one whose first palette entry is transparent), written by Pillow."""
    Image = pytest.importorskip("PIL.Image", reason="Pillow (the GIF writer here) is not installed")
    rgb = np.zeros((40, 60, 3), np.uint8)
    rgb[:, :30], rgb[10:20, 40:50] = (255, 0, 0), (0, 255, 0)
    opaque, clear = tmp_path / "opaque.gif", tmp_path / "clear.gif"
    Image.fromarray(rgb).save(opaque)
    Image.fromarray(rgb).convert("P").save(clear, transparency=0)
    return opaque, clear


def test_a_gif_is_read_where_opencv_has_no_gif_decoder(tmp_path: Path, opencv_without_gif: None) -> None:
    # pyproject allows OpenCV 4.8; a GIF was 'could not be decoded as GIF (truncated or corrupt?)'
    # before 4.11. FFmpeg (PyAV, always installed) decodes it instead, with its transparency.
    opaque, clear = _gifs(tmp_path)
    image = images.read_image(opaque)
    assert image.shape == (40, 60, 3)
    assert image[0, 0].tolist() == [0, 0, 255] and image[15, 45].tolist() == [0, 255, 0]
    cutout = images.read_image(clear)
    assert cutout.shape == (40, 60, 4)
    assert cutout[15, 45].tolist() == [0, 255, 0, 255] and cutout[0, 40, 3] == 0


def test_a_cut_short_gif_is_refused_where_opencv_has_no_gif_decoder(tmp_path: Path, opencv_without_gif: None) -> None:
    # FFmpeg gives the rows it got from a cut-short GIF without a word; OpenCV refuses the file
    opaque, _ = _gifs(tmp_path)
    cut = tmp_path / "cut.gif"
    cut.write_bytes(opaque.read_bytes()[:-5])
    with pytest.raises(InputError, match=r"cut\.gif could not be decoded as GIF"):
        images.read_image(cut)


def test_a_gif_neither_library_decodes_says_to_convert_it_or_upgrade_opencv(
        tmp_path: Path, opencv_without_gif: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import av

    def no_codec(name: str, mode: str = "r") -> None:
        raise av.codec.codec.UnknownCodecError(name)

    monkeypatch.setattr(av.codec, "Codec", no_codec)
    opaque, _ = _gifs(tmp_path)
    with pytest.raises(InputError) as info:
        images.read_image(opaque)
    message = info.value.message
    assert "opaque.gif is a GIF, which neither this OpenCV" in message and "OpenCV 4.11 or newer" in message
    assert "convert it to PNG" in message and "\n" not in message


def test_an_itunes_audio_file_is_called_audio_not_a_video(tmp_path: Path) -> None:
    song = tmp_path / "song.m4a"
    song.write_bytes(b"\x00\x00\x00\x20ftypM4A \x00\x00\x02\x00M4A isommp42" + b"\x00" * 64)
    with pytest.raises(InputError, match=r"song\.m4a is an audio file, not a photo"):
        images.read_image(song)


def test_a_16_bit_picture_read_for_an_output_says_the_output_has_8_bits(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # a 16-bit PNG or TIFF came out 8-bit without a word; a source photo read for its face says nothing
    import logging

    import cv2

    deep, flat = tmp_path / "deep.png", tmp_path / "flat.png"
    cv2.imwrite(str(deep), np.full((8, 8, 3), 40000, np.uint16))
    cv2.imwrite(str(flat), np.full((8, 8, 3), 156, np.uint8))
    with caplog.at_level(logging.WARNING, logger="livecam"):
        image, _, _, _ = images.read_image_and_profile(deep)
        images.read_image_and_profile(flat)
        images.read_image(deep)
    assert image.dtype == np.uint8 and image[0, 0].tolist() == [156, 156, 156]
    assert [r.getMessage() for r in caplog.records] == [
        "note: deep.png has 16 bits a sample; livecam works in 8, so the output has 8 bits"]


def test_a_32_bit_unsigned_tiff_an_old_opencv_cannot_decode_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenCV 4.x (4.10 checked) returns None for it: the line was "truncated or corrupt?"
    import cv2

    real = cv2.imdecode
    monkeypatch.setattr(cv2, "imdecode", lambda buf, flags: None if bytes(np.asarray(buf)[:2]) == b"II" else real(buf, flags))
    path = tmp_path / "deep.tif"
    path.write_bytes(plain_tiff(np.full((2, 2, 3), 7, np.uint32), 2, 1))
    with pytest.raises(InputError, match=r"deep\.tif holds 32-bit unsigned integer samples, which this OpenCV .* "
                                         r"cannot decode; save it as a 16-bit or float TIFF"):
        images.read_image(path)
    signed = tmp_path / "signed.tif"
    signed.write_bytes(plain_tiff(np.full((2, 2, 3), 7, np.int32), 2, 2))
    with pytest.raises(InputError, match="truncated or corrupt"):
        images.read_image(signed)


@pytest.mark.parametrize("kind", ["lossless", "lossy", "extended"])
def test_a_webp_cut_short_in_its_size_fields_is_called_damaged(tmp_path: Path, kind: str) -> None:
    # A partial download of 20 bytes (RIFF, WEBP and the VP8L chunk's header, nothing after) was
    # "internal error: IndexError: index out of range" in livecam image, its --source and verify.
    import io

    import cv2
    from PIL import Image

    picture = np.random.default_rng(3).integers(0, 255, (24, 32, 3), dtype=np.uint8)
    if kind == "extended":  # VP8X: alpha
        buf = io.BytesIO()
        Image.fromarray(picture).convert("RGBA").save(buf, "WEBP")
        data = buf.getvalue()
    else:
        quality = 101 if kind == "lossless" else 80  # above 100: lossless (VP8L), else lossy (VP8)
        data = cv2.imencode(".webp", picture, [cv2.IMWRITE_WEBP_QUALITY, quality])[1].tobytes()
    path = tmp_path / "cut.webp"
    for length in range(12, 40):  # the chunk header and the size fields after it, byte by byte
        path.write_bytes(data[:length])
        with pytest.raises(InputError):
            images.read_image(path)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_an_rgba_tiff_written_by_opencv_keeps_its_transparency(tmp_path: Path, dtype: type) -> None:
    # OpenCV writes a BGRA picture as a 4-sample RGB TIFF without ExtraSamples (and reads it back
    # with its alpha): livecam took it for a decoder's padding and made it opaque without a word.
    import cv2

    top = np.iinfo(dtype).max
    picture = np.full((8, 6, 4), top // 2, dtype)
    picture[:4, :, 3] = 0  # the top half transparent
    picture[4:, :, 3] = top
    path = tmp_path / "cutout.tif"
    assert cv2.imwrite(str(path), picture)
    image = images.read_image(path)
    assert image.shape == (8, 6, 4)
    assert image[:4, :, 3].max() == 0 and image[4:, :, 3].min() == 255


def grey_png(grey: np.ndarray, depth: int, key: int) -> bytes:
    """A grey PNG (colour type 0) of `depth` bits whose tRNS chunk makes the level `key`
    transparent; written by hand, as Pillow writes no 16-bit one."""
    import zlib

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    height, width = grey.shape
    if depth == 16:
        rows = [grey[y].astype(">u2").tobytes() for y in range(height)]
    else:  # samples packed into bytes, most significant first
        per = 8 // depth
        rows = [bytes(sum(int(v) << (8 - depth * (i + 1)) for i, v in enumerate(grey[y, x:x + per]))
                      for x in range(0, width, per)) for y in range(height)]
    raw = b"".join(b"\0" + row for row in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, 0, 0, 0, 0))
            + chunk(b"tRNS", struct.pack(">H", key)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("depth, levels", [(8, (200, 10)), (16, (51400, 2570)), (1, (0, 1)), (4, (12, 3))])
def test_a_grey_png_keeps_the_transparency_of_its_colour_key(tmp_path: Path, depth: int, levels: tuple[int, int]) -> None:
    # OpenCV reads a grey PNG without its tRNS colour key (an RGB one's it keeps): a logo's or a
    # scanned signature's transparent background came out opaque, in the key's grey.
    grey = np.full((8, 16), levels[0], np.uint16)
    grey[:, 8:] = levels[1]
    path = tmp_path / "key.png"
    path.write_bytes(grey_png(grey, depth, key=levels[1]))
    image = images.read_image(path)
    white = (1 << depth) - 1
    assert image.shape == (8, 16, 4)
    assert (image[:, :8, 3] == 255).all() and (image[:, 8:, 3] == 0).all()
    assert image[0, 0, 0] == round(levels[0] * 255 / white) and (image[0, 0, :3] == image[0, 0, 0]).all()
