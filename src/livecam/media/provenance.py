"""Marking outputs as synthetic: metadata tags and the visible "AI-generated" label.

Every file livecam writes says that it is AI-generated and made by livecam, in the place each
format's tools look: a `comment` and a `synthetic` tag for video containers (CONTAINER_METADATA,
used by the video writer), PNG tEXt/iTXt chunks, a JPEG EXIF ImageDescription plus XMP, and
WebP EXIF/XMP chunks. The XMP packet uses the IPTC digital source type for media composited
with a trained model. BMP and TIFF outputs carry only the visible label.

The visible label goes bottom-right unless a face is near that corner (then the next free
corner of CORNERS); in a video it leaves a corner when a face comes near and goes (back) to one
only once no face has come near it for a second (LabelPlacement), so it does not jump from frame
to frame, nor at the joins of a cluster's segments.
"""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Sequence, Union

import cv2
import numpy as np

from livecam import __version__
from livecam.media import metadata as md

LABEL_TEXT = "AI-generated"
DESCRIPTION = "AI-generated (synthetic) media made with livecam"
SOFTWARE = f"livecam {__version__}"
# IPTC NewsCodes digital source type: media composited with trained algorithmic media.
DIGITAL_SOURCE_TYPE = "http://cv.iptc.org/newscodes/digitalsourcetype/compositeWithTrainedAlgorithmicMedia"

# Tags for video containers (mp4/mov need `movflags=use_metadata_tags` to keep custom keys).
CONTAINER_METADATA: dict[str, str] = {
    "comment": DESCRIPTION,
    "synthetic": "true",
    "ai_generated": "true",
    "software": SOFTWARE,
}

# PNG tEXt keywords.
PNG_TEXT: dict[str, str] = {
    "Software": SOFTWARE,
    "Comment": DESCRIPTION,
    "Description": DESCRIPTION,
    "AI-Generated": "true",
}

XMP_PACKET = f"""<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/">
 <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about=""
    xmlns:dc="http://purl.org/dc/elements/1.1/"
    xmlns:xmp="http://ns.adobe.com/xap/1.0/"
    xmlns:Iptc4xmpExt="http://iptc.org/std/Iptc4xmpExt/2008-02-29/"
    xmp:CreatorTool="{SOFTWARE}"
    Iptc4xmpExt:DigitalSourceType="{DIGITAL_SOURCE_TYPE}">
   <dc:description><rdf:Alt><rdf:li xml:lang="x-default">{DESCRIPTION}</rdf:li></rdf:Alt></dc:description>
  </rdf:Description>
 </rdf:RDF>
</x:xmpmeta>
<?xpacket end="r"?>""".encode("utf-8")

# Formats whose encoded bytes tag_encoded() can mark.
TAGGED_FORMATS: frozenset[str] = frozenset({"png", "jpeg", "webp"})


def _exif(base: bytes | None = None) -> bytes:
    """The provenance tags as an EXIF block, added to `base` (an EXIF block already written, such
    as a WebP's density) when given: replacing it lost the density."""
    tags = {md.TAG_IMAGE_DESCRIPTION: DESCRIPTION, md.TAG_SOFTWARE: SOFTWARE}
    return md.tiff_add_tags(base, tags) if base else md.build_exif(tags)


def tag_encoded(data: bytes, size: tuple[int, int], has_alpha: bool) -> bytes:
    """Add the provenance metadata to encoded PNG, JPEG or WebP bytes; others come back as is."""
    fmt = md.sniff_format(data)
    if fmt == "png":
        chunks = [md.png_chunk(b"tEXt", k.encode("latin-1") + b"\x00" + v.encode("latin-1"))
                  for k, v in PNG_TEXT.items()]
        # iTXt "XML:com.adobe.xmp", uncompressed, no language tag.
        chunks.append(md.png_chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + XMP_PACKET))
        return md.png_insert_chunks(data, chunks)
    if fmt == "jpeg":
        return md.jpeg_insert_segments(data, [(0xE1, md.EXIF_HEADER + _exif()),
                                              (0xE1, md.XMP_JPEG_HEADER + XMP_PACKET)])
    if fmt == "webp":
        return md.webp_add_chunks(data, size, has_alpha, exif=_exif(md.exif_payload(data)), xmp=XMP_PACKET)
    return data


# -------------------------------------------------------------------------------------- readers


def read_png_text(source: Path | bytes) -> dict[str, str]:
    """{keyword: text} of a PNG's tEXt/iTXt chunks."""
    return md.png_text(_bytes(source))


