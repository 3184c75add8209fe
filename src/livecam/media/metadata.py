"""Byte-level helpers for still-image containers: header sizes, EXIF, PNG chunks, JPEG segments,
RIFF (WebP) chunks.

Only what livecam needs: reading the declared size of an image before decoding it (so that a
decompression bomb is refused before anything is allocated), reading the EXIF orientation and
a few text tags, and inserting metadata chunks into bytes that OpenCV encoded. Every reader is
defensive: truncated or malformed input gives None / an empty result, never an exception.
"""

from __future__ import annotations

import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXIF_HEADER = b"Exif\x00\x00"
XMP_JPEG_HEADER = b"http://ns.adobe.com/xap/1.0/\x00"

# EXIF / TIFF tags used by livecam.
TAG_IMAGE_WIDTH = 0x0100
TAG_IMAGE_LENGTH = 0x0101
TAG_IMAGE_DESCRIPTION = 0x010E
TAG_ORIENTATION = 0x0112
TAG_SOFTWARE = 0x0131
TAG_XMP = 0x02BC
TAG_ICC_PROFILE = 0x8773
ICC_JPEG_HEADER = b"ICC_PROFILE\x00"
# A profile larger than this is not read (a PNG's compressed one could expand to anything).
MAX_ICC_BYTES = 16 << 20

_TIFF_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8}


def sniff_format(data: bytes) -> str | None:
    """The container format from the first bytes: png, jpeg, webp, bmp, gif, tiff, or None."""
    if data.startswith(PNG_SIGNATURE):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data.startswith(b"BM"):
        return "bmp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    return None


# ---------------------------------------------------------------------------------------- sizes


