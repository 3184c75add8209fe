"""A seeded byte mutator for image files, and a checker that runs `livecam image` on each case.

Used by tests/hardening/test_fuzz_images.py (a few hundred cases) and tests/hardening/fuzz_inputs.py
(as many as asked for). Every case is fed to the real command line in-process (click's
CliRunner against livecam.cli.cli), either as the target of `livecam image` or as its --source,
and must either succeed (exit 0, a readable output) or fail with exit 2 and exactly one line on
stderr; never a traceback, never an exception escaping, never a partial or temporary file.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import cv2
import numpy as np

HUGE = 100_000  # declared width and height of the "decompression bomb" headers


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    suffix: str  # the file name's extension (may lie about the content)


# ----------------------------------------------------------------------------- seeds


def encode(image: np.ndarray, ext: str, params: list[int] | None = None) -> bytes:
    ok, buf = cv2.imencode(ext, image, params or [])
    assert ok, ext
    return buf.tobytes()


def small_face(faces_dir: Path, name: str = "obama.jpg", width: int = 240) -> np.ndarray:
    image = cv2.imread(str(faces_dir / name), cv2.IMREAD_COLOR)
    h, w = image.shape[:2]
    return cv2.resize(image, (width, round(h * width / w)), interpolation=cv2.INTER_AREA)


def seed_cases(faces_dir: Path) -> list[Case]:
    """Valid files to mutate: the real photos as they are, and generated PNG/JPEG/WebP."""
    cases = [Case(f"real-{p.stem}", p.read_bytes(), p.suffix) for p in sorted(faces_dir.iterdir())
             if p.suffix.lower() in (".jpg", ".png")]
    face = small_face(faces_dir)
    cases += [
        Case("gen-png", encode(face, ".png"), ".png"),
        Case("gen-jpeg", encode(face, ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90]), ".jpg"),
        Case("gen-jpeg-progressive", encode(face, ".jpg", [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]), ".jpg"),
        Case("gen-webp-lossy", encode(face, ".webp", [cv2.IMWRITE_WEBP_QUALITY, 80]), ".webp"),
        Case("gen-webp-lossless", encode(face, ".webp", [cv2.IMWRITE_WEBP_QUALITY, 101]), ".webp"),
    ]
    return cases


def special_cases(faces_dir: Path) -> list[Case]:
    """Hand-made odd files: empty, tiny, deep, CMYK, animated, lying names, bombs."""
    from PIL import Image

    face = small_face(faces_dir)
    rgb = cv2.cvtColor(face, cv2.COLOR_BGR2RGB)
    one = np.full((1, 1, 3), 128, np.uint8)

    def pil(image: "Image.Image", fmt: str, **kw: object) -> bytes:
        buf = io.BytesIO()
        image.save(buf, format=fmt, **kw)
        return buf.getvalue()

    frames = [Image.fromarray(np.roll(rgb, 20 * i, axis=1)) for i in range(3)]
    deep = (face.astype(np.uint16) * 257)
    cases = [
        Case("zero-size-jpg", b"", ".jpg"),
        Case("zero-size-png", b"", ".png"),
        Case("one-pixel-png", encode(one, ".png"), ".png"),
        Case("one-pixel-jpeg", encode(one, ".jpg"), ".jpg"),
        Case("one-pixel-webp", encode(one, ".webp"), ".webp"),
        Case("sixteen-bit-png", encode(deep, ".png"), ".png"),
        Case("sixteen-bit-tiff", encode(deep, ".tiff"), ".tiff"),
        Case("gray-png", encode(cv2.cvtColor(face, cv2.COLOR_BGR2GRAY), ".png"), ".png"),
        Case("rgba-webp", encode(np.dstack([face, np.full(face.shape[:2], 200, np.uint8)]), ".webp"), ".webp"),
        Case("bmp", encode(face, ".bmp"), ".bmp"),
        Case("cmyk-jpeg", pil(Image.fromarray(rgb).convert("CMYK"), "JPEG", quality=90), ".jpg"),
        Case("animated-gif", pil(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100,
                                 loop=0), ".gif"),
        Case("animated-gif-named-jpg", pil(frames[0], "GIF", save_all=True, append_images=frames[1:]), ".jpg"),
        Case("text-named-jpg", b"this is not a picture, just some text in a file\n" * 4, ".jpg"),
        Case("html-named-png", b"<!doctype html><html><body>404 Not Found</body></html>", ".png"),
        Case("png-named-jpg", encode(face, ".png"), ".jpg"),
        Case("png-signature-only", b"\x89PNG\r\n\x1a\n", ".png"),
        Case("jpeg-soi-only", b"\xff\xd8\xff", ".jpg"),
        Case("riff-webp-header-only", b"RIFF\x10\x00\x00\x00WEBPVP8 ", ".webp"),
    ]
    for name, data, suffix in (("png", encode(face, ".png"), ".png"), ("jpeg", encode(face, ".jpg"), ".jpg"),
                               ("webp", encode(face, ".webp", [cv2.IMWRITE_WEBP_QUALITY, 101]), ".webp"),
                               ("bmp", encode(face, ".bmp"), ".bmp"),
                               ("gif", pil(frames[0], "GIF"), ".gif")):
        cases.append(Case(f"bomb-{name}", huge_dimensions(data), suffix))
    cases.append(Case("bomb-png-real-idat", png_bomb(HUGE, HUGE), ".png"))
    return cases


def png_bomb(width: int, height: int) -> bytes:
    """A well-formed PNG header declaring width x height grey pixels, with a short deflate
    stream (a decoder that trusted the header would allocate width*height bytes first)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 65536, 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


