"""Reading and writing still images safely.

read_image() returns BGR or BGRA uint8 whatever the file holds (grayscale, 16-bit, alpha, EXIF
orientation), and refuses images whose header declares more pixels than MAX_PIXELS before any
decoding. write_image_atomic() encodes to the format of the output's extension, marks the
bytes as synthetic (livecam.provenance) and writes them through a temporary file in the same
folder that is renamed into place, so a failure never leaves a broken or partial output.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator

import cv2
import numpy as np

from livecam import provenance
from livecam.errors import InputError, OutputError, OutputExistsError
from livecam.media import metadata as md

# More than this is refused before decoding (a 100-megapixel photo still loads; a crafted
# 100000x100000 header does not).
MAX_PIXELS = 100_000_000
# Files larger than this are not read into memory at all.
MAX_FILE_BYTES = 1 << 30

READ_FORMATS = ("JPEG", "PNG", "WebP", "BMP", "TIFF")
# Output extension -> (container name, keeps alpha).
WRITE_FORMATS: dict[str, tuple[str, bool]] = {
    ".jpg": ("jpeg", False),
    ".jpeg": ("jpeg", False),
    ".png": ("png", True),
    ".webp": ("webp", True),
    ".tif": ("tiff", True),
    ".tiff": ("tiff", True),
}
# Read, but not written: a BMP cannot carry the synthetic-media tags (provenance.py).
UNMARKABLE_FORMATS = (".bmp", ".dib")
_ENCODE_PARAMS: dict[str, list[int]] = {
    "jpeg": [cv2.IMWRITE_JPEG_QUALITY, 95],
    "png": [cv2.IMWRITE_PNG_COMPRESSION, 3],
    "webp": [cv2.IMWRITE_WEBP_QUALITY, 95],
    "bmp": [],
    "tiff": [],
}


# ------------------------------------------------------------------------------------- reading


def read_image(path: Path | str) -> np.ndarray:
    """The image at `path` as HxWx3 BGR or HxWx4 BGRA uint8, upright per its EXIF orientation.

    Raises InputError (one line naming the file) for a missing, empty, unsupported, corrupt or
    oversized file."""
    path = Path(path)
    data = _read_bytes(path)
    fmt = md.sniff_format(data)
    if fmt is None:
        raise InputError(f"{path} is not an image livecam can read (expected "
                         f"{', '.join(READ_FORMATS)}); check the file or convert it")
    size = md.declared_size(data)
    if size is None or size[0] <= 0 or size[1] <= 0:
        raise InputError(f"{path} looks like a {fmt.upper()} file but its header is damaged; "
                         f"re-export or re-download it")
    if size[0] * size[1] > MAX_PIXELS:
        raise InputError(f"{path} declares {size[0]}x{size[1]} pixels, more than the "
                         f"{MAX_PIXELS // 1_000_000} megapixels livecam accepts; scale it down first")
    with _native_stderr_to_log():
        image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if image is None or image.size == 0:
        raise InputError(f"{path} could not be decoded as {fmt.upper()} (truncated or corrupt?); "
                         f"re-export or re-download it")
    image = _to_uint8_bgr(image)
    # IMREAD_UNCHANGED keeps alpha and depth but ignores EXIF orientation: apply it here.
    return np.ascontiguousarray(apply_orientation(image, md.exif_orientation(data)))


# Serialises the file-descriptor swap below (two overlapping swaps would lose stderr for good).
_STDERR_LOCK = threading.Lock()


@contextlib.contextmanager
def _native_stderr_to_log() -> Iterator[None]:
    """libpng and libjpeg print warnings and errors ("libpng error: ...", "Corrupt JPEG data: ...")
    straight to file descriptor 2, which would add lines to livecam's one-line errors. During a
    decode, fd 2 points at a temporary file whose text is logged at debug level instead."""
    with _STDERR_LOCK:
        try:
            saved = os.dup(2)
            sink = tempfile.TemporaryFile()
        except OSError:  # no fd to spare: let the decoder speak
            yield
            return
        with sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                said = sink.read(4096).decode("utf-8", "replace").strip()
                if said:
                    logging.getLogger("livecam").debug("image decoder: %s", " | ".join(said.splitlines()))


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise InputError(f"{path} does not exist; check the path")
    if path.is_dir():
        raise InputError(f"{path} is a folder, not an image file")
    try:
        size = path.stat().st_size
        if size == 0:
            raise InputError(f"{path} is empty (0 bytes); give a JPEG, PNG, WebP, BMP or TIFF image")
        if size > MAX_FILE_BYTES:
            raise InputError(f"{path} is {size / 2**30:.1f} GB, too large for an image; scale it down first")
        return path.read_bytes()
    except PermissionError:
        raise InputError(f"{path} cannot be read (permission denied); check its permissions") from None
    except OSError as exc:
        raise InputError(f"{path} cannot be read ({exc.strerror or exc}); check the file") from exc


def _to_uint8_bgr(image: np.ndarray) -> np.ndarray:
    """Any decoded array -> uint8 with 3 (BGR) or 4 (BGRA) channels."""
    if image.dtype == np.uint16:
        image = ((image.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    elif image.dtype in (np.float32, np.float64):
        image = np.clip(image * 255.0 + 0.5, 0, 255).astype(np.uint8)
    elif image.dtype != np.uint8:
        image = np.clip(image, 0, 255).astype(np.uint8)
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
    if path.suffix.lower() in UNMARKABLE_FORMATS:
        raise InputError(f"cannot write {path}: {path.suffix} files hold no metadata, and every livecam "
                         f"output says it is synthetic; write .png (lossless) instead")
    if fmt is None:
        raise InputError(f"cannot tell which format to write for {path} (extension "
                         f"{path.suffix or 'missing'}); use one of {', '.join(WRITE_FORMATS)}")
    return fmt


def check_output_path(path: Path, *, force: bool, input_path: Path | None = None) -> None:
    """Everything about an output path that can be checked before any work is done."""
    if path.is_dir():
        raise InputError(f"{path} is a folder; give an output file name such as {path / 'out.png'}")
    output_format(path)
    if input_path is not None and same_file(path, input_path):
        # --force is for an old output; the input photo itself is never replaced.
        raise InputError(f"the output {path} is the input; write to another file")
    if path.exists() and not force:
        raise OutputExistsError(f"{path} exists; pass --force to overwrite it or choose another name")
    check_output_folder(path)


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one existing file (links and different spellings included)."""
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output_folder(path: Path) -> None:
    """The folder that will hold `path` exists and takes a new file. A real (anonymous) file is
    created and dropped: os.access says yes to root on read-only mounts and ignores ACLs."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists():
        raise InputError(f"the output folder {folder} does not exist; create it first")
    if not folder.is_dir():
        raise InputError(f"cannot write {path}: {folder} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"the output folder {folder} is not writable ({exc.strerror or exc}); "
                         "choose another output path") from exc


def encode_image(image: np.ndarray, fmt: str, *, keep_alpha: bool, tag: bool = True) -> bytes:
    """Encoded bytes of a BGR/BGRA image in `fmt` (a WRITE_FORMATS container name)."""
    bgr, alpha = split_alpha(image)
    if keep_alpha and alpha is not None:
        pixels = np.dstack([bgr, alpha])
    else:
        pixels = bgr
    ext = {"jpeg": ".jpg", "tiff": ".tif"}.get(fmt, "." + fmt)
    ok, buf = cv2.imencode(ext, np.ascontiguousarray(pixels), _ENCODE_PARAMS[fmt])
    if not ok:
        raise OutputError(f"OpenCV could not encode a {pixels.shape[1]}x{pixels.shape[0]} image as {fmt}")
    data = buf.tobytes()
    if tag:
        data = provenance.tag_encoded(data, (pixels.shape[1], pixels.shape[0]), pixels.shape[2] == 4)
        if fmt == "tiff":  # TIFF's own IFD tags: ImageDescription, Software and the XMP packet
            data = md.tiff_add_tags(data, {md.TAG_IMAGE_DESCRIPTION: provenance.DESCRIPTION,
                                           md.TAG_SOFTWARE: provenance.SOFTWARE},
                                    {md.TAG_XMP: provenance.XMP_PACKET})
    return data


def write_image_atomic(path: Path | str, image: np.ndarray, *, force: bool, label: bool,
                       alpha: np.ndarray | None = None,
                       watermark: Callable[[np.ndarray], np.ndarray] | None = None,
                       sign: Callable[[bytes], bytes] | None = None) -> None:
    """Write a BGR or BGRA uint8 image to `path` in the format of its extension.

    `alpha` (HxW uint8) is attached when given; alpha is kept for PNG, WebP and TIFF. `label`
    draws the visible "AI-generated" label (on a copy). The file appears complete or not at all."""
    path = Path(path)
    fmt, keeps_alpha = output_format(path)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"expected HxWx3 or HxWx4 uint8, got {image.shape} {image.dtype}")
    if alpha is not None:
        image = np.dstack([split_alpha(image)[0], alpha])
    if label:
        image = image.copy()
        provenance.draw_label(image)
    if watermark is not None:  # last: the mark covers the pixels as written
        image = watermark(image)
    data = encode_image(image, fmt, keep_alpha=keeps_alpha)
    if sign is not None:  # C2PA content credentials, over the final bytes
        data = sign(data)
    write_bytes_atomic(path, data, force=force)


def write_bytes_atomic(path: Path, data: bytes, *, force: bool) -> None:
    """Write `data` through a temporary file beside `path`, renamed into place at the end."""
    if path.exists() and not force:
        raise OutputExistsError(f"{path} exists; pass --force to overwrite it or choose another name")
    folder = path.parent if str(path.parent) else Path(".")
    tmp = folder / f".{path.name}.{secrets.token_hex(4)}.part"
    try:
        # O_EXCL: never clobber anything; mode 0o666 lets the umask decide as for any new file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except FileNotFoundError:
        raise InputError(f"the output folder {folder} does not exist; create it first") from None
    except PermissionError:
        raise OutputError(f"cannot write in {folder} (permission denied); choose another output path") from None
    except OSError as exc:
        raise OutputError(f"cannot write in {folder} ({exc.strerror or exc}); choose another output path") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"writing {path} failed ({exc.strerror or exc}); "
                              f"check free space and permissions") from exc
        raise
