#!/usr/bin/env python
"""Benchmark the file pipeline (not a test): `livecam video` throughput against its ceilings.

A 1280x720 clip of 300 frames (a slow pan over a real photo, with an AAC tone) goes through the
mesh swapper with 1, 2 and 4 workers. Beside each end-to-end rate, two ceilings measured in the
same run: decode + encode alone (an engine that does nothing, no label), and processing alone
(analyse + process on frames decoded beforehand, with the same number of workers, nothing
encoded). Goal: end to end >= 70% of the slower ceiling.

    python scripts/bench_video.py [--frames 300] [--size 1280x720] [--workers 1 2 4]
                                  [--encoder libx264] [--quality 18] [--faces ../shared/faces] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.videos (the clip generator)

from livecam.frame import FramePacket  # noqa: E402
from livecam.media.video_reader import VideoReader  # noqa: E402
from livecam.pipeline.file import process_video, run_frames  # noqa: E402
from livecam.settings import ProcessingSettings, RuntimeSettings, SwapSettings, VideoJob  # noqa: E402
from tests.videos import make_clip  # noqa: E402


class NoEngine:
    """Finds nothing and changes nothing: what is left is decode + encode."""

    def analyse(self, packet: FramePacket, track: bool) -> None:
        packet.faces = []

    def process(self, packet: FramePacket) -> None:
        pass


def build_engine(faces: Path, workers: int, models_dir: Path) -> Any:
    from livecam.pipeline.engine import Engine

    settings = ProcessingSettings(
        sources=(faces / "obama.jpg",),
        runtime=RuntimeSettings(execution_threads=workers, offline=True, models_dir=models_dir, quiet=True),
        swap=SwapSettings(model="mesh"),
    )
    return Engine.create(settings, live=False, progress=False)


def processing_ceiling(engine: Any, clip: Path, frames: int, workers: int) -> float:
    """Frames per second of analyse + process alone: 60 decoded frames cycled (copied) to `frames`."""
    with VideoReader(clip) as reader:
        pool = [f for _, f in zip(range(60), reader.frames())]

    class Copy:
        def __init__(self, frame: Any) -> None:
            self.image, self.time = frame.image.copy(), frame.time

    source = (Copy(f) for f in itertools.islice(itertools.cycle(pool), frames))
    stats = run_frames(source, lambda packet: None, engine, workers=workers, max_in_flight=2 * workers + 4,
                       label=False)
    return stats.fps


def end_to_end(engine: Any, clip: Path, out: Path, workers: int, encoder: str, quality: int,
               label: bool = True) -> tuple[float, Any]:
    processing = ProcessingSettings(sources=(), runtime=RuntimeSettings(execution_threads=workers))
    options = VideoJob(input=clip, output=out, processing=processing, encoder=encoder, quality=quality,
                       label=label, force=True)
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    result = process_video(options, engine, quiet=True)
    return result.stats.frames / (time.perf_counter() - t0), result.stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--encoder", default="libx264")
    parser.add_argument("--quality", type=int, default=18)
    parser.add_argument("--faces", type=Path, default=REPO.parent / "shared" / "faces")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.getLogger("livecam").setLevel(logging.ERROR)
    w, h = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="livecam-bench-") as tmp:
        folder = Path(tmp)
        clip = make_clip(folder / "in.mp4", frames=args.frames, size=(w, h), fps=30, audio=True,
                         source_image=args.faces / "biden.jpg")
        out = folder / "out.mp4"
        codec_fps, _ = end_to_end(NoEngine(), clip, out, 1, args.encoder, args.quality, label=False)
        rows = []
        for workers in args.workers:
            engine = build_engine(args.faces, workers, folder / "models")
            proc_fps = processing_ceiling(engine, clip, args.frames, workers)
            e2e_fps, stats = end_to_end(engine, clip, out, workers, args.encoder, args.quality)
            ceiling = min(codec_fps, proc_fps)
            rows.append({"workers": workers, "end_to_end_fps": round(e2e_fps, 2),
                         "decode_encode_fps": round(codec_fps, 2), "processing_fps": round(proc_fps, 2),
                         "ratio_to_slower_ceiling": round(e2e_fps / ceiling, 3) if ceiling else None,
                         "frames_with_face": stats.with_faces, "frames": stats.frames})
    report = {"clip": f"{w}x{h} x {args.frames} frames, 30 fps, AAC", "encoder": args.encoder,
              "quality": args.quality, "swapper": "mesh", "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"clip {report['clip']}, {args.encoder} q{args.quality}, mesh swapper")
        print(f"{'workers':>7} {'end-to-end':>11} {'dec+enc':>8} {'process':>8} {'ratio':>6} {'faces':>6}")
        for r in rows:
            print(f"{r['workers']:>7} {r['end_to_end_fps']:>11.2f} {r['decode_encode_fps']:>8.2f} "
                  f"{r['processing_fps']:>8.2f} {r['ratio_to_slower_ceiling']:>6.2f} "
                  f"{r['frames_with_face']:>3}/{r['frames']}")
        print("goal: end-to-end >= 0.70 x the slower ceiling")
    return 0


if __name__ == "__main__":
    sys.exit(main())
