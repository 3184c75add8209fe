"""CPU cost of the per-face image work around the models (not the inference itself).

  face_enhancer: FFHQ-512 alignment crop + BGRA merge with the mask + paste-back (one 4-channel
                 warp, copy of the mask's interior, uint8 blend of its feathered edge); and its
                 512x512 pre/post-processing (restore() with the model call replaced)
  face_swapper:  inswapper paste-back (insightface-equivalent soft mask, warps, blend)

per face in a 1080p frame, median over --runs (default 200) after a warm-up. The face size is
given as the distance between the eyes in frame pixels (--eye, default 120: a face about 300
px wide); the swapper is also timed for a face whose 128-px crop covers 300x300 frame pixels.

    python scripts/bench_enhance.py [--runs 200] [--eye 120] [--threads N] [--clock wall|cpu] [--json]
                                    [--compare-insightface]

--compare-insightface (needs the dev extra and the repository's tests/ folder) also times
insightface 2.1's INSwapper.get paste-back on the same frame and face with a stand-in model, as
get(paste_back=True) minus get(paste_back=False), next to livecam's swap_face minus its model call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from livecam.faces.align import FFHQ_512, align_matrix, arcface_template
from livecam.processors.face_enhancer import _MASK_FEATHER, _MASK_MARGIN, CROP_SIZE
from livecam.processors.paste import align_crop, feathered_box, inswapper_mask, paste


def face_kps(eye: float, centre=(960.0, 540.0), degrees: float = 0.0) -> np.ndarray:
    t = arcface_template(128).astype(np.float64)
    t -= t[:2].mean(axis=0)
    t *= eye / (t[1, 0] - t[0, 0])
    a = np.deg2rad(degrees)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return (t @ rot.T + np.asarray(centre)).astype(np.float32)


def median_ms(fn, runs: int, clock=time.perf_counter) -> str:
    """'median (min)' in ms; the minimum shows the cost without other processes' interference."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(runs):
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1000.0)
    return f"{statistics.median(times):.3f} (min {min(times):.3f})"


def enhancer_work(frame: np.ndarray, kps: np.ndarray, restored: np.ndarray, mask, opacity: float):
    """What FaceEnhancer.process does per face around the model call and its pre/post-processing:
    align, BGRA crop with the mask as alpha, paste-back."""
    planes = cv2.split(restored)

    def run() -> None:
        m = align_matrix(kps, FFHQ_512)
        align_crop(frame, m, CROP_SIZE)
        paste(frame, cv2.merge((*planes, mask.alpha8)), m, mask, opacity=opacity)
    return run


class _FixedSession:
    """An ONNX-session look-alike for the enhancer that returns a fixed output (no inference)."""

    def __init__(self, output: np.ndarray) -> None:
        self._output = output

    def get_inputs(self):
        from types import SimpleNamespace
        return [SimpleNamespace(name="input", shape=[1, 3, CROP_SIZE, CROP_SIZE], type="tensor(float)")]

    def get_outputs(self):
        from types import SimpleNamespace
        return [SimpleNamespace(name="output", shape=[1, 3, CROP_SIZE, CROP_SIZE], type="tensor(float)")]

    def run(self, names, feeds):
        return [self._output]


def enhancer_restore(crop: np.ndarray, rng: np.random.Generator):
    """FaceEnhancer's pre- and post-processing of one 512x512 crop (normalisation to the model's
    NCHW float input, clamp and conversion back to uint8 BGR) with the model call replaced by a
    fixed output."""
    from livecam.processors.face_enhancer import FaceEnhancer
    from livecam.settings import EnhanceSettings

    output = rng.uniform(-1.2, 1.2, (1, 3, CROP_SIZE, CROP_SIZE)).astype(np.float32)
    enhancer = FaceEnhancer(_FixedSession(output), EnhanceSettings())
    return lambda: enhancer.restore([crop])


def swapper_paste(frame: np.ndarray, kps: np.ndarray, fake: np.ndarray):
    """What InswapperSwapper.swap_face does per face after the model call (no colour match)."""
    m = align_matrix(kps, arcface_template(128))

    def run() -> None:
        paste(frame, fake, m, inswapper_mask(m, 128, frame.shape))
    return run, paste(frame, fake, m, inswapper_mask(m, 128, frame.shape))


