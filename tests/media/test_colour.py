"""Decoding 8-bit 4:2:0 video to BGR: exact arithmetic, rounded to nearest, by the frame's range and matrix."""

from __future__ import annotations

import threading

import av
import numpy as np
import pytest

from livecam.media.colour import FULL, LIMITED, Colour, ColourConverter

# (Kr, Kb) of the standards: BT.709 and BT.601 (AVColorSpace 1; 5 and 6 are both BT.601)
KR_KB = {1: (0.2126, 0.0722), 5: (0.299, 0.114), 6: (0.299, 0.114)}


def exact_bgr(frame: av.VideoFrame, colour: Colour) -> np.ndarray:
    """The frame in BGR by the standard's formulas in float64, each chroma sample over its 2x2
    pixels, rounded to nearest and clipped to 0-255."""
    h, w = frame.height, frame.width
    flat = frame.to_ndarray().astype(np.float64).reshape(-1)  # Y, then U, then V
    y = flat[:h * w].reshape(h, w)
    u, v = (flat[h * w + k * (h * w // 4):h * w + (k + 1) * (h * w // 4)].reshape(h // 2, w // 2) for k in (0, 1))
    u, v = (np.repeat(np.repeat(c, 2, axis=0), 2, axis=1) for c in (u, v))
    if colour.range == FULL:
        luma, cb, cr = y / 255, (u - 128) / 255, (v - 128) / 255
    else:
        luma, cb, cr = (y - 16) / 219, (u - 128) / 224, (v - 128) / 224
    kr, kb = KR_KB[colour.matrix]
    r = luma + 2 * (1 - kr) * cr
    b = luma + 2 * (1 - kb) * cb
    g = (luma - kr * r - kb * b) / (1 - kr - kb)
    return np.clip(np.rint(np.dstack([b, g, r]) * 255), 0, 255)


def i420(planes: tuple[np.ndarray, np.ndarray, np.ndarray], pix_fmt: str) -> av.VideoFrame:
    return av.VideoFrame.from_ndarray(np.concatenate([p.reshape(-1) for p in planes]).reshape(-1, planes[0].shape[1]),
                                      format=pix_fmt)


def scenes(h: int = 180, w: int = 320) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Planes with varied chroma: smooth colour (a picture's), and noise over every code value
    (out of gamut too, so clipping is checked)."""
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    smooth = (np.rint(120 + 90 * np.sin(xx / 23) * np.cos(yy / 17)).astype(np.uint8),
              np.rint(128 + 60 * np.sin(xx[::2, ::2] / 19 + yy[::2, ::2] / 29)).astype(np.uint8),
              np.rint(128 + 60 * np.cos(yy[::2, ::2] / 13 - xx[::2, ::2] / 31)).astype(np.uint8))
    noise = (rng.integers(0, 256, (h, w), dtype=np.uint8), rng.integers(0, 256, (h // 2, w // 2), dtype=np.uint8),
             rng.integers(0, 256, (h // 2, w // 2), dtype=np.uint8))
    return {"smooth": smooth, "noise": noise}


@pytest.mark.parametrize("colour, pix_fmt", [
    (Colour(LIMITED, 1, 1, 1), "yuv420p"),  # HD video
    (Colour(LIMITED, 6, 6, 6), "yuv420p"),  # SD video
    (Colour(FULL, 1, 1, 1), "yuv420p"),  # flagged full range
    (Colour(FULL, 6, 6, 5), "yuvj420p"),  # a webcam's MJPEG
])
def test_a_4_2_0_frame_decodes_as_exact_arithmetic_rounded(colour: Colour, pix_fmt: str) -> None:
    # swscale's fast path (what decoding used) truncates: -0.75 / -1.17 / -0.67 levels (B, G, R)
    # on a limited-range BT.709 picture, up to 3 levels off, so every video came out darker.
    for name, planes in scenes().items():
        frame = i420(planes, pix_fmt)
        error = ColourConverter().to_bgr(frame, colour).astype(np.float64) - exact_bgr(frame, colour)
        bias = error.reshape(-1, 3).mean(axis=0)
        assert np.all(np.abs(bias) < 0.1), (name, bias)
        assert np.abs(error).max() <= 1, name


def test_padded_and_odd_frames_decode_whole() -> None:
    # A decoder's planes are padded to their line size (a 1000-wide frame's rows are 1008 bytes);
    # an odd-sized 4:2:0 frame goes through swscale, as before.
    rng = np.random.default_rng(3)
    colour = Colour(LIMITED, 1, 1, 1)
    for w, h in ((1000, 64), (98, 66), (97, 65)):
        frame = av.VideoFrame(w, h, "yuv420p")
        for plane in frame.planes:
            plane.update(rng.integers(60, 190, plane.buffer_size, dtype=np.uint8).tobytes())
        image = ColourConverter().to_bgr(frame, colour)
        assert image.shape == (h, w, 3)
        if w % 2 == 0 and h % 2 == 0:
            assert np.abs(image.astype(np.float64) - exact_bgr(frame, colour)).max() <= 1


def test_one_converter_serves_several_threads() -> None:
    # The file pipeline's workers share their stream's converter: 4:2:0 and swscale's formats alike.
    converter = ColourConverter()
    colour = Colour(LIMITED, 1, 1, 1)
    frames = [i420(scenes()["noise"], "yuv420p"),
              av.VideoFrame.from_ndarray(np.full((180, 320, 3), 90, np.uint8), format="bgr24").reformat(format="yuv422p")]
    expected = [converter.to_bgr(frame, colour) for frame in frames]
    failures: list[str] = []

    def convert(k: int) -> None:
        for _ in range(20):
            if not np.array_equal(converter.to_bgr(frames[k % 2], colour), expected[k % 2]):
                failures.append(f"thread {k}")

    threads = [threading.Thread(target=convert, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