def read_jpeg_description(source: Path | bytes) -> str | None:
    """The EXIF ImageDescription of a JPEG (or WebP/PNG with EXIF); None when absent."""
    payload = md.exif_payload(_bytes(source))
    value = md.tiff_ifd0(payload).get(md.TAG_IMAGE_DESCRIPTION) if payload else None
    return value if isinstance(value, str) else None


def read_xmp(source: Path | bytes) -> str | None:
    """The XMP packet of a JPEG, PNG, WebP or TIFF file; None when absent."""
    data = _bytes(source)
    fmt = md.sniff_format(data)
    if fmt == "jpeg":
        return md.jpeg_xmp(data)
    if fmt == "png":
        return md.png_text(data).get("XML:com.adobe.xmp")
    if fmt == "webp":
        raw = md.webp_chunk(data, b"XMP ")
    elif fmt == "tiff":  # IFD0's XMP tag, written by images.encode_image (`verify` said a TIFF had none)
        packet = md.tiff_ifd0(data).get(md.TAG_XMP)
        raw = packet if isinstance(packet, bytes) else None
    else:
        return None
    return raw.decode("utf-8", "replace") if raw is not None else None


def is_marked_synthetic(source: Path | bytes) -> bool:
    """True when an image file carries livecam's provenance tags."""
    data = _bytes(source)
    xmp = read_xmp(data) or ""
    return DIGITAL_SOURCE_TYPE in xmp or read_jpeg_description(data) == DESCRIPTION


def _bytes(source: Path | bytes) -> bytes:
    return source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()


# ---------------------------------------------------------------------------------- visible label

_FONT = cv2.FONT_HERSHEY_SIMPLEX
_BOX_OPACITY = 0.55
Box = Union[Sequence[float], np.ndarray]  # a face's x1, y1, x2, y2 (Face.bbox)
# Where the label may go, in the order it prefers them: bottom-right, where viewers look for such
# a label, unless a face is there.
CORNERS: tuple[str, ...] = ("bottom-right", "bottom-left", "top-right", "top-left")


def _label_layout(shape: tuple[int, ...], corner: str = CORNERS[0]
                  ) -> tuple[tuple[int, int, int, int], float, int, tuple[int, int]]:
    """Box (x1, y1, x2, y2), font scale, thickness and text origin for an image shape."""
    return _layout(shape[0], shape[1], corner)


@functools.lru_cache(maxsize=64)  # a video asks for the same few on every frame
def _layout(h: int, w: int, corner: str) -> tuple[tuple[int, int, int, int], float, int, tuple[int, int]]:
    # Text about 1.8% of the shorter side tall, never under 8 px: readable, unobtrusive.
    text_h = max(8.0, 0.018 * min(h, w))
    (_, base_h), _ = cv2.getTextSize(LABEL_TEXT, _FONT, 1.0, 1)
    scale = text_h / base_h
    thickness = max(1, int(round(scale * 1.2)))
    (tw, th), baseline = cv2.getTextSize(LABEL_TEXT, _FONT, scale, thickness)
    pad = max(2, int(round(th * 0.35)))
    margin = max(2, int(round(th * 0.5)))
    box_w, box_h = tw + 2 * pad, th + baseline + 2 * pad
    x2 = w - margin if corner.endswith("right") else margin + box_w
    y2 = h - margin if corner.startswith("bottom") else margin + box_h
    x1, y1 = x2 - box_w, y2 - box_h
    box = (max(0, x1), max(0, y1), max(0, min(w, x2)), max(0, min(h, y2)))
    origin = (x1 + pad - box[0], y2 - pad - baseline - box[1])
    return box, scale, thickness, origin


def label_box(shape: tuple[int, ...], corner: str = CORNERS[0]) -> tuple[int, int, int, int]:
    """The (x1, y1, x2, y2) region draw_label changes in an image of this shape at `corner`."""
    return _label_layout(shape, corner)[0]


def _boxes(faces: Sequence[Box]) -> np.ndarray:
    """The faces' x1, y1, x2, y2 as one (n, 4) array (a video's label weighs a second of them)."""
    return np.array([[float(v) for v in face[:4]] for face in faces], dtype=np.float64).reshape(-1, 4)


def _covered(box: tuple[int, int, int, int], faces: np.ndarray) -> float:
    """How much of the label box the face boxes (_boxes) cover, each grown by the label's height
    (so that the label does not touch a face either): the sum of the overlaps, in pixels."""
    x1, y1, x2, y2 = box
    grow = y2 - y1
    ox = np.minimum(x2, faces[:, 2] + grow) - np.maximum(x1, faces[:, 0] - grow)
    oy = np.minimum(y2, faces[:, 3] + grow) - np.maximum(y1, faces[:, 1] - grow)
    return float((np.maximum(ox, 0.0) * np.maximum(oy, 0.0)).sum())


