"""Decoding 8-bit 4:2:0 to BGR: bias against exact arithmetic and CPU per frame, the exact
conversion (media.colour.yuv420p_to_bgr, what livecam decodes with) against swscale's fast
path (what it decoded with before session 15), interleaved in one run.

    python scripts/bench_colour.py [--size 1920x1080] [--runs 61]

Frames: a picture of smooth varied colour with a band of saturated hues, made from BGR with
each range and matrix (limited BT.709 and BT.601, full-range BT.709 yuv420p and BT.601
yuvj420p). Error: against float64 arithmetic with the same chroma (each sample over its 2x2
pixels), rounded to nearest. Time: the calling thread's CPU time (time.thread_time: what a
loaded machine's other processes do not add), medians, OpenCV on one thread as swscale is.
"""

from __future__ import annotations

import argparse
import time

import av
import cv2
import numpy as np
from av.video.reformatter import Interpolation, VideoReformatter

from livecam.media.colour import _KR_KB, _SWS_MATRIX, FULL, LIMITED, Colour, bgr_to_yuv420p, yuv420p_to_bgr

COLOURS = ((Colour(LIMITED, 1, 1, 1), "yuv420p"), (Colour(LIMITED, 6, 6, 6), "yuv420p"),
           (Colour(FULL, 1, 1, 1), "yuv420p"), (Colour(FULL, 6, 6, 5), "yuvj420p"))


def picture(w: int, h: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    bgr = np.dstack([128 + 100 * np.sin(xx / 97 + c) * np.cos(yy / 61 - c) for c in (0.0, 2.1, 4.2)])
    hsv = np.dstack([(xx * 180 / w), np.full_like(xx, 220), 40 + yy * 200 / h]).astype(np.uint8)
    bgr[: h // 3] = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[: h // 3]
    return np.clip(bgr, 0, 255).astype(np.uint8)


def planes(frame: av.VideoFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h, w = frame.height, frame.width
    flat = frame.to_ndarray().reshape(-1)
    return (flat[:h * w].reshape(h, w), flat[h * w:h * w * 5 // 4].reshape(h // 2, w // 2),
            flat[h * w * 5 // 4:].reshape(h // 2, w // 2))


def exact(frame: av.VideoFrame, colour: Colour) -> np.ndarray:
    y, u, v = (p.astype(np.float64) for p in planes(frame))
    u, v = (np.repeat(np.repeat(c, 2, 0), 2, 1) - 128 for c in (u, v))
    ls, lo, cs = (255.0, 0.0, 255.0) if colour.range == FULL else (219.0, 16.0, 224.0)
    kr, kb = _KR_KB[colour.matrix]
    luma, cb, cr = (y - lo) / ls, u / cs, v / cs
    r, b = luma + 2 * (1 - kr) * cr, luma + 2 * (1 - kb) * cb
    g = (luma - kr * r - kb * b) / (1 - kr - kb)
    return np.clip(np.rint(np.dstack([b, g, r]) * 255), 0, 255)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--runs", type=int, default=61)
    args = parser.parse_args()
    w, h = (int(n) for n in args.size.split("x"))
    cv2.setNumThreads(1)
    sws = VideoReformatter()
    image = picture(w, h)
    for colour, pix_fmt in COLOURS:
        frame = av.VideoFrame.from_ndarray(bgr_to_yuv420p(image, colour), format=pix_fmt)

        def fast() -> np.ndarray:
            out = sws.reformat(frame, format="bgr24", src_colorspace=_SWS_MATRIX[colour.matrix],
                               src_color_range=colour.range, dst_color_range=FULL,
                               interpolation=Interpolation.BILINEAR)
            return out.to_ndarray()

        def own() -> np.ndarray:
            return yuv420p_to_bgr(*planes(frame), colour)

        ways = {"swscale fast": fast, "exact": own}
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.runs):
            for name, convert in ways.items():
                t0 = time.thread_time()
                convert()
                seconds[name].append(time.thread_time() - t0)
        reference = exact(frame, colour)
        print(f"range {colour.range} matrix {colour.matrix} {pix_fmt} {w}x{h}")
        for name, convert in ways.items():
            error = convert().astype(np.float64) - reference
            bias = " / ".join(f"{b:+.3f}" for b in error.reshape(-1, 3).mean(axis=0))
            print(f"  {name:13s} {1000 * float(np.median(seconds[name])):5.2f} ms  B/G/R bias {bias}  "
                  f"max {np.abs(error).max():.0f}  off by one {np.mean(error != 0):.1%}")


if __name__ == "__main__":
    main()
