#!/usr/bin/env python
"""Median milliseconds per call (wall clock and process CPU) of livecam's face detectors at 640x480 and 1280x720.

Rows:
- the embedded default, BlazeFace (short and full range) + FaceMesh on one face, with the
  models shipped in src/livecam/models/default;
- SCRFD det_10g when the real file is in the model store; otherwise SCRFD on the small
  random-weight stand-in from tests/standins (labelled as such: it measures livecam's pre- and
  post-processing plus a tiny network, NOT the real model's cost);
- ArcFace embedding per batch (real w600k_r50 when present, else the stand-in).

With `--replicas DIR` (scripts/make_replicas.py's output), the full-size random-weight det_10g
and w600k_r50 replicas there are measured when the real files are absent: the real models'
compute, labelled REPLICA.
Not a test: figures depend on the machine and its load; run it on an otherwise idle machine.

    python scripts/bench_faces.py [--runs 50] [--threads 0] [--photo ../shared/faces/obama.jpg]
                                  [--replicas /work/replicas]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.standins

from livecam.faces.arcface import ArcFaceEmbedder  # noqa: E402
from livecam.faces.blazeface import BlazeFaceDetector  # noqa: E402
from livecam.faces.facemesh import FaceMesh  # noqa: E402
from livecam.faces.scrfd import ScrfdDetector  # noqa: E402
from livecam.models.store import ModelStore  # noqa: E402
from livecam.runtime.providers import resolve_providers  # noqa: E402
from livecam.runtime.sessions import get_session  # noqa: E402
from livecam.settings import RuntimeSettings  # noqa: E402

SIZES = ((640, 480), (1280, 720))


def median_ms(fn: Callable[[], object], runs: int, warmup: int = 3) -> tuple[float, float]:
    """(median wall ms, median process-CPU ms) per call. On a busy machine the CPU figure is
    the steadier one: with one intra-op thread it is what the call costs when it has a core."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1000.0)
        cpu.append((time.process_time() - c0) * 1000.0)
    return statistics.median(wall), statistics.median(cpu)


def frame_with_face(photo: Path | None, width: int, height: int) -> np.ndarray:
    """The photo fitted (aspect kept) into a grey frame of the given size, or noise-free
    synthetic content when no photo is available."""
    frame = np.full((height, width, 3), 90, np.uint8)
    img = cv2.imread(str(photo)) if photo is not None and photo.is_file() else None
    if img is None:
        cv2.circle(frame, (width // 2, height // 2), height // 4, (150, 170, 200), -1)
        return frame
    scale = min(width / img.shape[1], height / img.shape[0])
    w, h = int(img.shape[1] * scale), int(img.shape[0] * scale)
    x, y = (width - w) // 2, (height - h) // 2
    frame[y:y + h, x:x + w] = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
    return frame


def pick_model(store: ModelStore, name: str, family: str, replicas: Path | None,
               build_standin: Callable[[Path], Path], tmp: Path, standin_label: str) -> tuple[Path, str]:
    """The real model when the store has it, else the full-size replica in `replicas`, else the
    tiny stand-in (labelled so that no one takes its figures for the real model's)."""
    if store.is_present(name):
        return store.path(name), f"{family} {name}"
    if replicas is not None and (replicas / f"{name}.onnx").is_file():
        return replicas / f"{name}.onnx", f"{family} {name} REPLICA"
    return build_standin(tmp / f"{name}.onnx"), standin_label


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0, help="ORT intra-op threads (0: ORT default)")
    parser.add_argument("--photo", type=Path, default=REPO.parent / "shared" / "faces" / "obama.jpg")
    parser.add_argument("--replicas", type=Path, default=None,
                        help="folder of full-size replicas (scripts/make_replicas.py) used when the real files are absent")
    args = parser.parse_args()

    providers = resolve_providers(["cpu"])
    store = ModelStore(RuntimeSettings(offline=True), progress=False)
    session = lambda path: get_session(path, providers, args.threads)  # noqa: E731
    tmp = Path(tempfile.mkdtemp(prefix="livecam-bench-"))
    rows: list[tuple[str, str, tuple[float, float], str]] = []

    mesh = FaceMesh(session(store.path("face_landmark")))
    for variant in ("short", "full"):
        det = BlazeFaceDetector(session(store.path(f"blazeface_{variant}_range")), variant=variant)
        for w, h in SIZES:
            frame = frame_with_face(args.photo, w, h)
            faces = det.detect(frame, max_faces=1)
            label = f"blazeface {variant}"
            rows.append((label, f"{w}x{h}", median_ms(lambda: det.detect(frame), args.runs), f"{len(faces)} face"))
            if faces:
                rows.append(("  facemesh (1 face)", f"{w}x{h}",
                             median_ms(lambda: mesh.refine(frame, faces), args.runs), ""))
                rows.append((f"  {label} + facemesh", f"{w}x{h}",
                             median_ms(lambda: mesh.refine(frame, det.detect(frame, max_faces=1)), args.runs), ""))

    from tests.standins.arcface import build_arcface
    from tests.standins.scrfd import build_scrfd

    scrfd_path, scrfd_label = pick_model(store, "det_10g", "scrfd", args.replicas, build_scrfd, tmp,
                                         "scrfd STAND-IN (tiny net)")
    scrfd_session = session(scrfd_path)
    for det_size in (640, 320):
        det = ScrfdDetector(scrfd_session, det_size=det_size)
        for w, h in SIZES:
            frame = frame_with_face(args.photo, w, h)
            rows.append((f"{scrfd_label} @{det_size}", f"{w}x{h}", median_ms(lambda: det.detect(frame), args.runs),
                         f"{len(det.detect(frame))} dets"))

    arc_path, arc_label = pick_model(store, "w600k_r50", "arcface", args.replicas, build_arcface, tmp,
                                     "arcface STAND-IN")
    embedder = ArcFaceEmbedder(session(arc_path))
    frame = frame_with_face(args.photo, 640, 480)
    face = BlazeFaceDetector(session(store.path("blazeface_short_range"))).detect(frame, max_faces=1)
    if face:
        for n in (1, 4):
            batch = face * n
            rows.append((f"{arc_label} x{n} faces", "640x480",
                         median_ms(lambda: embedder.embed(frame, batch), args.runs), ""))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"livecam face benchmark: {args.runs} runs per row, CPU provider, intra-op threads "
          f"{args.threads or 'default'}, {os.cpu_count()} cores, load average {load:.2f}")
    print(f"{'what':44s} {'frame':>9s} {'wall ms':>8s} {'cpu ms':>8s}  note")
    for what, size, (wall, cpu), note in rows:
        print(f"{what:44s} {size:>9s} {wall:8.2f} {cpu:8.2f}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
