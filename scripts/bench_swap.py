#!/usr/bin/env python
"""Benchmark: ms per face of the mesh swapper and of paste-back (medians over many runs).

    python scripts/bench_swap.py [--runs 200] [--faces-dir ../shared/faces]

Mesh swapper: the source is obama.jpg, the target is biden.jpg's face rescaled into a 640x480
frame (face about 200 px tall) and a 1920x1080 frame (about 450 px), landmarks from the shipped
BlazeFace + FaceMesh models (analysis is not timed). Paste-back: align.paste_back of a 128x128
crop for a 300-px face in a 1080p frame, and the InswapperSwapper's paste path (its model call
replaced by an identity) when that module is present. Single-threaded OpenCV, like a pipeline
worker. Prints one line per case; no assertion (speed is not a test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

from livecam.faces.align import align_matrix, arcface_template, feather_mask, paste_back
from livecam.faces.face import Face
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.processors.mesh_swapper import MeshSwapper
from livecam.settings import SwapSettings

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = REPO / "src" / "livecam" / "models" / "default"


def median_ms(fn: Callable[[], None], runs: int, warmup: int = 5) -> tuple[float, float, float]:
    """(median wall ms, 90th-percentile wall ms, median CPU ms of this thread) of fn.

    The CPU time is what the call costs when it has a core to itself; the wall time also
    counts waiting for a core on a shared machine (check the load average printed first)."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.thread_time(), time.perf_counter()
        fn()
        wall.append((time.perf_counter() - t0) * 1000.0)
        cpu.append((time.thread_time() - c0) * 1000.0)
    wall.sort()
    return statistics.median(wall), wall[int(0.9 * (len(wall) - 1))], statistics.median(cpu)


def line(label: str, figures: tuple[float, float, float], runs: int) -> str:
    med, p90, cpu = figures
    return f"{label}: median {med:6.2f} ms  p90 {p90:6.2f} ms  cpu median {cpu:6.2f} ms  ({runs} runs)"


def analyse(image: np.ndarray) -> list[Face]:
    from livecam.faces.blazeface import BlazeFaceDetector
    from livecam.faces.facemesh import FaceMesh
    from livecam.runtime.providers import resolve_providers
    from livecam.runtime.sessions import get_session

    providers = resolve_providers(("cpu",))
    detector = BlazeFaceDetector(get_session(DEFAULT_MODELS / "blazeface_full_range.onnx", providers),
                                 variant="full")
    mesh = FaceMesh(get_session(DEFAULT_MODELS / "face_landmark.onnx", providers))
    faces = [f for f in mesh.refine(image, detector.detect(image)) if f.landmarks is not None]
    if not faces:
        sys.exit("bench_swap: no meshed face found in the benchmark frame")
    return [max(faces, key=lambda f: f.area)]


def frame_with_face(photo: np.ndarray, frame_wh: tuple[int, int], face_h: int) -> np.ndarray:
    """photo rescaled so that its face is about face_h px tall, centred in a frame."""
    face = analyse(photo)[0]
    lm = face.landmarks
    assert lm is not None
    scale = face_h / float(lm[:, 1].max() - lm[:, 1].min())
    small = cv2.resize(photo, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    centre = (lm.min(axis=0) + lm.max(axis=0)) / 2 * scale
    w, h = frame_wh
    shift = np.array([[1, 0, w / 2 - centre[0]], [0, 1, h / 2 - centre[1]]], dtype=np.float64)
    return cv2.warpAffine(small, shift, (w, h), borderMode=cv2.BORDER_REFLECT)


def bench_mesh(faces_dir: Path, runs: int) -> None:
    src_img = cv2.imread(str(faces_dir / "obama.jpg"))
    tgt_img = cv2.imread(str(faces_dir / "biden.jpg"))
    source = SourceIdentity((faces_dir / "obama.jpg",), src_img, analyse(src_img)[0], None)
    for label, wh, face_h in (("640x480", (640, 480), 200), ("1920x1080", (1920, 1080), 450)):
        frame = frame_with_face(tgt_img, wh, face_h)
        faces = analyse(frame)
        for name, settings in (("default", SwapSettings()),
                               ("mouth-mask 0", SwapSettings(mouth_mask=0)),
                               ("no colour match", SwapSettings(color_match=False))):
            swapper = MeshSwapper(settings)
            swapper.prepare([source])
            work = frame.copy()

            def run() -> None:
                np.copyto(work, frame)  # a fresh frame each time (about 0.1 ms at 1080p)
                swapper.process(FramePacket(0, work, faces=faces))

            size = faces[0].height
            print(line(f"mesh swapper {label:>9} face {size:4.0f}px {name:<16}", median_ms(run, runs), runs))


def bench_paste(runs: int) -> None:
    frame = np.random.default_rng(0).integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    # A 300-px face: eyes 120 px apart, centred.
    c = np.array([960.0, 540.0])
    kps = np.array([c + (-60, -40), c + (60, -40), c + (0, 10), c + (-50, 70), c + (50, 70)],
                   dtype=np.float32)
    matrix = align_matrix(kps, arcface_template(128))
    crop = np.random.default_rng(1).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    mask = feather_mask(128)
    work = frame.copy()
    figures = median_ms(lambda: paste_back(work, crop, matrix, mask), runs)
    print(line("paste-back align.paste_back, 1080p, 300-px face", figures, runs))
    try:
        from livecam.processors.paste import inswapper_mask, paste
    except ImportError:
        print("paste-back inswapper: skipped (livecam.processors.paste not importable)")
        return

    def inswapper_paste() -> None:
        paste(work, crop, matrix, inswapper_mask(matrix, 128, work.shape))

    figures = median_ms(inswapper_paste, runs)
    print(line("paste-back inswapper mask + paste, 1080p, 300-px face", figures, runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--faces-dir", type=Path, default=REPO.parent / "shared" / "faces")
    parser.add_argument("--threads", type=int, default=1, help="OpenCV threads (default 1)")
    args = parser.parse_args()
    cv2.setNumThreads(args.threads)
    print(f"cv2 {cv2.__version__}, numpy {np.__version__}, OpenCV threads {cv2.getNumThreads()}, "
          f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    if (args.faces_dir / "obama.jpg").is_file():
        bench_mesh(args.faces_dir, args.runs)
    else:
        print(f"mesh swapper: skipped, no photos in {args.faces_dir}")
    bench_paste(args.runs)


if __name__ == "__main__":
    main()