def declared_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) as the header declares it, without decoding; None when unreadable."""
    fmt = sniff_format(data)
    try:
        if fmt == "png":
            if data[12:16] != b"IHDR":
                return None
            w, h = struct.unpack(">II", data[16:24])
            return w, h
        if fmt == "jpeg":
            return _jpeg_size(data)
        if fmt == "webp":
            return _webp_size(data)
        if fmt == "bmp":
            (dib,) = struct.unpack("<I", data[14:18])
            if dib == 12:
                w, h = struct.unpack("<HH", data[18:22])
            else:
                w, h = struct.unpack("<ii", data[18:26])
            return abs(w), abs(h)
        if fmt == "gif":
            w, h = struct.unpack("<HH", data[6:10])
            return w, h
        if fmt == "tiff":
            tags = tiff_ifd0(data)
            w, h = tags.get(TAG_IMAGE_WIDTH), tags.get(TAG_IMAGE_LENGTH)
            if isinstance(w, int) and isinstance(h, int):
                return w, h
    except struct.error:
        return None
    return None


_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def jpeg_segments(data: bytes) -> list[tuple[int, int, int]]:
    """(marker, payload start, payload end) of each segment up to the start of scan."""
    out: list[tuple[int, int, int]] = []
    pos = 2
    n = len(data)
    while pos + 4 <= n:
        if data[pos] != 0xFF:
            break
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers carry no length
            pos += 2
            continue
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if length < 2:
            break
        out.append((marker, pos + 4, min(pos + 2 + length, n)))
        if marker == 0xDA:  # start of scan: entropy-coded data follows
            break
        pos += 2 + length
    return out


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    for marker, start, end in jpeg_segments(data):
        if marker in _SOF_MARKERS and end - start >= 5:
            h, w = struct.unpack(">HH", data[start + 1:start + 5])
            return w, h
    return None


def riff_chunks(data: bytes) -> list[tuple[bytes, int, int]]:
    """(fourcc, payload start, payload end) of each chunk of a RIFF/WEBP file."""
    out: list[tuple[bytes, int, int]] = []
    pos = 12
    while pos + 8 <= len(data):
        fourcc = data[pos:pos + 4]
        (size,) = struct.unpack("<I", data[pos + 4:pos + 8])
        out.append((fourcc, pos + 8, min(pos + 8 + size, len(data))))
        pos += 8 + size + (size & 1)
    return out


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunks = riff_chunks(data)
    if not chunks:
        return None
    fourcc, start, end = chunks[0]
    # A file cut short inside the size fields declares nothing (a 20-byte VP8L was an IndexError).
    if fourcc == b"VP8X" and end - start >= 10:
        w = int.from_bytes(data[start + 4:start + 7], "little") + 1
        h = int.from_bytes(data[start + 7:start + 10], "little") + 1
        return w, h
    if fourcc == b"VP8L" and end - start >= 5 and data[start] == 0x2F:
        bits = int.from_bytes(data[start + 1:start + 5], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if fourcc == b"VP8 " and end - start >= 10 and data[start + 3:start + 6] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[start + 6:start + 10])
        return w & 0x3FFF, h & 0x3FFF
    return None


# ----------------------------------------------------------------------------------- EXIF / TIFF


def tiff_ifd0(tiff: bytes) -> dict[int, int | str | bytes]:
    """The first IFD of a TIFF structure (a TIFF file, or EXIF without its 'Exif\\0\\0' header).

    SHORT/LONG values with count 1 become int, ASCII becomes str, anything else raw bytes."""
    if len(tiff) < 8 or tiff[:2] not in (b"II", b"MM"):
        return {}
    end = "<" if tiff[:2] == b"II" else ">"
    try:
        (offset,) = struct.unpack(end + "I", tiff[4:8])
        (count,) = struct.unpack(end + "H", tiff[offset:offset + 2])
    except struct.error:
        return {}
    tags: dict[int, int | str | bytes] = {}
    for i in range(count):
        entry = tiff[offset + 2 + 12 * i:offset + 14 + 12 * i]
        if len(entry) < 12:
            break
        tag, typ, n = struct.unpack(end + "HHI", entry[:8])
        size = _TIFF_TYPE_SIZES.get(typ, 1) * n
        if size <= 4:
            raw = entry[8:8 + size]
        else:
            (ptr,) = struct.unpack(end + "I", entry[8:12])
            raw = tiff[ptr:ptr + size]
            if len(raw) < size:
                continue
        if typ == 3 and n == 1:
            tags[tag] = struct.unpack(end + "H", raw[:2])[0]
        elif typ == 4 and n == 1:
            tags[tag] = struct.unpack(end + "I", raw[:4])[0]
        elif typ == 2:
            tags[tag] = raw.split(b"\x00", 1)[0].decode("utf-8", "replace")
        else:
            tags[tag] = raw
    return tags


def build_exif(ascii_tags: dict[int, str] | None = None, short_tags: dict[int, int] | None = None) -> bytes:
    """A little-endian TIFF structure with one IFD holding the given ASCII and SHORT tags
    (the payload of an EXIF block, without the 'Exif\\0\\0' header)."""
    entries: list[tuple[int, int, int, bytes]] = []
    for tag, text in (ascii_tags or {}).items():
        raw = text.encode("utf-8") + b"\x00"
        entries.append((tag, 2, len(raw), raw))
    for tag, value in (short_tags or {}).items():
        entries.append((tag, 3, 1, struct.pack("<H", value)))
    entries.sort()  # IFD entries must be in ascending tag order
    ifd_size = 2 + 12 * len(entries) + 4
    data_offset = 8 + ifd_size
    ifd = struct.pack("<H", len(entries))
    extra = b""
    for tag, typ, count, raw in entries:
        if len(raw) <= 4:
            ifd += struct.pack("<HHI", tag, typ, count) + raw.ljust(4, b"\x00")
        else:
            ifd += struct.pack("<HHII", tag, typ, count, data_offset + len(extra))
            extra += raw + (b"\x00" if len(raw) & 1 else b"")
    ifd += struct.pack("<I", 0)
    return b"II*\x00" + struct.pack("<I", 8) + ifd + extra


def tiff_add_tags(data: bytes, ascii_tags: dict[int, str], byte_tags: dict[int, bytes] | None = None,
                  undefined_tags: dict[int, bytes] | None = None, short_tags: dict[int, int] | None = None,
                  rational_tags: dict[int, tuple[int, int]] | None = None) -> bytes:
    """A TIFF file with these ASCII, BYTE, UNDEFINED and one-value SHORT and RATIONAL (numerator,
    denominator) tags set in its first IFD (existing ones replaced).

    The image data and every other value stay where they are: a new copy of IFD0 holding the
    old entries plus the new ones goes at the end of the file, with the new values after it,
    and the header points at it. Unreadable input comes back unchanged."""
    if len(data) < 8 or data[:2] not in (b"II", b"MM"):
        return data
    end = "<" if data[:2] == b"II" else ">"
    try:
        (offset,) = struct.unpack(end + "I", data[4:8])
        (count,) = struct.unpack(end + "H", data[offset:offset + 2])
        entries = [data[offset + 2 + 12 * i:offset + 14 + 12 * i] for i in range(count)]
        (next_ifd,) = struct.unpack(end + "I", data[offset + 2 + 12 * count:offset + 6 + 12 * count])
    except struct.error:
        return data
    if any(len(e) < 12 for e in entries):
        return data
    new: dict[int, tuple[int, bytes]] = {tag: (2, text.encode("utf-8") + b"\x00") for tag, text in ascii_tags.items()}
    new.update({tag: (1, raw) for tag, raw in (byte_tags or {}).items()})
    new.update({tag: (7, raw) for tag, raw in (undefined_tags or {}).items()})
    new.update({tag: (3, struct.pack(end + "H", value)) for tag, value in (short_tags or {}).items()})
    new.update({tag: (5, struct.pack(end + "II", *value)) for tag, value in (rational_tags or {}).items()})
    kept = {struct.unpack(end + "H", e[:2])[0]: e for e in entries}
    for tag in new:
        kept.pop(tag, None)
    out = bytearray(data)
    if len(out) & 1:
        out += b"\x00"  # IFDs start on a word boundary
    ifd_at = len(out)
    values_at = ifd_at + 2 + 12 * (len(kept) + len(new)) + 4
    values = bytearray()
    for tag, (typ, raw) in new.items():
        if typ == 3:  # the one SHORT value, in the entry
            kept[tag] = struct.pack(end + "HHI", tag, typ, 1) + raw.ljust(4, b"\x00")
        elif typ == 5:  # the one RATIONAL value, 8 bytes: after the IFD
            kept[tag] = struct.pack(end + "HHII", tag, typ, 1, values_at + len(values))
            values += raw
        elif len(raw) <= 4:
            kept[tag] = struct.pack(end + "HHI", tag, typ, len(raw)) + raw.ljust(4, b"\x00")
        else:
            kept[tag] = struct.pack(end + "HHII", tag, typ, len(raw), values_at + len(values))
            values += raw + (b"\x00" if len(raw) & 1 else b"")
    out += struct.pack(end + "H", len(kept))
    for tag in sorted(kept):  # IFD entries must be in ascending tag order
        out += kept[tag]
    out += struct.pack(end + "I", next_ifd) + values
    out[4:8] = struct.pack(end + "I", ifd_at)
    return bytes(out)


def exif_payload(data: bytes) -> bytes | None:
    """The TIFF structure of the EXIF block of a JPEG, PNG or WebP file (None when absent)."""
    fmt = sniff_format(data)
    if fmt == "jpeg":
        for marker, start, end in jpeg_segments(data):
            if marker == 0xE1 and data[start:start + 6] == EXIF_HEADER:
                return data[start + 6:end]
    elif fmt == "png":
        for ctype, start, end in png_chunks(data):
            if ctype == b"eXIf":
                return data[start:end]
    elif fmt == "webp":
        for fourcc, start, end in riff_chunks(data):
            if fourcc == b"EXIF":
                payload = data[start:end]
                return payload[6:] if payload.startswith(EXIF_HEADER) else payload
    elif fmt == "tiff":
        return data
    return None


def exif_orientation(data: bytes) -> int:
    """EXIF orientation 1..8 (1 when absent or invalid)."""
    payload = exif_payload(data)
    value = tiff_ifd0(payload).get(TAG_ORIENTATION) if payload else None
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


# ------------------------------------------------------------------------------------------ PNG


def png_chunks(data: bytes) -> list[tuple[bytes, int, int]]:
    """(type, payload start, payload end) of each PNG chunk."""
    out: list[tuple[bytes, int, int]] = []
    pos = len(PNG_SIGNATURE)
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        ctype = data[pos + 4:pos + 8]
        out.append((ctype, pos + 8, min(pos + 8 + length, len(data))))
        pos += 12 + length
        if ctype == b"IEND":
            break
    return out


_INCH_M = 0.0254  # PNG's pHYs counts pixels per metre


def density(data: bytes) -> tuple[float, float] | None:
    """A JPEG's (JFIF) or PNG's (pHYs) pixel density as (x, y) dots per inch, else its EXIF's (a
    TIFF's own tags); None where it gives none, or only an aspect ratio."""
    fmt = sniff_format(data)
    if fmt == "jpeg":
        for marker, start, end in jpeg_segments(data):
            if marker == 0xE0 and end - start >= 12 and data[start:start + 5] == b"JFIF\x00":
                units = data[start + 7]
                x, y = struct.unpack(">HH", data[start + 8:start + 12])
                if units in (1, 2) and x and y:  # 1: per inch, 2: per centimetre
                    return (float(x), float(y)) if units == 1 else (x * 2.54, y * 2.54)
    elif fmt == "png":
        for kind, start, end in png_chunks(data):
            if kind == b"pHYs" and end - start == 9:
                x, y, unit = struct.unpack(">IIB", data[start:end])
                if unit == 1 and x and y:
                    return x * _INCH_M, y * _INCH_M
    return _exif_density(exif_payload(data) or b"")


