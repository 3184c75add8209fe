#!/usr/bin/env python
"""Soak the live pipeline: a fake camera, --no-realtime, the real mesh-swapper engine, every frame
analysed by the embedded detector and FaceMesh (unlike the suite's 2,000-frame version, which
replays the analysis). Checks that RSS at the end is within 5% of RSS after the first 500 frames
and that the process's threads and open file descriptors are back where they started.

    python -m tests.hardening.soak_live         # 10,000 frames, 240x180
    python -m tests.hardening.soak_live --frames 3000 --size 640x480 --workers 2 --replay

(from the repository root, with the dev extra installed; pytest does not collect it)

Prints one line of figures; exits 1 when a check fails. Needs psutil (in the dev extras).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from tests.hardening.soak import run_soak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10_000)
    parser.add_argument("--checkpoint", type=int, default=500)
    parser.add_argument("--size", default="240x180", help="WIDTHxHEIGHT of the fake camera")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--replay", action="store_true", help="analyse each distinct frame once (faster)")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("LIVECAM_CACHE_DIR", str(Path(tmp) / "cache"))
        result = run_soak(args.frames, checkpoint=args.checkpoint, replay=args.replay, size=(width, height),
                          workers=args.workers, models_dir=Path(tmp) / "models")
    print(result.line())
    problems = []
    if not result.swapped_first_frame:
        problems.append("the first frame was not swapped")
    if result.frames != args.frames:
        problems.append(f"{result.frames} of {args.frames} frames came out")
    if result.rss_end > result.rss_checkpoint * 1.05:
        problems.append(f"RSS grew {100 * result.rss_growth:.1f}% after the checkpoint")
    if result.threads_after != result.threads_before:
        problems.append(f"threads {result.threads_before} -> {result.threads_after}")
    if result.fds_after != result.fds_before:
        problems.append(f"open fds {result.fds_before} -> {result.fds_after}")
    for problem in problems:
        print("FAIL:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
