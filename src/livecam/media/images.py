"""Reading and writing still images safely.

read_image() returns BGR or BGRA uint8 whatever the file holds (grayscale, 16-bit, float, L*a*b*,
alpha, EXIF orientation), and refuses images whose header declares more pixels than MAX_PIXELS before any
decoding; read_image_and_profile() also gives its RGB colour profile, density and whether it is grey, for the
output. A GIF is
decoded by FFmpeg (PyAV) where OpenCV has no GIF decoder (before 4.11, or built without one).
write_image_atomic() encodes to the format of the output's extension (transparency over white where it has none;
grey where the input was and the format holds grey), marks the bytes as synthetic (livecam.media.provenance) and writes them through
livecam.atomic.AtomicOutput, so a failure never leaves a broken or partial output.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shlex
import struct
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import cv2
import numpy as np

from livecam import native_stderr
from livecam.media import provenance
from livecam.atomic import AtomicOutput, check_new_output, folder_of, refusal, write_target
from livecam.errors import InputError, OutputError
from livecam.media import metadata as md
from livecam.paths import blocked_folder, nearest_existing, why_missing
from livecam.settings import IMAGE_READ_FORMATS, IMAGE_WRITE_FORMATS

if TYPE_CHECKING:
    from livecam.settings import ProcessingSettings

log = logging.getLogger("livecam")

# More than this is refused before decoding (a 100-megapixel photo still loads; a crafted
# 100000x100000 header does not).
MAX_PIXELS = 100_000_000
# What the decoder may allocate, from the header's size, samples and bit depth: a 100-megapixel
# 8-bit RGBA photo fits, a 778 KB 16-bit RGBA PNG of 10000x10000 (800 MB decoded, gigabytes
# while converted) does not.
MAX_DECODED_BYTES = MAX_PIXELS * 4
# libjpeg's warnings that mean pixels are missing or wrong (it fills them with grey and goes on);
# "extraneous bytes before marker" is common in sound camera files and is not one of them.
_JPEG_DAMAGE = ("corrupt jpeg data", "premature end of jpeg file")
_JPEG_HARMLESS = "extraneous bytes before marker"
# Files larger than this are not read into memory at all.
MAX_FILE_BYTES = 1 << 30

# Output extension -> (container name, keeps alpha).
WRITE_FORMATS: dict[str, tuple[str, bool]] = {
    ".jpg": ("jpeg", False),
    ".jpeg": ("jpeg", False),
    ".png": ("png", True),
    ".webp": ("webp", True),
    ".tif": ("tiff", True),
    ".tiff": ("tiff", True),
}
# The longest side each output format can hold (WebP stores 14 bits, JPEG 16): larger failed
# only at the end, after the models ran, as "OpenCV could not encode".
MAX_SIDE = {"webp": 16383, "jpeg": 65535}
# Read, but not written: a BMP cannot carry the synthetic-media tags (media/provenance.py).
UNMARKABLE_FORMATS = (".bmp", ".dib")
# The formats that hold grey pixels (a WebP is always colour); of them, only a PNG holds grey with
# alpha here (OpenCV encodes no two-channel image: livecam writes that PNG itself, _png_grey_alpha).
GREY_FORMATS = ("png", "jpeg", "tiff")
_ENCODE_PARAMS: dict[str, list[int]] = {
    "jpeg": [cv2.IMWRITE_JPEG_QUALITY, 95],
    "png": [cv2.IMWRITE_PNG_COMPRESSION, 3],
    "webp": [cv2.IMWRITE_WEBP_QUALITY, 95],
    "bmp": [],
    "tiff": [],
}


# ------------------------------------------------------------------------------------- reading


def read_image(path: Path | str, *, face_photo: str = "") -> np.ndarray:
    """The image at `path` as HxWx3 BGR or HxWx4 BGRA uint8, upright per its EXIF orientation.

    Raises InputError (one line naming the file) for a missing, empty, unsupported, corrupt or
    oversized file. `face_photo` ("source", "reference"): the file is a photo of the face to use,
    so a video given there is told how to take one of its frames as a photo (not to use
    `livecam video`, which is for a video to swap faces in)."""
    return _read(Path(path), face_photo)[0]


def read_image_and_profile(path: Path | str) -> tuple[np.ndarray, bytes | None, tuple[float, float] | None, bool]:
    """read_image(path) for an output made from it, the ICC profile the pixels are in when it
    describes RGB (a CMYK or grey profile does not fit them), its density in dots per inch
    (metadata.density, upright) and whether the file holds grey pixels (with alpha or not; for a
    grey output: a grey photo came back as RGB), from one read (`path` may be a pipe): an output written with them
    shows the colours the input showed, and prints at its size (a 300 dpi photo became 72); without
    the profile, viewers take a Display P3 or Adobe RGB photo for sRGB, duller. A picture of more
    than 8 bits a sample gets a note that the output has 8 (a 16-bit PNG or TIFF lost its depth
    without a word)."""
    path = Path(path)
    image, profile, bits, dpi, grey = _read(path)
    if bits > 8:
        log.warning("note: %s has %d bits a sample; livecam works in 8, so the output has 8 bits", path.name, bits)
    return image, profile, dpi, grey


def _read(path: Path, face_photo: str = "") -> tuple[np.ndarray, bytes | None, int, tuple[float, float] | None, bool]:
    """(BGR or BGRA uint8 pixels, RGB ICC profile or None, the decoded bits a sample, the upright
    density in dots per inch or None, whether the decoded samples were grey)."""
    data = read_image_bytes(path)
    fmt = md.sniff_format(data)
    if fmt is None:
        raise InputError(unreadable_message(path, data, face_photo))
    size = md.declared_size(data)
    if size is None or size[0] <= 0 or size[1] <= 0:
        raise InputError(f"{path} looks like a {fmt.upper()} file but its header is damaged; "
                         f"re-export or re-download it")
    if size[0] * size[1] > MAX_PIXELS:
        raise InputError(f"{path} declares {size[0]}x{size[1]} pixels, more than the "
                         f"{MAX_PIXELS // 1_000_000} megapixels livecam accepts; scale it down first")
    samples, sample_bytes = _decoded_layout(data, fmt)
    decoded = size[0] * size[1] * samples * sample_bytes
    if decoded > MAX_DECODED_BYTES:
        raise InputError(f"{path} is {size[0]}x{size[1]} with {samples} channels of {8 * sample_bytes} bits, "
                         f"{decoded / 2**20:.0f} MB once decoded, more than the {MAX_DECODED_BYTES // 2**20} MB "
                         f"livecam accepts; save it as an 8-bit image or scale it down first")
    frames = _frame_count(data, fmt)
    if frames > 1:
        raise InputError(_many_frames_message(path, fmt, frames, face_photo))
    # Decoders disagree on EXIF orientation (OpenCV 5 turns TIFFs upright even with
    # IMREAD_UNCHANGED, 4.x does not): they are given bytes that say "as stored", and the
    # orientation is applied here, once, whatever the OpenCV version.
    orientation = md.exif_orientation(data)
    lab = _tiff_lab_encoding(path, data) if fmt == "tiff" else None
    stored = _as_stored(data, fmt)
    if fmt == "tiff":
        stored = _tiff_samples_as_stored(stored, lab is not None)
    with _native_stderr_to_log() as said:
        image = cv2.imdecode(np.frombuffer(stored, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    damaged = [line for line in said if fmt == "jpeg" and any(w in line.lower() for w in _JPEG_DAMAGE)
               and _JPEG_HARMLESS not in line.lower()]
    if image is None and fmt == "gif" and not _opencv_reads_gif():
        image = _gif_by_ffmpeg(path, data)
    if image is None and fmt == "tiff" and _decoded_layout(data, fmt)[1] == 4 and _tiff_sample_format(data) == 1:
        # OpenCV before 5 refuses 32-bit unsigned samples (libtiff's reader asserts on them)
        raise InputError(f"{path} holds 32-bit unsigned integer samples, which this OpenCV ({cv2.__version__}) "
                         f"cannot decode; save it as a 16-bit or float TIFF, or install a newer OpenCV "
                         f"(pip install -U opencv-python)")
    if image is None or image.size == 0 or damaged:
        detail = f" ({damaged[0].strip()})" if damaged else " (truncated or corrupt?)"
        raise InputError(f"{path} could not be decoded as {fmt.upper()}{detail}; re-export or re-download it")
    if fmt == "tiff" and (image.ndim == 2 or image.shape[2] in (1, 3)) and _tiff_declares_alpha(data):
        log.warning("note: %s is a grey TIFF with transparency, which livecam reads without it (as opaque); "
                    "save it as a PNG to keep the transparency", path.name)
    if fmt == "tiff" and image.ndim == 3 and image.shape[2] == 4 and not _tiff_declares_alpha(data) \
            and not _tiff_stores_rgba(data):
        # libtiff's RGBA reader (a CMYK TIFF's) adds an opaque alpha the file does not hold: the
        # outputs then had an alpha channel no opaque input gives them
        image = image[..., :3]
    if fmt == "png":
        image = _grey_key_alpha(data, image)
    bits = 8 * image.dtype.itemsize
    grey = lab is None and _holds_grey(data, fmt, image)
    image = _to_uint8_bgr(image if lab is None else _lab_to_bgr(image, lab))
    profile = md.icc_profile(data)
    rgb_profile = profile if profile is not None and md.icc_colour_space(profile) == b"RGB " else None
    dpi = md.density(data)
    if dpi is not None and orientation >= 5:  # turned a quarter: the density's axes swap with the pixels'
        dpi = (dpi[1], dpi[0])
    return np.ascontiguousarray(apply_orientation(image, orientation)), rgb_profile, bits, dpi, grey


def _holds_grey(data: bytes, fmt: str, image: np.ndarray) -> bool:
    """Whether a file's decoded pixels are grey (with alpha or not): one or two samples, or a
    grey-and-alpha PNG (colour type 4), which OpenCV decodes as BGRA."""
    return image.ndim == 2 or image.shape[2] in (1, 2) or (fmt == "png" and data[25:26] == b"\x04")


def _grey_key_alpha(data: bytes, image: np.ndarray) -> np.ndarray:
    """A grey PNG whose tRNS chunk makes one grey level transparent (a colour key: logos, scanned
    signatures) as grey + alpha: OpenCV reads grey PNGs without that transparency (an RGB one's
    it keeps), so its transparent parts came out opaque, in the key's grey."""
    if image.ndim != 2 or len(data) < 26 or data[25] != 0:  # colour type 0: grey without alpha
        return image
    key = next((data[start:end] for kind, start, end in md.png_chunks(data) if kind == b"tRNS"), b"")
    if len(key) < 2:
        return image
    value, depth = int.from_bytes(key[:2], "big"), data[24]
    if depth < 8:  # 1, 2 and 4-bit grey is decoded scaled to 8 bits (1-bit 1 is 255)
        value = value * 255 // ((1 << depth) - 1)
    opaque = np.iinfo(image.dtype).max
    alpha = np.where(image == value, 0, opaque).astype(image.dtype)
    return np.dstack([image, alpha])


