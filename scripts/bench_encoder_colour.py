"""Flat greys and a colour chart through VideoWriter, per encoder: how far what comes back is
from what went in (session 18's check of mpeg4, VP9 and VP8 against libx264).

    python scripts/bench_encoder_colour.py [--size 1280x720] [--quality 18] [--frames 3] [--encoders a,b]

Each picture (greys 16, 64, 128, 200, 235 and a 24-patch chart of 32x32 patches, tiled) is
written `--frames` times to a Matroska file by `VideoWriter` (what `livecam video` does with a
frame, at the size's assumed colour: limited range, BT.709 from 720 rows, BT.601 below), then
decoded with PyAV and converted as livecam reads a video (`Colour.described`, the frame's tags).
Grey: mean of decoded minus input, and the largest pixel difference. Chart: mean and largest
difference of the patches' centres (16x16 of each, clear of the chroma at their edges). "Y": the
mean of the decoded luma plane minus the one encoded, the codec's own loss.
"""

from __future__ import annotations

import argparse
import tempfile
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from livecam.media.colour import Colour, ColourConverter, bgr_to_yuv420p
from livecam.media.video_writer import OutputSpec, VideoWriter, available_encoders

GREYS = (16, 64, 128, 200, 235)
CHART_RGB = ((115, 82, 68), (194, 150, 130), (98, 122, 157), (87, 108, 67), (133, 128, 177), (103, 189, 170),
             (214, 126, 44), (80, 91, 166), (193, 90, 99), (94, 60, 108), (157, 188, 64), (224, 163, 46),
             (56, 61, 150), (70, 148, 73), (175, 54, 60), (231, 199, 31), (187, 86, 149), (8, 133, 161),
             (243, 243, 242), (200, 200, 200), (160, 160, 160), (122, 122, 121), (85, 85, 85), (52, 52, 52))
PATCH = 32


def chart(w: int, h: int) -> np.ndarray:
    image = np.zeros((h, w, 3), np.uint8)
    for row in range(h // PATCH):
        for col in range(w // PATCH):
            image[row * PATCH:(row + 1) * PATCH, col * PATCH:(col + 1) * PATCH] = \
                CHART_RGB[(row * 6 + col) % len(CHART_RGB)][::-1]
    return image


def centres(image: np.ndarray) -> np.ndarray:
    q = PATCH // 4
    return np.array([image[r + q:r + PATCH - q, c + q:c + PATCH - q].reshape(-1, 3).mean(axis=0)
                     for r in range(0, image.shape[0] - PATCH + 1, PATCH)
                     for c in range(0, image.shape[1] - PATCH + 1, PATCH)])


def round_trip(image: np.ndarray, encoder: str, quality: int, frames: int, path: Path) -> tuple[list[np.ndarray], float]:
    h, w = image.shape[:2]
    writer = VideoWriter(OutputSpec(path=path, format="matroska", width=w, height=h, rate=Fraction(25),
                                    time_base=Fraction(1, 25), encoder=encoder, quality=quality))
    for i in range(frames):
        writer.write(image, i / 25)
    writer.close()
    converter, decoded, luma = ColourConverter(), [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        base = Colour.described(ctx, ctx.pix_fmt, ctx.height)
        for frame in container.decode(stream):
            colour = Colour.described(frame, frame.format.name, frame.height, base)
            decoded.append(converter.to_bgr(frame, colour).astype(np.float64))
            sent = bgr_to_yuv420p(image, colour)[:h].astype(np.float64)
            luma.append(frame.to_ndarray()[:h].astype(np.float64).mean() - sent.mean())
    return decoded, float(np.mean(luma))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--quality", type=int, default=18)
    parser.add_argument("--frames", type=int, default=3)
    parser.add_argument("--encoders", default=",".join(available_encoders()))
    args = parser.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    print(f"{args.size}, --video-quality {args.quality}: grey mean (max) [Y]; chart mean |error| (max) [Y]")
    with tempfile.TemporaryDirectory() as tmp:
        for encoder in args.encoders.split(","):
            cells = []
            for grey in GREYS:
                image = np.full((h, w, 3), grey, np.uint8)
                decoded, luma = round_trip(image, encoder, args.quality, args.frames, Path(tmp) / f"{encoder}-{grey}.mkv")
                mean = np.mean([d.mean() - grey for d in decoded])
                worst = max(np.abs(d - grey).max() for d in decoded)
                cells.append(f"{mean:+.2f} ({worst:.0f}) [{luma:+.2f}]")
            image = chart(w, h)
            decoded, luma = round_trip(image, encoder, args.quality, args.frames, Path(tmp) / f"{encoder}-chart.mkv")
            errors = [np.abs(centres(d) - centres(image.astype(np.float64))) for d in decoded]
            cells.append(f"{np.mean(errors):.2f} ({max(e.max() for e in errors):.1f}) [{luma:+.2f}]")
            print(f"| {encoder} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
