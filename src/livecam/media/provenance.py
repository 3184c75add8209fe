"""Marking outputs as synthetic: metadata tags and the visible "AI-generated" label.

Every file livecam writes says that it is AI-generated and made by livecam, in the place each
format's tools look: a `comment` and a `synthetic` tag for video containers (CONTAINER_METADATA,
used by the video writer), PNG tEXt/iTXt chunks, a JPEG EXIF ImageDescription plus XMP, and
WebP EXIF/XMP chunks. The XMP packet uses the IPTC digital source type for media composited
with a trained model. BMP and TIFF outputs carry only the visible label.
"""

from __future__ import annotations

from pathlib import Path

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


def _exif() -> bytes:
    return md.build_exif({md.TAG_IMAGE_DESCRIPTION: DESCRIPTION, md.TAG_SOFTWARE: SOFTWARE})


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
        return md.webp_add_chunks(data, size, has_alpha, exif=_exif(), xmp=XMP_PACKET)
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
    """The XMP packet of a JPEG, PNG or WebP file; None when absent."""
    data = _bytes(source)
    fmt = md.sniff_format(data)
    if fmt == "jpeg":
        return md.jpeg_xmp(data)
    if fmt == "png":
        return md.png_text(data).get("XML:com.adobe.xmp")
    if fmt == "webp":
        raw = md.webp_chunk(data, b"XMP ")
        return raw.decode("utf-8", "replace") if raw is not None else None
    return None


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


def _label_layout(shape: tuple[int, ...]) -> tuple[tuple[int, int, int, int], float, int, tuple[int, int]]:
    """Box (x1, y1, x2, y2), font scale, thickness and text origin for an image shape."""
    h, w = shape[:2]
    # Text about 1.8% of the shorter side tall, never under 8 px: readable, unobtrusive.
    text_h = max(8.0, 0.018 * min(h, w))
    (_, base_h), _ = cv2.getTextSize(LABEL_TEXT, _FONT, 1.0, 1)
    scale = text_h / base_h
    thickness = max(1, int(round(scale * 1.2)))
    (tw, th), baseline = cv2.getTextSize(LABEL_TEXT, _FONT, scale, thickness)
    pad = max(2, int(round(th * 0.35)))
    margin = max(2, int(round(th * 0.5)))
    x2, y2 = w - margin, h - margin
    x1, y1 = x2 - tw - 2 * pad, y2 - th - baseline - 2 * pad
    box = (max(0, x1), max(0, y1), max(0, x2), max(0, y2))
    origin = (x1 + pad - box[0], y2 - pad - baseline - box[1])
    return box, scale, thickness, origin


def label_box(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The (x1, y1, x2, y2) region draw_label changes in an image of this shape."""
    return _label_layout(shape)[0]


def draw_label(image: np.ndarray) -> None:
    """Draw a small "AI-generated" label in the bottom-right corner of a BGR or BGRA image,
    in place (BGRA: the label's box is made opaque).

    Only pixels inside label_box(image.shape) change: the text is drawn on a copy of that
    corner and blended back, so nothing outside it is touched."""
    (x1, y1, x2, y2), scale, thickness, origin = _label_layout(image.shape)
    if x2 <= x1 or y2 <= y1:
        return
    region = image[y1:y2, x1:x2, :3]
    backdrop = region.astype(np.float32) * (1.0 - _BOX_OPACITY)  # darkened for contrast
    canvas = np.ascontiguousarray(np.clip(backdrop + 0.5, 0, 255).astype(np.uint8))
    cv2.putText(canvas, LABEL_TEXT, origin, _FONT, scale, (255, 255, 255), thickness, cv2.LINE_AA)
    region[...] = canvas
    if image.shape[2] == 4:  # a transparent corner would hide the label
        image[y1:y2, x1:x2, 3] = 255