# ISO base media brands of still images (HEIF/HEIC from phones, AVIF); any other brand is a video.
_HEIF_BRANDS = {b"heic": "HEIC", b"heix": "HEIC", b"heim": "HEIC", b"heis": "HEIC", b"mif1": "HEIF",
                b"msf1": "HEIF", b"avif": "AVIF", b"avis": "AVIF"}


def heif_kind(data: bytes) -> str | None:
    """"HEIC", "HEIF" or "AVIF" for a file whose first bytes are a still image's ISO box; else None."""
    return _HEIF_BRANDS.get(data[8:12]) if data[4:8] == b"ftyp" else None


def is_video(data: bytes) -> bool:
    """Whether a file's first bytes are those of a video container or stream `livecam video`
    reads: MP4/MOV (a QuickTime file may open with a wide, free or skip atom), Matroska/WebM, AVI,
    MPEG-TS (.ts; .m2ts/.mts with a 4-byte prefix to each 188-byte packet), MPEG-PS (.mpg, .vob),
    FLV, ASF (.wmv), Y4M, and a raw H.264/HEVC/MPEG stream (a start code; an icon's 00 00 01 00
    is no NAL unit). A .ts, .wmv or dashcam .h264 was "not an image livecam can read"."""
    ts = all(data[i:i + 1] == b"\x47" for i in (0, 188)) or all(data[i:i + 1] == b"\x47" for i in (4, 196))
    start_code = data.startswith(b"\x00\x00\x00\x01") or (data.startswith(b"\x00\x00\x01") and data[3:4] != b"\x00")
    return (data[4:8] in (b"ftyp", b"moov", b"mdat", b"wide", b"free", b"skip") or data[:4] == b"\x1a\x45\xdf\xa3"
            or (data[:4] == b"RIFF" and data[8:12] == b"AVI ") or ts or start_code or data[:3] == b"FLV"
            or data[:8] == b"\x30\x26\xb2\x75\x8e\x66\xcf\x11" or data[:9] == b"YUV4MPEG2")