def compare_insightface(frame: np.ndarray, eye: float, runs: int, clock) -> dict[str, str]:
    import warnings

    import onnxruntime as ort

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from insightface.app.common import Face as IFace
    from insightface.model_zoo.inswapper import INSwapper

    from livecam.faces.face import Face
    from livecam.processors.face_swapper import InswapperSwapper
    from livecam.settings import SwapSettings
    from tests.standins.inswapper import build_inswapper

    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        path = build_inswapper(Path(tmp) / "inswapper_128.onnx")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 3
        session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        kps = face_kps(eye)
        emb = np.random.default_rng(1).standard_normal(512).astype(np.float32)
        theirs = INSwapper(model_file=str(path), session=session)
        target, source = IFace(kps=kps.astype(np.float64)), IFace(embedding=emb)
        ours = InswapperSwapper(session, SwapSettings(color_match=False))
        face = Face(bbox=[0, 0, 1, 1], score=1.0, kps=kps)
        latent = ours.latent(emb)
        n = max(10, runs // 5)  # insightface's full-frame path is slow

        def ms(fn) -> float:
            return float(median_ms(fn, n, clock).split()[0])
        with_paste = ms(lambda: theirs.get(frame, target, source, paste_back=True))
        without = ms(lambda: theirs.get(frame, target, source, paste_back=False))
        work = frame.copy()
        full = ms(lambda: ours.swap_face(work, face, latent))
        model = ms(lambda: ours.swap_crop(ours.align(work, face), latent))
    return {f"insightface INSwapper paste-back ms, eye {eye:.0f}px (median of {n})": f"{with_paste - without:.3f}",
            f"livecam swap_face paste-back ms, eye {eye:.0f}px (median of {n})": f"{full - model:.3f}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--eye", type=float, default=120.0, help="eye distance in px (face ~2.5x wider)")
    parser.add_argument("--threads", type=int, default=0, help="OpenCV threads (0: OpenCV's default)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this process's CPU time (use with --threads 1 on a shared machine)")
    parser.add_argument("--compare-insightface", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.threads:
        cv2.setNumThreads(args.threads)
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    restored = rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)
    fake = rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)
    mask = feathered_box(CROP_SIZE, _MASK_MARGIN, _MASK_FEATHER)
    # 128 template px 35.2 apart at the eyes: a crop covering 300 px has eyes 82.5 px apart.
    eye_300_crop = 300.0 * 35.2366 / 128.0
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    results: dict[str, object] = {"unit": "ms, median (min)", "frame": "1920x1080", "runs": args.runs, "cv2_threads": cv2.getNumThreads(),
                                  "clock": args.clock, "cores": os.cpu_count(),
                                  "load_average_1min": round(os.getloadavg()[0], 2)}
    for label, eye, degrees, opacity in (("upright, blend 0.8", args.eye, 0.0, 0.8),
                                         ("upright, blend 1", args.eye, 0.0, 1.0),
                                         ("rolled 20deg, blend 0.8", args.eye, 20.0, 0.8)):
        kps = face_kps(eye, degrees=degrees)
        results[f"enhancer align+paste ms, eye {eye:.0f}px, {label}"] = median_ms(
            enhancer_work(frame, kps, restored, mask, opacity), args.runs, clock)
    results["enhancer pre/post-processing ms per face (restore() without the model)"] = median_ms(
        enhancer_restore(restored, rng), args.runs, clock)
    for label, eye, degrees in (("eye %.0fpx" % args.eye, args.eye, 0.0),
                                ("crop covers 300px", eye_300_crop, 0.0),
                                ("eye %.0fpx rolled 20deg" % args.eye, args.eye, 20.0)):
        run, roi = swapper_paste(frame, face_kps(eye, degrees=degrees), fake)
        key = f"swapper paste-back ms, {label} (roi {roi[2] - roi[0]}x{roi[3] - roi[1]})"
        results[key] = median_ms(run, args.runs, clock)
    if args.compare_insightface:
        results.update(compare_insightface(frame, args.eye, args.runs, clock))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, value in results.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