# ----------------------------------------------------------------------------- mutations


def huge_dimensions(data: bytes, size: int = HUGE) -> bytes:
    """The same file with its header declaring size x size pixels (where the format allows)."""
    b = bytearray(data)
    if b.startswith(b"\x89PNG"):
        b[16:24] = struct.pack(">II", size, size)
        b[29:33] = struct.pack(">I", zlib.crc32(bytes(b[12:29])) & 0xFFFFFFFF)  # a valid CRC
    elif b.startswith(b"\xff\xd8"):
        i = 2
        while i + 9 < len(b):
            if b[i] != 0xFF:
                break
            marker = b[i + 1]
            length = struct.unpack(">H", b[i + 2:i + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2):
                small = min(size, 65535)  # JPEG holds 16 bits: 65535 x 65535 is the largest bomb
                b[i + 5:i + 9] = struct.pack(">HH", small, small)
                break
            i += 2 + length
    elif b[:4] == b"RIFF" and b[8:12] == b"WEBP":
        kind = bytes(b[12:16])
        if kind == b"VP8L":  # 14-bit width-1 and height-1 after the 0x2f signature byte
            bits = (min(size, 16384) - 1) | ((min(size, 16384) - 1) << 14)
            old = struct.unpack("<I", b[21:25])[0]
            b[21:25] = struct.pack("<I", (old & 0xF0000000) | bits)
        elif kind == b"VP8 ":
            b[26:30] = struct.pack("<HH", min(size, 16383), min(size, 16383))
        elif kind == b"VP8X":
            b[24:30] = (size - 1).to_bytes(3, "little") + (size - 1).to_bytes(3, "little")
    elif b.startswith(b"BM"):
        b[18:26] = struct.pack("<ii", size, size)
    elif b[:3] == b"GIF":
        b[6:10] = struct.pack("<HH", min(size, 65535), min(size, 65535))
    return bytes(b)


def _truncate(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    cut = rng.choice([rng.randrange(1, 64), rng.randrange(1, max(2, len(data)))]) if data else 0
    return f"truncate@{cut}", data[:cut]


def _flip_body(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    b = bytearray(data)
    n = rng.choice([1, 2, 4, 16, 64])
    for _ in range(n):
        if len(b) > 64:
            b[rng.randrange(64, len(b))] ^= 1 << rng.randrange(8)
    return f"flip{n}", bytes(b)


def _corrupt_header(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    b = bytearray(data)
    n = rng.randrange(1, 6)
    for _ in range(n):
        if b:
            b[rng.randrange(0, min(64, len(b)))] = rng.randrange(256)
    return f"header{n}", bytes(b)


def _zero_run(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    if len(data) < 32:
        return "zero-run-short", data
    length = rng.randrange(16, max(17, min(4096, len(data) // 2)))
    start = rng.randrange(0, len(data) - length)
    value = rng.choice([0x00, 0xFF])
    return f"run{value:02x}@{start}+{length}", data[:start] + bytes([value]) * length + data[start + length:]


def _shuffle(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    if len(data) < 64:
        return "shuffle-short", data
    a, b = sorted(rng.sample(range(len(data)), 2))
    piece = data[a:b]
    rest = data[:a] + data[b:]
    at = rng.randrange(0, len(rest) + 1)
    return f"move{a}-{b}", rest[:at] + piece + rest[at:]


def _append_garbage(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    return "append", data + rng.randbytes(rng.randrange(1, 2048))


def _huge(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    return "huge", huge_dimensions(data, rng.choice([HUGE, 70_000, 20_000]))


def _insert_random(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    at = rng.randrange(0, len(data) + 1)
    return f"insert@{at}", data[:at] + rng.randbytes(rng.randrange(1, 64)) + data[at:]


MUTATORS: tuple[Callable[[random.Random, bytes], tuple[str, bytes]], ...] = (
    _truncate, _flip_body, _flip_body, _corrupt_header, _zero_run, _shuffle, _append_garbage, _huge,
    _insert_random, _truncate,
)
SUFFIXES = (".jpg", ".png", ".webp", ".jpeg")


def mutated_cases(seeds: list[Case], count: int, seed: int) -> Iterator[Case]:
    """`count` mutated files from `seeds`, the same ones for the same `seed`."""
    rng = random.Random(seed)
    for i in range(count):
        base = seeds[i % len(seeds)]
        data = base.data
        names = []
        for _ in range(rng.choice([1, 1, 1, 2])):  # mostly one mutation, sometimes two stacked
            what, data = rng.choice(MUTATORS)(rng, data)
            names.append(what)
        suffix = base.suffix if rng.random() > 0.1 else rng.choice(SUFFIXES)  # sometimes a lying name
        yield Case(f"{i:04d}-{base.name}-{'+'.join(names)}", data, suffix)


# ----------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Outcome:
    case: str
    role: str
    exit_code: int
    stderr: str
    problem: str | None


@dataclass
class Native:
    text: str = ""


@contextlib.contextmanager
def native_stderr() -> Iterator[Native]:
    """What C libraries write straight to file descriptor 2 meanwhile (CliRunner only captures
    Python's sys.stderr, but a user's terminal shows both). Not livecam.native_stderr.captured():
    that one holds a lock which livecam's own captures inside the command take too, and this
    swap must wrap them (a nested swap restores this one's file)."""
    captured = Native()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", "replace")


def invoke(runner, cli, args: list[str]):  # type: ignore[no-untyped-def]
    """runner.invoke, with native stderr output added to the result's stderr text."""
    with native_stderr() as native:
        result = runner.invoke(cli, args)
    return result, native.text + result.stderr


def run_case(runner, cli, case: Case, role: str, good: Path, work: Path) -> Outcome:  # type: ignore[no-untyped-def]
    """Write the case to `work/in/`, run `livecam image` with it in `role` ("target" or "source"),
    and judge the result. `good` is a valid photo with one face used in the other role."""
    inbox, outbox = work / "in", work / "out"
    inbox.mkdir(parents=True, exist_ok=True)
    outbox.mkdir(parents=True, exist_ok=True)
    path = inbox / f"case{case.suffix}"
    path.write_bytes(case.data)
    out = outbox / "result.jpg"
    target, source = (path, good) if role == "target" else (good, path)
    result, stderr = invoke(runner, cli, ["image", str(target), str(out), "--source", str(source),
                                          "--swap-model", "mesh"])
    problem = judge(result.exit_code, stderr, result.exception, out, outbox)
    for leftover in outbox.iterdir():
        leftover.unlink()
    path.unlink()
    return Outcome(case.name, role, result.exit_code, stderr, problem)


def judge(exit_code: int, stderr: str, exception: BaseException | None, out: Path, outbox: Path) -> str | None:
    """None when the run behaved; else what went wrong."""
    if exception is not None and not isinstance(exception, SystemExit):
        return f"an exception escaped: {type(exception).__name__}: {exception}"
    if "Traceback" in stderr or "internal error" in stderr:
        return f"traceback or internal error: {stderr.strip()[-300:]}"
    files = sorted(p.name for p in outbox.iterdir())
    if exit_code == 0:
        if files != [out.name]:
            return f"exit 0 but the output folder holds {files}"
        from livecam.media.images import read_image

        try:
            read_image(out)
        except Exception as exc:  # noqa: BLE001 - any failure here is the finding
            return f"exit 0 but the output does not read back: {exc}"
        return None
    if exit_code != 2:
        return f"exit {exit_code}: {stderr.strip()[-300:]}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if len(lines) != 1 or not lines[0].startswith("livecam: error: "):
        return f"exit 2 but stderr is not one error line: {lines!r}"
    if files:
        return f"failed but left {files} behind"
    return None