def unreadable_message(path: Path, data: bytes, face_photo: str = "", *, videos_too: bool = False) -> str:
    """What to do with a file that is no image livecam reads: a phone's HEIC photo, or a video
    given to `livecam image` (both were "not an image livecam can read; check the file") or as
    the photo of a face (read_image's `face_photo`). `videos_too`: where a video would do as well
    (`livecam verify`), for a file that is not one either."""
    if data[4:8] == b"ftyp":
        if data[8:11] in (b"M4A", b"M4B", b"M4P"):  # iTunes audio (a song, an audiobook)
            return f"{path} is an audio file, not a photo; give a {', '.join(IMAGE_READ_FORMATS)} image"
        kind = heif_kind(data)
        if kind is not None:
            return (f"{path} is {'an' if kind == 'AVIF' else 'a'} {kind} image, which livecam cannot read; convert it to JPEG or PNG first "
                    f"(on a phone: share or export it as JPEG)")
    if is_video(data):
        formats = ", ".join(IMAGE_READ_FORMATS)
        instead = (f"a {face_photo} photo must be a still image of the face ({formats}): save one frame of "
                   f"the video as a photo first, e.g. `ffmpeg -ss 5 -i {shlex.quote(str(path))} -frames:v 1 "
                   f"face.jpg` (the frame 5 seconds in), and give face.jpg" if face_photo
                   else f"give a {formats} image (`livecam video` swaps the faces in videos)")
        return f"{path} is a video, not a photo; {instead}"
    if videos_too:
        return (f"{path} is neither an image nor a video livecam can read (expected a {', '.join(IMAGE_READ_FORMATS)} "
                f"image, or a video such as .mp4, .mkv, .mov or .webm); check the file or convert it")
    return f"{path} is not an image livecam can read (expected {', '.join(IMAGE_READ_FORMATS)}); check the file or convert it"