def label_corner(shape: tuple[int, ...], faces: Sequence[Box] = ()) -> str:
    """The corner the label goes in, for an image of this shape whose faces have these boxes
    (x1, y1, x2, y2): the first of CORNERS where no face comes near it, or, when faces are near
    every corner, the one they cover least."""
    boxes = _boxes(faces)
    return min(CORNERS, key=lambda corner: (_covered(label_box(shape, corner), boxes), CORNERS.index(corner)))


def draw_label(image: np.ndarray, faces: Sequence[Box] = (), corner: str | None = None) -> str:
    """Draw a small "AI-generated" label in a corner of a BGR or BGRA image, in place (BGRA: the
    label's box is made opaque), and return that corner: `corner`, or label_corner() for the
    face boxes `faces` (bottom-right when no face is near it).

    Only pixels inside label_box(image.shape, corner) change: the text is drawn on a copy of
    that corner and blended back, so nothing outside it is touched."""
    corner = corner or label_corner(image.shape, faces)
    (x1, y1, x2, y2), scale, thickness, origin = _label_layout(image.shape, corner)
    if x2 <= x1 or y2 <= y1:
        return corner
    region = image[y1:y2, x1:x2, :3]
    backdrop = region.astype(np.float32) * (1.0 - _BOX_OPACITY)  # darkened for contrast
    canvas = np.ascontiguousarray(np.clip(backdrop + 0.5, 0, 255).astype(np.uint8))
    cv2.putText(canvas, LABEL_TEXT, origin, _FONT, scale, (255, 255, 255), thickness, cv2.LINE_AA)
    region[...] = canvas
    if image.shape[2] == 4:  # a transparent corner would hide the label
        image[y1:y2, x1:x2, 3] = 255
    return corner


LABEL_MEMORY_S = 1.0  # a video's label goes (back) to a corner once no face has come near it for this long


class LabelPlacement:
    """The label's corner over the frames of one video: the first of CORNERS that no face came
    near in the last LABEL_MEMORY_S seconds (label_corner of all their faces). The label leaves
    a corner on the frame a face comes near it and goes (back) to one only once it has been
    clear that long, so it does not jump from frame to frame. Only those seconds decide, not the
    whole past: a cluster segment that saw them before its start (observe(), its warm-up frames)
    places the label as a whole-file run does, without a jump at the join (a corner kept since
    the start of the video restarted bottom-right in every segment).

    Frames are placed in frame order, each once its faces are known, so every earlier frame of
    the window is in it and no later one: the file pipeline, whose workers finish frames in any
    order, decides each frame's corner in an in-order step and draws it after processing
    (FilePipeline._place), so the corners do not depend on its worker count or timing. The
    calls may come from several threads (one at a time), hence the lock."""

    def __init__(self, memory_s: float = LABEL_MEMORY_S) -> None:
        self.memory_s = memory_s
        self._seen: dict[float, tuple[tuple[float, ...], ...]] = {}  # the faces of recent frames by time
        self._lock = threading.Lock()

    def observe(self, at: float, faces: Sequence[Box] = ()) -> None:
        """Remember the faces of the frame at time `at` without placing it (a segment's warm-up)."""
        with self._lock:
            self._remember(at, faces)

    def place(self, shape: tuple[int, ...], faces: Sequence[Box] = (), at: float | None = None) -> str:
        """The corner for the next frame (of this image shape; its faces, its time `at`; None:
        now, a live frame): the one the faces of the last memory_s seconds up to it leave free."""
        when = time.perf_counter() if at is None else at
        with self._lock:
            self._remember(when, faces)
            recent = [box for t, boxes in self._seen.items() if when - self.memory_s < t <= when for box in boxes]
        return label_corner(shape, recent)

    def draw(self, image: np.ndarray, faces: Sequence[Box] = (), at: float | None = None) -> str:
        """draw_label() in the corner place() gives this frame; returns that corner."""
        return draw_label(image, corner=self.place(image.shape, faces, at))

    def _remember(self, at: float, faces: Sequence[Box]) -> None:
        self._seen[at] = tuple(tuple(float(v) for v in face[:4]) for face in faces)
        # kept: what frames near this one may still need (a looped source's time goes back: its old
        # frames are forgotten too)
        self._seen = {t: boxes for t, boxes in self._seen.items() if abs(t - at) <= 2 * self.memory_s}