def _exif_density(tiff: bytes) -> tuple[float, float] | None:
    """EXIF's (or a TIFF's) XResolution and YResolution, RATIONALs, per inch or centimetre."""
    tags = tiff_ifd0(tiff)
    x, y, unit = tags.get(0x011A), tags.get(0x011B), tags.get(0x0128, 2)
    if not (isinstance(x, bytes) and isinstance(y, bytes) and len(x) == len(y) == 8) or unit not in (2, 3):
        return None
    end = "<" if tiff[:2] == b"II" else ">"
    (xn, xd), (yn, yd) = struct.unpack(end + "II", x), struct.unpack(end + "II", y)
    if not (xn and xd and yn and yd):
        return None
    scale = 1.0 if unit == 2 else 2.54
    return xn / xd * scale, yn / yd * scale


def with_density(data: bytes, dpi: tuple[float, float], size: tuple[int, int], has_alpha: bool) -> bytes:
    """JPEG, PNG, TIFF or WebP bytes that say `dpi` (x, y dots per inch): the JFIF header's
    density, a pHYs chunk, or XResolution and YResolution per inch (a WebP's in its EXIF chunk, of
    an image `size` with alpha or not); other formats come back as they are."""
    fmt = sniff_format(data)
    if fmt == "jpeg":
        for marker, start, end in jpeg_segments(data):
            if marker == 0xE0 and end - start >= 12 and data[start:start + 5] == b"JFIF\x00":
                x, y = (min(65535, max(1, round(v))) for v in dpi)
                return data[:start + 7] + struct.pack(">BHH", 1, x, y) + data[start + 12:]
    elif fmt == "png" and not any(kind == b"pHYs" for kind, _, _ in png_chunks(data)):
        x, y = (min(2**31 - 1, max(1, round(v / _INCH_M))) for v in dpi)  # PNG: at most 2^31 - 1
        return png_insert_chunks(data, [png_chunk(b"pHYs", struct.pack(">IIB", x, y, 1))])
    elif fmt == "tiff":
        return _with_tiff_density(data, dpi)
    elif fmt == "webp":  # EXIF's tags, as a TIFF's; provenance.tag_encoded adds its own to them
        exif = _with_tiff_density(exif_payload(data) or build_exif(), dpi)
        return webp_add_chunks(data, size, has_alpha, exif=exif)
    return data