def _decoded_layout(data: bytes, fmt: str) -> tuple[int, int]:
    """(channels, bytes per sample) the decoder will produce, from the header; 4 x 1 byte when
    the format has no other (JPEG, WebP, BMP, GIF)."""
    if fmt == "png" and len(data) >= 26:
        depth, colour = data[24], data[25]
        return {0: 1, 2: 3, 3: 4, 4: 2, 6: 4}.get(colour, 4), 2 if depth == 16 else 1
    if fmt == "tiff":
        tags = md.tiff_ifd0(data)
        end = "<" if data[:2] == b"II" else ">"
        bits = _first_short(tags.get(258, 8), end)
        channels = _first_short(tags.get(277, 1), end)
        return max(1, min(channels, 8)), max(1, (bits + 7) // 8)
    return 4, 1


def _first_short(value: int | str | bytes, end: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, bytes) and len(value) >= 2:
        return int(struct.unpack(end + "H", value[:2])[0])
    return 1


def _frame_count(data: bytes, fmt: str, limit: int = 2) -> int:
    """Frames of an animated GIF or WebP, or pages of a TIFF (counted up to `limit`)."""
    if fmt == "webp":
        return sum(1 for fourcc, _, _ in md.riff_chunks(data) if fourcc == b"ANMF") or 1
    if fmt == "gif":
        return md.gif_walk(data, limit)[0]
    if fmt == "tiff":
        return _tiff_pages(data, limit)
    if fmt == "png":  # APNG: only its first frame was taken, the animation silently dropped
        return md.apng_frames(data)
    return 1


def still_gif(path: Path) -> bool:
    """Whether `path` is a whole GIF of one frame (its first 16 MB walked): a still picture for
    `livecam image`, not a clip for `livecam video`."""
    try:
        if not path.is_file():  # a pipe is not opened here (it would wait for a writer)
            return False
        with open(path, "rb") as f:
            head = f.read(16 << 20)
    except OSError:
        return False  # the reader names the problem
    if md.sniff_format(head) != "gif":
        return False
    frames, whole = md.gif_walk(head, 2)
    return frames == 1 and whole


# The smallest GIF: 1x1, a 2-colour global table, one image (what tells whether OpenCV reads GIF).
_TINY_GIF = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff"
             b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")


def _opencv_reads_gif() -> bool:
    """Whether this OpenCV decodes GIF: 4.11 added it, and builds may leave it out
    (WITH_IMGCODEC_GIF=OFF), so the answer comes from decoding a tiny one, not the version."""
    with _native_stderr_to_log():
        return cv2.imdecode(np.frombuffer(_TINY_GIF, np.uint8), cv2.IMREAD_UNCHANGED) is not None


def _gif_by_ffmpeg(path: Path, data: bytes) -> np.ndarray | None:
    """A still GIF's picture decoded by FFmpeg (PyAV), for an OpenCV without a GIF decoder: BGR,
    or BGRA where it has transparency; None when the file is cut short (FFmpeg gives the rows it
    got without a word, where OpenCV refuses the file) or does not decode. InputError when
    neither library has a GIF decoder."""
    import av  # here only: the OpenCV-first import order of media/__init__ has been kept by then

    from livecam.media.containers import open_container

    try:
        av.codec.Codec("gif", "r")
    except Exception:  # UnknownCodecError: an FFmpeg built without it
        raise InputError(f"{path} is a GIF, which neither this OpenCV ({cv2.__version__}) nor this FFmpeg can decode; "
                         f"convert it to PNG first, or install OpenCV 4.11 or newer "
                         f"(pip install -U opencv-python)") from None
    if not md.gif_walk(data, 2)[1]:
        return None
    try:
        with _native_stderr_to_log(), open_container(io.BytesIO(data), format="gif") as container:
            frame = next(container.decode(video=0), None)
            image = None if frame is None else frame.to_ndarray(format="bgra")
    except (av.FFmpegError, ValueError):
        return None
    if image is None or not (image[..., 3] < 255).any():  # opaque: BGR, as OpenCV gives it
        return None if image is None else np.ascontiguousarray(image[..., :3])
    return image


def _tiff_pages(data: bytes, limit: int) -> int:
    """Full-resolution images in a TIFF's IFD chain (reduced-resolution thumbnails not counted)."""
    end = "<" if data[:2] == b"II" else ">"
    pages, seen = 0, set()
    try:
        (offset,) = struct.unpack(end + "I", data[4:8])
        while offset and offset not in seen and pages < limit:
            seen.add(offset)
            (count,) = struct.unpack(end + "H", data[offset:offset + 2])
            subfile = 0
            for i in range(count):
                entry = data[offset + 2 + 12 * i:offset + 14 + 12 * i]
                tag, typ = struct.unpack(end + "HH", entry[:4])
                if tag == 254:  # NewSubfileType: bit 0 = reduced-resolution version
                    subfile = struct.unpack(end + ("I" if typ == 4 else "H"), entry[8:12 if typ == 4 else 10])[0]
            pages += 0 if subfile & 1 else 1
            (offset,) = struct.unpack(end + "I", data[offset + 2 + 12 * count:offset + 6 + 12 * count])
    except struct.error:
        pass
    return pages


def _many_frames_message(path: Path, fmt: str, frames: int, face_photo: str = "") -> str:
    if fmt == "tiff":
        return f"{path} holds several pages, not one picture; save the page you want as its own image"
    name = {"webp": "WebP"}.get(fmt, fmt.upper())
    if face_photo:  # `livecam video` is for swapping the faces in its frames, not for taking one
        return (f"{path} is an animated {name}, not one picture; a {face_photo} photo must be one still image "
                f"of the face: save the frame you want as its own image (e.g. `ffmpeg -i {shlex.quote(str(path))} "
                f"-frames:v 1 face.png` takes the first) and give that")
    if fmt == "webp":  # the FFmpeg of PyAV 18 and older decodes WebP stills only: a GIF always works
        return (f"{path} is an animated WebP, not one picture; to swap the faces in its frames convert it to "
                f"an animated GIF (e.g. `magick {path.name} {path.stem}.gif`) and use "
                f"`livecam video {path.stem}.gif OUTPUT.mp4`, or save the frame you want as its own image")
    return (f"{path} is an animated {name}, not one picture; to swap the faces in its frames use "
            f"`livecam video {path.name} OUTPUT.mp4`, or save the frame you want as its own image")


def _as_stored(data: bytes, fmt: str) -> bytes:
    """The file's bytes with its EXIF orientation (if any) set to 1, "as stored"."""
    payload = md.exif_payload(data)
    if not payload or md.exif_orientation(data) == 1:
        return data
    at = data.find(payload)
    value_at = _short_value_offset(payload)
    if at < 0 or value_at is None:
        return data
    end = "<" if payload[:2] == b"II" else ">"
    out = bytearray(data)
    out[at + value_at:at + value_at + 2] = struct.pack(end + "H", 1)
    if fmt == "png":  # the eXIf chunk's CRC covers the value
        for ctype, start, stop in md.png_chunks(data):
            if start <= at + value_at < stop:
                out[stop:stop + 4] = struct.pack(">I", zlib.crc32(bytes(out[start - 4:stop])) & 0xFFFFFFFF)
    return bytes(out)


def _short_value_offset(tiff: bytes, tag: int = md.TAG_ORIENTATION) -> int | None:
    """Where IFD0's Orientation (or another `tag`'s first) SHORT value sits in a TIFF structure."""
    end = "<" if tiff[:2] == b"II" else ">"
    try:
        (offset,) = struct.unpack(end + "I", tiff[4:8])
        (count,) = struct.unpack(end + "H", tiff[offset:offset + 2])
        for i in range(count):
            entry_at = offset + 2 + 12 * i
            entry_tag, typ, values = struct.unpack(end + "HHI", tiff[entry_at:entry_at + 8])
            if entry_tag == tag and typ == 3 and values <= 2:  # the first value, in the entry
                return entry_at + 8
    except struct.error:
        return None
    return None


# TIFF PhotometricInterpretation values of L*a*b* pixels: CIELab (a*, b* signed), ICCLab (a*, b*
# offset by half the range), ITULab (fax ranges, not read).
_CIELAB, _ICCLAB, _ITULAB = 8, 9, 10
_RGB = 2  # PhotometricInterpretation of RGB pixels
_TAG_PHOTOMETRIC = 0x0106
_TAG_SAMPLE_FORMAT = 0x0153  # 1 unsigned, 2 signed, 3 floating point
_TAG_EXTRA_SAMPLES, _ASSOCIATED_ALPHA, _UNASSOCIATED_ALPHA = 0x0152, 1, 2
# XYZ relative to D50 (the Lab white TIFF readers assume: Adobe's TIFF note) -> linear sRGB, with
# the Bradford adaptation to sRGB's D65 (published matrix). libtiff's own conversion, which OpenCV
# uses for 8-bit Lab, skips the adaptation: white came out (255, 252, 222), greys brown.
_D50 = np.array([0.9642, 1.0, 0.8249], np.float32)
_XYZ50_TO_SRGB = np.array([[3.1338561, -1.6168667, -0.4906146],
                           [-0.9787684, 1.9161415, 0.0334540],
                           [0.0719453, -0.2289914, 1.4052427]], np.float32)


def _tiff_sample_format(data: bytes) -> int:
    """A TIFF's SampleFormat (1 unsigned integer, the default; 2 signed; 3 floating point)."""
    return _first_short(md.tiff_ifd0(data).get(_TAG_SAMPLE_FORMAT, 1), "<" if data[:2] == b"II" else ">")


def _tiff_lab_encoding(path: Path, data: bytes) -> int | None:
    """CIELAB or ICCLAB for a TIFF whose pixels are L*a*b*, None for any other TIFF; InputError
    for ITULab, which no common tool writes, and for half floats, which OpenCV refuses (it was
    'truncated or corrupt?')."""
    tags = md.tiff_ifd0(data)
    end = "<" if data[:2] == b"II" else ">"
    if _tiff_sample_format(data) == 3 and _first_short(tags.get(258, 8), end) == 16:
        raise InputError(f"{path} holds 16-bit floating-point samples, which livecam cannot decode; save it "
                         f"with 32-bit float or 16-bit integer samples, or as a PNG")
    photometric = tags.get(_TAG_PHOTOMETRIC)
    if photometric == _ITULAB:
        raise InputError(f"{path} stores its colours as ITU L*a*b*, which livecam cannot convert; "
                         f"save it as an RGB TIFF, PNG or JPEG first")
    return photometric if photometric in (_CIELAB, _ICCLAB) else None


def _tiff_declares_alpha(data: bytes) -> bool:
    """Whether a TIFF's ExtraSamples says its extra sample is alpha (OpenCV drops a grey one's)."""
    at = _short_value_offset(data, _TAG_EXTRA_SAMPLES)
    end = "<" if data[:2] == b"II" else ">"
    return at is not None and struct.unpack(end + "H", data[at:at + 2])[0] in (_ASSOCIATED_ALPHA, _UNASSOCIATED_ALPHA)


def _tiff_stores_rgba(data: bytes) -> bool:
    """Whether a TIFF stores four samples a pixel as RGB: the fourth is the file's own, its alpha
    even without ExtraSamples (OpenCV writes its BGRA pictures so, and reads them back with it;
    livecam dropped that transparency without a word)."""
    tags = md.tiff_ifd0(data)
    end = "<" if data[:2] == b"II" else ">"
    return _first_short(tags.get(_TAG_PHOTOMETRIC, 0), end) == _RGB and _first_short(tags.get(277, 1), end) == 4


def _tiff_samples_as_stored(data: bytes, lab: bool) -> bytes:
    """A TIFF's bytes relabelled so that the decoder hands over its samples as stored: a Lab one's
    as RGB (for _lab_to_bgr), and unassociated alpha as associated, since libtiff's RGBA reader
    (OpenCV's for 8-bit TIFFs) multiplies the colours by unassociated alpha: a half-transparent
    white from GIMP or Photoshop came out grey, a transparent pixel's colour black."""
    out = bytearray(data)
    end = "<" if data[:2] == b"II" else ">"
    photometric_at = _short_value_offset(data, _TAG_PHOTOMETRIC)
    if lab and photometric_at is not None:
        out[photometric_at:photometric_at + 2] = struct.pack(end + "H", 2)
    extra_at = _short_value_offset(data, _TAG_EXTRA_SAMPLES)
    if extra_at is not None and struct.unpack(end + "H", data[extra_at:extra_at + 2])[0] == _UNASSOCIATED_ALPHA:
        out[extra_at:extra_at + 2] = struct.pack(end + "H", _ASSOCIATED_ALPHA)
    return bytes(out)


def _lab_to_bgr(image: np.ndarray, encoding: int) -> np.ndarray:
    """L*a*b* samples as decoded (in the decoder's B, G, R order: b*, a*, L*, then any alpha) ->
    uint8 sRGB BGR(A), a band of rows at a time (float copies of a whole 100 MP picture would
    take gigabytes)."""
    if image.ndim != 3 or image.shape[2] < 3:
        raise InputError("a L*a*b* TIFF needs 3 samples a pixel (L*, a*, b*); save it as an RGB image first")
    out = np.empty(image.shape[:2] + (min(image.shape[2], 4),), np.uint8)
    rows = max(1, (1 << 20) // image.shape[1])
    for top in range(0, image.shape[0], rows):
        out[top:top + rows] = _lab_band_to_bgr(image[top:top + rows], encoding)
    return out


def _lab_band_to_bgr(image: np.ndarray, encoding: int) -> np.ndarray:
    kind, bits = image.dtype.kind, image.dtype.itemsize * 8
    top = float(2 ** bits - 1) if kind == "u" else 1.0  # the samples' white (alpha's scale too)
    raw = image.astype(np.float32)
    lum = raw[..., 2] * np.float32(100.0 / top) if kind == "u" else raw[..., 2]
    ab = raw[..., 1::-1]
    if kind == "u":  # a*, b* in 8-bit units, -128..127: signed (CIELab) or offset by half (ICCLab)
        half, scale = 2 ** (bits - 1), 2 ** (bits - 8)
        ab = (ab - half) / scale if encoding == _ICCLAB else np.where(ab >= half, ab - 2 * half, ab) / scale
    fy = (lum + 16.0) / 116.0
    f = np.stack([fy + ab[..., 0] / 500.0, fy, fy - ab[..., 1] / 200.0], axis=-1)
    xyz = np.where(f > 6 / 29, f ** 3, (f - 4 / 29) * (3 * (6 / 29) ** 2)) * _D50
    linear = np.clip(xyz @ _XYZ50_TO_SRGB.T, 0.0, 1.0)
    srgb = np.where(linear <= 0.0031308, linear * 12.92, 1.055 * linear ** (1 / 2.4) - 0.055)
    channels = [srgb[..., ::-1]]
    if image.shape[2] > 3:  # alpha
        channels.append(raw[..., 3:4] / top)
    return np.rint(np.clip(np.concatenate(channels, axis=-1), 0.0, 1.0) * 255.0).astype(np.uint8)


@contextlib.contextmanager
def _native_stderr_to_log() -> Iterator[list[str]]:
    """libpng and libjpeg print warnings and errors ("libpng error: ...", "Corrupt JPEG data: ...")
    straight to file descriptor 2, which would add lines to livecam's one-line errors. During a
    decode that text is captured and logged at debug level instead, and its lines fill the list
    this yields once the block is done."""
    lines: list[str] = []
    out = native_stderr.Captured()
    try:
        with native_stderr.captured() as out:
            yield lines
    finally:  # the decoder's words also when it failed: the caller's message may quote them
        said = out.data[:4096].decode("utf-8", "replace").strip()
        lines.extend(said.splitlines())
        if said:
            log.debug("image decoder: %s", " | ".join(said.splitlines()))


def read_image_bytes(path: Path) -> bytes:
    """The bytes of an image file (or a pipe), refused in one line when the file is missing, a
    folder, empty, unreadable or larger than any image livecam reads (before it is read)."""
    if not path.exists():
        raise InputError(f"{path} {why_missing(path)}")
    if path.is_dir():
        raise InputError(f"{path} is a folder, not an image file")
    try:
        if path.is_file():
            size = path.stat().st_size
            data = path.read_bytes() if 0 < size <= MAX_FILE_BYTES else b""
        else:  # a pipe (/dev/stdin): its size says nothing, so it is read up to the limit
            with path.open("rb") as stream:
                data = stream.read(4096)
                # unless its first bytes are no picture's (/dev/zero, /dev/urandom): said now, not after 1 GB
                if md.sniff_format(data) is not None:
                    data += stream.read(MAX_FILE_BYTES + 1 - len(data))
            size = len(data)
        if size == 0:
            raise InputError(f"{path} is empty (0 bytes); give a {', '.join(IMAGE_READ_FORMATS)} image")
        if size > MAX_FILE_BYTES:
            raise InputError(f"{path} is {size / 2**30:.1f} GB, too large for an image; scale it down first")
        return data
    except PermissionError:
        raise InputError(f"{path} cannot be read (permission denied); check its permissions") from None
    except OSError as exc:
        raise InputError(f"{path} cannot be read ({exc.strerror or exc}); check the file") from exc


def _to_uint8_bgr(image: np.ndarray) -> np.ndarray:
    """Any decoded array -> uint8 with 3 (BGR) or 4 (BGRA) channels, without wider temporaries
    than the decoded array (a uint32 copy of a 16-bit image doubled the peak)."""
    if image.dtype == np.uint16 and image.ndim == 3 and image.shape[2] > 4:
        image = image[..., :4]
    if image.dtype == np.uint16:
        # x * 255 / 65535, rounded and saturated, straight into uint8
        image = cv2.convertScaleAbs(image, alpha=255.0 / 65535.0)
    elif image.dtype in (np.float16, np.float32, np.float64):
        if image.dtype == np.float16:
            image = image.astype(np.float32)
        np.nan_to_num(image, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
        image *= 255.0 / _float_white(image)
        np.clip(image, 0.0, 255.0, out=image)
        image += 0.5
        image = image.astype(np.uint8)
    elif image.dtype != np.uint8:  # 32-bit or signed integers: their positive range is 0..255
        scaled = image.astype(np.float32)
        scaled *= np.float32(255.0 / np.iinfo(image.dtype).max)
        scaled += np.float32(0.5)
        image = np.clip(scaled, 0.0, 255.0, out=scaled).astype(np.uint8)
    if image.ndim == 2:
        return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    channels = image.shape[2]
    if channels == 1:
        return cv2.cvtColor(image[..., 0], cv2.COLOR_GRAY2BGR)
    if channels == 2:  # gray + alpha
        bgr = cv2.cvtColor(np.ascontiguousarray(image[..., 0]), cv2.COLOR_GRAY2BGR)
        return np.dstack([bgr, image[..., 1]])
    if channels > 4:
        return np.ascontiguousarray(image[..., :4])
    return image


def _float_white(image: np.ndarray) -> float:
    """The value that is white in a floating-point image: 1.0, the format's convention, with
    values above it clipped (an HDR photo's highlights); but when most of the picture is above
    1.0 the samples are on an integer scale (a float TIFF saved from 0-255 or 0-65535 numbers,
    which came out all white): 255, 65535, or the largest value beyond that."""
    colour = image[..., :3] if image.ndim == 3 else image
    step = max(1, int((colour.shape[0] * colour.shape[1] / 1e6) ** 0.5))  # a million samples decide
    sample = colour[::step, ::step]
    if sample.size == 0 or float(np.median(sample)) <= 1.0:
        return 1.0
    top = float(sample.max())
    return 255.0 if top <= 255.0 else 65535.0 if top <= 65535.0 else top


def apply_orientation(image: np.ndarray, orientation: int) -> np.ndarray:
    """Turn an image stored with EXIF orientation 1..8 upright."""
    if orientation == 2:
        return image[:, ::-1]
    if orientation == 3:
        return image[::-1, ::-1]
    if orientation == 4:
        return image[::-1]
    if orientation == 5:
        return image.swapaxes(0, 1)
    if orientation == 6:
        return np.rot90(image, -1)
    if orientation == 7:
        return image[::-1, ::-1].swapaxes(0, 1)
    if orientation == 8:
        return np.rot90(image, 1)
    return image


def split_alpha(image: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(contiguous BGR, alpha or None) of a BGR or BGRA image."""
    if image.ndim == 3 and image.shape[2] == 4:
        return np.ascontiguousarray(image[..., :3]), np.ascontiguousarray(image[..., 3])
    return image, None


def flatten(image: np.ndarray, background: int = 128) -> np.ndarray:
    """BGR over a flat grey background (for analysing photos with transparency)."""
    bgr, alpha = split_alpha(image)
    if alpha is None:
        return bgr
    a = alpha.astype(np.float32)[..., None] / 255.0
    out = bgr.astype(np.float32) * a + float(background) * (1.0 - a)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


# ------------------------------------------------------------------------------------- writing


def output_format(path: Path) -> tuple[str, bool]:
    """(container, keeps alpha) for an output path; InputError for an unknown extension."""
    fmt = WRITE_FORMATS.get(path.suffix.lower())
    # the same fix for both formats that cannot say it (BMP's named no file and no other format)
    instead = (f"write {path.stem}.png (lossless) instead, or another of {', '.join(IMAGE_WRITE_FORMATS)} "
               f"({', '.join(WRITE_FORMATS)})")
    if path.suffix.lower() in UNMARKABLE_FORMATS:
        raise InputError(f"cannot write {path}: {path.suffix} files hold no metadata, and every livecam "
                         f"output says it is synthetic; {instead}")
    if fmt is None:
        suffix = path.suffix.lower()
        if suffix == ".gif":
            raise InputError(f"cannot write {path}: a GIF holds 256 colours and no room for the tags that say "
                             f"every livecam output is synthetic; {instead}")
        from livecam.media.video_writer import CONTAINERS  # here: only this message needs PyAV's writer

        if suffix in CONTAINERS:
            raise InputError(f"cannot write a picture to {path}: {path.suffix} is a video's extension; name the "
                             f"output {path.stem}.png (or another of {', '.join(WRITE_FORMATS)}), or use "
                             f"`livecam video` for a video")
        raise InputError(f"cannot tell which format to write for {path} (extension "
                         f"{path.suffix or 'missing'}); use one of {', '.join(WRITE_FORMATS)}")
    return fmt


def check_output_path(path: Path, *, force: bool, input_path: Path | None = None,
                      processing: ProcessingSettings | None = None, size: tuple[int, int] | None = None) -> None:
    """Everything about an output path that can be checked before any work is done; `size`
    (width, height): the image it will hold."""
    if path.is_dir():
        raise InputError(f"{path} is a folder; give an output file name such as {path / 'out.png'}")
    fmt, _ = output_format(path)
    limit = MAX_SIDE.get(fmt)
    if size is not None and limit is not None and max(size) > limit:
        raise InputError(f"{path.name} cannot hold a {size[0]}x{size[1]} image: {path.suffix} files are at most "
                         f"{limit} pixels a side; write .png or .tif instead")
    check_not_an_input(path, input_path, processing)
    check_new_output(path, force=force)
    check_output_folder(path)


def check_not_an_input(output: Path, input_path: Path | None = None,
                       processing: ProcessingSettings | None = None) -> None:
    """InputError when `output` is the input or one of the --source, --reference or --map photos
    (a file of a --source folder included): --force is for an old output, never for an input."""
    if input_path is not None and same_file(output, input_path):
        raise InputError(f"the output {output} is the input; write to another file")
    if processing is None:
        return
    for option, photo in processing.named_photos():
        # an existing file in a --source folder is one of its photos
        inside = photo.is_dir() and output.is_file() and same_file(output.parent, photo)
        if inside or same_file(output, photo):
            raise InputError(f"the output {output} is a {option} photo; --force never replaces an input, "
                             f"so write to another file")


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one existing file (links and different spellings included)."""
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output_folder(path: Path) -> None:
    """The folder that will hold `path` (the linked file's, for a link) exists and takes a new
    file. A real (anonymous) file is created and dropped: os.access says yes to root on
    read-only mounts and ignores ACLs."""
    folder = folder_of(write_target(path))
    blocked = blocked_folder(folder)
    if blocked is not None:  # (was "face.mp4 is not a folder", or a folder under it to "create first")
        where = "" if nearest_existing(folder) == folder else f"{folder} cannot be made: "
        raise InputError(f"cannot write {path}: its folder {where}{blocked}; choose another output path, "
                         "not under a file")
    if not folder.exists():
        raise InputError(f"the output folder {folder} {why_missing(folder, 'create it first')}")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"the output folder {folder} is not writable ({refusal(exc)}); "
                         "choose another output path") from exc


def encode_image(image: np.ndarray, fmt: str, *, keep_alpha: bool, tag: bool = True,
                 icc: bytes | None = None, dpi: tuple[float, float] | None = None, grey: bool = False) -> bytes:
    """Encoded bytes of a BGR/BGRA image in `fmt` (a WRITE_FORMATS container name), with the ICC
    colour profile `icc` embedded when given, and the density `dpi` in a JPEG, PNG, TIFF or WebP.
    `grey`: written as grey (of the BGR pixels) where `fmt` holds it (grey_output)."""
    bgr, alpha = split_alpha(image)
    alpha = alpha if keep_alpha else None
    size, has_alpha = (bgr.shape[1], bgr.shape[0]), alpha is not None
    if grey and grey_output(fmt, has_alpha):
        data = _encode_grey(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), alpha, fmt)
        icc = None  # an RGB profile does not describe grey pixels (a PNG's must be a grey one)
    else:
        data = _encode(bgr if alpha is None else np.dstack([bgr, alpha]), fmt)
    if icc:  # first: tagging a WebP keeps the ICCP chunk where it must be, first
        data = md.with_icc_profile(data, icc, size, has_alpha)
    if dpi:
        data = md.with_density(data, dpi, size, has_alpha)
    if tag:
        data = provenance.tag_encoded(data, size, has_alpha)
        if fmt == "tiff":  # TIFF's own IFD tags: ImageDescription, Software and the XMP packet
            extra = {_TAG_EXTRA_SAMPLES: _UNASSOCIATED_ALPHA} if has_alpha else None
            # with alpha, ExtraSamples says it is unassociated (OpenCV writes no such tag, which
            # libtiff-based readers take for premultiplied: half-transparent colours too bright)
            data = md.tiff_add_tags(data, {md.TAG_IMAGE_DESCRIPTION: provenance.DESCRIPTION,
                                           md.TAG_SOFTWARE: provenance.SOFTWARE},
                                    {md.TAG_XMP: provenance.XMP_PACKET}, short_tags=extra)
    return data


def grey_output(fmt: str, has_alpha: bool) -> bool:
    """Whether a grey picture can be written grey in `fmt` (with its alpha, when it has one)."""
    return fmt in GREY_FORMATS and (not has_alpha or fmt == "png")


def _encode(pixels: np.ndarray, fmt: str) -> bytes:
    """`pixels` (BGR, BGRA or grey) encoded by OpenCV as `fmt`."""
    ext = {"jpeg": ".jpg", "tiff": ".tif"}.get(fmt, "." + fmt)
    ok, buf = cv2.imencode(ext, np.ascontiguousarray(pixels), _ENCODE_PARAMS[fmt])
    if not ok:
        raise OutputError(f"OpenCV could not encode a {pixels.shape[1]}x{pixels.shape[0]} image as {fmt}")
    return bytes(buf.tobytes())


def _encode_grey(grey: np.ndarray, alpha: np.ndarray | None, fmt: str) -> bytes:
    """A grey (HxW) picture, with its alpha only in a PNG (grey_output), as `fmt`."""
    return _encode(grey, fmt) if alpha is None else _png_grey_alpha(grey, alpha)


def _png_grey_alpha(grey: np.ndarray, alpha: np.ndarray) -> bytes:
    """An 8-bit grey-and-alpha PNG (colour type 4), which OpenCV cannot encode; each row filtered
    by "Sub" (the difference to the pixel on its left), which compresses a photo's rows well."""
    height, width = grey.shape
    rows = np.dstack([grey, alpha]).reshape(height, 2 * width)
    sub = rows.copy()
    sub[:, 2:] -= rows[:, :-2]  # uint8: modulo 256, as PNG's filters are
    filtered = np.hstack([np.ones((height, 1), np.uint8), sub])  # each row opens with its filter (1: Sub)
    header = struct.pack(">IIBBBBB", width, height, 8, 4, 0, 0, 0)  # 8 bits, grey + alpha, no interlace
    return (b"\x89PNG\r\n\x1a\n" + md.png_chunk(b"IHDR", header)
            + md.png_chunk(b"IDAT", zlib.compress(filtered.tobytes(), 6)) + md.png_chunk(b"IEND", b""))


def write_image_atomic(path: Path | str, image: np.ndarray, *, force: bool, label: bool,
                       alpha: np.ndarray | None = None,
                       watermark: Callable[[np.ndarray], np.ndarray] | None = None,
                       sign: Callable[[bytes], bytes] | None = None, icc: bytes | None = None,
                       dpi: tuple[float, float] | None = None, faces: Sequence[provenance.Box] = (),
                       grey: bool = False) -> None:
    """Write a BGR or BGRA uint8 image to `path` in the format of its extension; `grey` (the input
    was): as grey where the format holds it (grey_output), converted from the pixels as marked.

    `alpha` (HxW uint8) is attached when given; alpha is kept for PNG, WebP and TIFF. `label`
    draws the visible "AI-generated" label (on a copy), in a corner away from the face boxes `faces`. `icc`: the colour profile the pixels are
    in and `dpi` its density (read_image_and_profile()'s). The file appears complete or not at all."""
    path = Path(path)
    fmt, keeps_alpha = output_format(path)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"expected HxWx3 or HxWx4 uint8, got {image.shape} {image.dtype}")
    if alpha is not None:
        image = np.dstack([split_alpha(image)[0], alpha])
    if image.shape[2] == 4 and not keeps_alpha:
        # Dropping alpha showed whatever colour the transparent pixels hold (often black, or
        # the remains of an edit); over white, the picture looks as it did on a white page.
        if (image[..., 3] < 255).any():
            log.warning("note: %s cannot hold transparency, so the transparent parts are written white; "
                        "write .png, .webp or .tif to keep them", path.name)
        image = flatten(image, background=255)
    if label:
        image = image.copy()
        provenance.draw_label(image, faces)
    with AtomicOutput(path, force=force) as out:
        if watermark is not None:  # last: the mark covers the pixels as written
            image = watermark(image)
        data = encode_image(image, fmt, keep_alpha=keeps_alpha, icc=icc, dpi=dpi, grey=grey)
        if sign is not None:  # C2PA content credentials, over the final bytes
            data = sign(data)
        out.write_bytes(data)
