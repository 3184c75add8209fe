#!/usr/bin/env python
"""Benchmark the live pipeline (not a test): FPS and capture-to-output latency.

1. A 640x480 clip (a moving crop of a real photo) through the live pipeline with --no-realtime
   and the mesh swapper on the CPU: FPS, p50/p95 latency (goal: >= 30 FPS, p95 <= 50 ms).
2. The same clip played in real time (30 FPS) with a synthetic slow processor taking 3 frame
   intervals: frames are dropped, and p95 latency stays bounded (below 2 processing intervals
   plus one frame interval) instead of growing with the queue. Once wrapping the real engine
   (slow_processor_realtime: the real analysis cost comes on top) and once with no face work at
   all (sleep_processor_realtime: only the pipeline's own behaviour).

    python scripts/bench_live.py [--frames 300] [--faces ../shared/faces] [--workers 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

from livecam.frame import FramePacket
from livecam.media.camera import VideoFileSource
from livecam.media.sinks import NullSink
from livecam.pipeline.live import LiveRun, run_live_pipeline
from livecam.pipeline.metrics import ResourceProbe
from livecam.settings import AnalysisSettings, LiveJob, ProcessingSettings, RuntimeSettings, SwapSettings

REPO = Path(__file__).resolve().parent.parent


def face_region(engine: Any, image: np.ndarray) -> tuple[float, float, float]:
    """Centre x, y and width of the largest face in the photo (the whole photo without one)."""
    packet = FramePacket(index=0, image=image)
    engine.analyse(packet, track=False)
    if not packet.faces:
        return image.shape[1] / 2, image.shape[0] / 2, image.shape[1] / 3
    x1, y1, x2, y2 = max(packet.faces, key=lambda f: f.area).bbox
    return (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1


def make_clip(path: Path, image: np.ndarray, face: tuple[float, float, float], frames: int,
              size: tuple[int, int] = (640, 480), fps: int = 30) -> Path:
    """A crop of the photo that follows a slow circle around the face (face about 1/3 of the
    frame width), like a webcam user moving a little."""
    w, h = size
    cx, cy, fw = face
    scale = w / (3.0 * fw)
    big = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    pad = max(w, h)
    big = cv2.copyMakeBorder(big, pad, pad, pad, pad, cv2.BORDER_REFLECT)
    cx, cy = cx * scale + pad, cy * scale + pad
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=Fraction(fps, 1))
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = {"crf": "18", "preset": "veryfast"}
        for i in range(frames):
            angle = 2 * np.pi * i / max(frames, 1)
            x = int(cx - w / 2 + 0.08 * w * np.cos(angle))
            y = int(cy - h / 2 + 0.08 * h * np.sin(angle))
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(big[y:y + h, x:x + w]), format="bgr24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


class SlowEngine:
    """Wraps the real engine and makes processing take `cost_s` in all."""

    def __init__(self, engine: Any, cost_s: float) -> None:
        self.engine = engine
        self.cost_s = cost_s
        self.processor_names = engine.processor_names

    def analyse(self, packet: FramePacket, track: bool = True) -> None:
        self.engine.analyse(packet, track=track)

    def process(self, packet: FramePacket) -> None:
        t0 = time.perf_counter()
        self.engine.process(packet)
        time.sleep(max(0.0, self.cost_s - (time.perf_counter() - t0)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


class SleepEngine:
    """No face work at all: processing is a sleep, so only the pipeline's own behaviour shows."""

    processor_names = ("face_swapper",)

    def __init__(self, cost_s: float) -> None:
        self.cost_s = cost_s

    def analyse(self, packet: FramePacket, track: bool = True) -> None:
        pass

    def process(self, packet: FramePacket) -> None:
        time.sleep(self.cost_s)

    def set_enabled(self, name: str, enabled: bool) -> None: ...
    def set_detect_every(self, n: int) -> None: ...
    def set_det_size(self, n: int) -> None: ...

    def next_source(self) -> None:
        return None

    def describe(self) -> str:
        return "sleep"


def run(engine: Any, clip: Path, realtime: bool, workers: int) -> dict[str, Any]:
    source = VideoFileSource(str(clip), realtime=realtime)
    source.open()
    runtime = RuntimeSettings(execution_threads=workers)
    options = LiveRun(LiveJob(processing=ProcessingSettings(sources=(), runtime=runtime), degrade=False))
    return run_live_pipeline(engine, source, NullSink(), options, probe=ResourceProbe()).summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--faces", type=Path, default=REPO.parent / "shared" / "faces")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from livecam.pipeline.engine import Engine

    settings = ProcessingSettings(sources=(args.faces / "obama.jpg",), swap=SwapSettings(model="mesh"),
                                  runtime=RuntimeSettings(offline=True, execution_threads=args.workers),
                                  analysis=AnalysisSettings(detector="blazeface"))
    engine = Engine.create(settings, live=True, progress=False)
    results: dict[str, Any] = {"engine": engine.describe()}
    with tempfile.TemporaryDirectory() as tmp:
        photo = cv2.imread(str(args.faces / "biden.jpg"))
        if photo is None:
            raise SystemExit(f"cannot read {args.faces / 'biden.jpg'}")
        clip = make_clip(Path(tmp) / "clip.mp4", photo, face_region(engine, photo), args.frames)
        warm = VideoFileSource(str(clip), realtime=False)  # model warm-up is not what we measure
        warm.open()
        faces = 0
        for i in range(5):
            image = warm.read()
            if image is None:
                break
            packet = FramePacket(index=i, image=image)
            engine.analyse(packet, track=False)
            engine.process(packet)
            faces += len(packet.faces)
        warm.close()
        results["faces_found_in_warmup"] = faces
        results["mesh_no_realtime"] = run(engine, clip, realtime=False, workers=args.workers)
        interval = 1 / 30
        slow = SlowEngine(engine, 3 * interval)
        summary = run(slow, clip, realtime=True, workers=1)
        summary["bound_ms"] = round((2 * 3 * interval + interval) * 1000, 1)
        results["slow_processor_realtime"] = summary
        summary = run(SleepEngine(3 * interval), clip, realtime=True, workers=1)
        summary["bound_ms"] = round((2 * 3 * interval + interval) * 1000, 1)
        results["sleep_processor_realtime"] = summary
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for name, s in results.items():
        if not isinstance(s, dict):
            print(f"{name}: {s}")
            continue
        extra = f"  (bound {s['bound_ms']} ms)" if "bound_ms" in s else ""
        print(f"{name:26s} frames {s['frames']:4d}  fps {s['fps']:6.1f}  p50 {s['latency_ms_p50']} ms  "
              f"p95 {s['latency_ms_p95']} ms{extra}  dropped {s['dropped']} of {s['captured']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