def _with_tiff_density(tiff: bytes, dpi: tuple[float, float]) -> bytes:
    """A TIFF structure (a file, or an EXIF block) with XResolution and YResolution per inch, in
    hundredths of a dot: 72.27 dpi stays 72.27."""
    x, y = (min(2**32 - 1, max(1, round(v * 100))) for v in dpi)
    return tiff_add_tags(tiff, {}, short_tags={0x0128: 2}, rational_tags={0x011A: (x, 100), 0x011B: (y, 100)})


def png_chunk(ctype: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(ctype + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + ctype + payload + struct.pack(">I", crc)


def png_insert_chunks(data: bytes, chunks: list[bytes]) -> bytes:
    """Insert ready-made chunks right after IHDR (readers that stop early still see them)."""
    first = png_chunks(data)[0]
    if first[0] != b"IHDR":
        raise ValueError("not a PNG with an IHDR chunk")
    at = first[2] + 4  # past IHDR's CRC
    return data[:at] + b"".join(chunks) + data[at:]


def gif_walk(data: bytes, limit: int) -> tuple[int, bool]:
    """(a GIF's frames, its image descriptors counted up to `limit`; whether the walk reached
    its trailer, i.e. the file is whole)."""
    pos, frames = 13, 0
    if len(data) > 10 and data[10] & 0x80:  # global colour table
        pos += 3 * (2 << (data[10] & 7))
    while pos < len(data) and frames < limit:
        block = data[pos]
        if block == 0x3B:  # trailer
            return frames, True
        if block == 0x21:  # extension: label, then sub-blocks
            pos += 2
        elif block == 0x2C:  # image: descriptor, local colour table, LZW code size, sub-blocks
            frames += 1
            flags = data[pos + 9] if pos + 9 < len(data) else 0
            pos += 10 + (3 * (2 << (flags & 7)) if flags & 0x80 else 0) + 1
        else:
            break
        while pos < len(data) and data[pos] != 0:
            pos += data[pos] + 1
        pos += 1
    return frames, False


def apng_frames(data: bytes) -> int:
    """The frame count an animated PNG's acTL chunk announces (it comes before the first IDAT);
    1 for a still PNG."""
    for ctype, start, end in png_chunks(data):
        if ctype == b"acTL" and end - start >= 4:
            return max(1, struct.unpack(">I", data[start:start + 4])[0])
        if ctype == b"IDAT":
            break
    return 1


def png_text(data: bytes) -> dict[str, str]:
    """tEXt and uncompressed iTXt chunks as {keyword: text}."""
    out: dict[str, str] = {}
    for ctype, start, end in png_chunks(data):
        payload = data[start:end]
        if ctype == b"tEXt" and b"\x00" in payload:
            key, text = payload.split(b"\x00", 1)
            out[key.decode("latin-1")] = text.decode("latin-1")
        elif ctype == b"iTXt" and b"\x00" in payload:
            key, rest = payload.split(b"\x00", 1)
            if len(rest) >= 2 and rest[0] == 0:  # not compressed
                parts = rest[2:].split(b"\x00", 2)
                if len(parts) == 3:
                    out[key.decode("latin-1")] = parts[2].decode("utf-8", "replace")
    return out


# ----------------------------------------------------------------------------------------- JPEG


def jpeg_insert_segments(data: bytes, segments: list[tuple[int, bytes]]) -> bytes:
    """Insert (marker, payload) segments after SOI and a leading JFIF APP0, if any."""
    at = 2
    segs = jpeg_segments(data)
    if segs and segs[0][0] == 0xE0:
        at = segs[0][2]
    blob = b""
    for marker, payload in segments:
        if len(payload) + 2 > 0xFFFF:
            raise ValueError("JPEG segment too large")
        blob += bytes((0xFF, marker)) + struct.pack(">H", len(payload) + 2) + payload
    return data[:at] + blob + data[at:]


def jpeg_xmp(data: bytes) -> str | None:
    for marker, start, end in jpeg_segments(data):
        if marker == 0xE1 and data[start:start + len(XMP_JPEG_HEADER)] == XMP_JPEG_HEADER:
            return data[start + len(XMP_JPEG_HEADER):end].decode("utf-8", "replace")
    return None


# ----------------------------------------------------------------------------------------- WebP


def webp_add_chunks(data: bytes, size: tuple[int, int], has_alpha: bool,
                    exif: bytes | None = None, xmp: bytes | None = None, icc: bytes | None = None) -> bytes:
    """Turn a simple WebP (VP8 or VP8L) into the extended format with EXIF/XMP chunks, and an
    ICC profile (ICCP, which must come first after VP8X) when given; an ICCP, EXIF or XMP chunk
    already there is kept unless the one given replaces it (merging two EXIF blocks is the
    caller's: it reads the old one with exif_payload)."""
    chunks = riff_chunks(data)
    if not chunks or chunks[0][0] not in (b"VP8 ", b"VP8L", b"VP8X"):
        raise ValueError("not a WebP image")
    body = b""
    flags = 0
    if chunks[0][0] == b"VP8X":
        flags = data[chunks[0][1]]
        rest = chunks[1:]
    else:
        rest = chunks
    if icc:
        flags |= 0x20
        body += b"ICCP" + struct.pack("<I", len(icc)) + icc + (b"\x00" if len(icc) & 1 else b"")
    metadata = {b"EXIF": exif, b"XMP ": xmp}
    for fourcc, start, end in rest:
        if fourcc in metadata and not metadata[fourcc]:  # kept, after the image data as the format wants
            metadata[fourcc] = data[start:end]
        if fourcc in metadata or (icc and fourcc == b"ICCP"):
            continue
        payload = data[start:end]
        body += fourcc + struct.pack("<I", len(payload)) + payload + (b"\x00" if len(payload) & 1 else b"")
    if has_alpha:
        flags |= 0x10
    for fourcc, bit in ((b"EXIF", 0x08), (b"XMP ", 0x04)):
        extra = metadata[fourcc]
        if extra:
            flags |= bit
            body += fourcc + struct.pack("<I", len(extra)) + extra + (b"\x00" if len(extra) & 1 else b"")
    w, h = size
    vp8x = bytes((flags, 0, 0, 0)) + (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little")
    body = b"VP8X" + struct.pack("<I", 10) + vp8x + body
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def webp_chunk(data: bytes, fourcc: bytes) -> bytes | None:
    for cc, start, end in riff_chunks(data):
        if cc == fourcc:
            return data[start:end]
    return None


# ------------------------------------------------------------------------------------------ ICC


def icc_profile(data: bytes) -> bytes | None:
    """The embedded ICC colour profile of a JPEG, PNG, WebP or TIFF file (None when absent or not
    a profile)."""
    fmt = sniff_format(data)
    profile: bytes | None = None
    if fmt == "jpeg":  # APP2 segments: header, sequence number from 1, count, then a slice
        slices = sorted((data[start + 12], data[start + 14:end]) for marker, start, end in jpeg_segments(data)
                        if marker == 0xE2 and data[start:start + 12] == ICC_JPEG_HEADER and end - start > 14)
        profile = b"".join(part for _, part in slices) or None
    elif fmt == "png":  # iCCP: name, 0, compression method 0, zlib data
        for ctype, start, end in png_chunks(data):
            if ctype == b"iCCP" and b"\x00" in data[start:start + 80]:
                at = data.index(b"\x00", start) + 2
                inflater = zlib.decompressobj()
                try:
                    profile = inflater.decompress(data[at:end], MAX_ICC_BYTES)
                except zlib.error:
                    return None
                if inflater.unconsumed_tail:  # larger than MAX_ICC_BYTES
                    return None
                break
    elif fmt == "webp":
        profile = webp_chunk(data, b"ICCP")
    elif fmt == "tiff":
        value = tiff_ifd0(data).get(TAG_ICC_PROFILE)
        profile = value if isinstance(value, bytes) else None
    # a profile's header gives its own size: slices missing or doubled are no profile to copy
    if not profile or not 132 <= len(profile) <= MAX_ICC_BYTES or profile[36:40] != b"acsp" \
            or int.from_bytes(profile[:4], "big") != len(profile):
        return None
    return profile


def icc_colour_space(profile: bytes) -> bytes:
    """The profile's data colour space signature: b"RGB ", b"GRAY", b"CMYK", ..."""
    return profile[16:20]


def with_icc_profile(data: bytes, profile: bytes, size: tuple[int, int], has_alpha: bool) -> bytes:
    """Encoded JPEG, PNG, WebP or TIFF bytes with `profile` embedded as each format keeps it."""
    fmt = sniff_format(data)
    if fmt == "jpeg":
        step = 0xFFFF - 2 - 14  # a segment's payload: its header and two numbers, then the slice
        parts = [profile[i:i + step] for i in range(0, len(profile), step)]
        return jpeg_insert_segments(data, [(0xE2, ICC_JPEG_HEADER + bytes((n + 1, len(parts))) + part)
                                           for n, part in enumerate(parts)])
    if fmt == "png":
        return png_insert_chunks(data, [png_chunk(b"iCCP", b"ICC profile\x00\x00" + zlib.compress(profile))])
    if fmt == "webp":
        return webp_add_chunks(data, size, has_alpha, icc=profile)
    if fmt == "tiff":
        return tiff_add_tags(data, {}, undefined_tags={TAG_ICC_PROFILE: profile})
    return data
