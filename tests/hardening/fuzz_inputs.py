#!/usr/bin/env python
"""Fuzz `livecam image` (and optionally `livecam video`) with many more seeded byte mutations than
the suite runs: each case must succeed or fail with exit 2 and one line on stderr, never a
traceback, never a partial or temporary file. Runs in-process (click's CliRunner).

    python -m tests.hardening.fuzz_inputs               # 1,000 image cases per role, seed 7
    python -m tests.hardening.fuzz_inputs --cases 5000 --seed 3 --videos 200

(from the repository root, with the dev extra installed; pytest does not collect it)

Prints a summary line per role and every bad case; exits 1 if any case misbehaved.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from livecam.cli import cli
from tests.hardening import fuzz


def fuzz_images(faces: Path, work: Path, cases: int, seed: int) -> int:
    import cv2

    good = work / "good.png"
    cv2.imwrite(str(good), fuzz.small_face(faces, "biden.jpg", 200))
    seeds = fuzz.seed_cases(faces)
    runner = CliRunner()
    bad = 0
    for role, role_seed in (("target", seed), ("source", seed + 1)):
        started = time.perf_counter()
        codes: Counter[int] = Counter()
        batch = [*fuzz.special_cases(faces), *fuzz.mutated_cases(seeds, cases, role_seed)]
        for case in batch:
            outcome = fuzz.run_case(runner, cli, case, role, good, work / role)
            codes[outcome.exit_code] += 1
            if outcome.problem:
                bad += 1
                print(f"BAD {role} {case.name}: {outcome.problem}")
        print(f"images as {role}: {len(batch)} cases in {time.perf_counter() - started:.0f} s, exit codes "
              f"{dict(sorted(codes.items()))}")
    return bad


def fuzz_videos(faces: Path, work: Path, cases: int, seed: int) -> int:
    from tests.videos import make_animation, make_clip, make_flat_clip, make_interlaced_clip

    rng = random.Random(seed)
    face = work / "face.png"
    import cv2

    cv2.imwrite(str(face), fuzz.small_face(faces, "biden.jpg", 200))
    seeds = [make_clip(work / "a.mp4", frames=30, size=(96, 64)),
             make_clip(work / "b.mkv", frames=30, size=(96, 64)),
             make_clip(work / "c.webm", frames=20, size=(96, 64), codec="libvpx-vp9", audio_codec="libopus",
                       audio_rate=48000),
             # full range (MJPEG in AVI, yuv420p flagged full), interlaced, animated images
             make_flat_clip(work / "d.avi", luma=100, pix_fmt="yuvj420p", codec="mjpeg", frames=10, size=(96, 64)),
             make_flat_clip(work / "e.mp4", luma=100, colour=(2, 1, 1, 1), frames=10, size=(96, 64)),
             make_interlaced_clip(work / "f.mkv", frames=10),
             make_animation(work / "g.gif"), make_animation(work / "h.webp")]
    runner = CliRunner()
    bad = 0
    codes: Counter[int] = Counter()
    started = time.perf_counter()
    for i in range(cases):
        base = seeds[i % len(seeds)]
        what, data = rng.choice(fuzz.MUTATORS)(rng, base.read_bytes())
        src = work / f"v{base.suffix}"
        src.write_bytes(data)
        out_dir = work / "vout"
        out_dir.mkdir(exist_ok=True)
        out = out_dir / "out.mp4"
        result, stderr = fuzz.invoke(runner, cli, ["video", str(src), str(out), "-s", str(face), "--swap-model", "mesh"])
        codes[result.exit_code] += 1
        files = sorted(p.name for p in out_dir.iterdir())
        problem = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            problem = f"exception escaped: {result.exception!r}"
        elif "Traceback" in stderr or "internal error" in stderr or result.exit_code not in (0, 2):
            problem = f"exit {result.exit_code}: {stderr.strip()[-300:]}"
        elif result.exit_code == 0 and files != ["out.mp4"]:
            problem = f"exit 0 but {files}"
        elif result.exit_code == 2 and (files or not stderr.strip().splitlines()[-1].startswith("livecam: error: ")):
            problem = f"failure left {files} or no error line: {stderr.strip()[-300:]}"
        if problem:
            bad += 1
            print(f"BAD video {i} {base.name} {what}: {problem}")
        for leftover in out_dir.iterdir():
            leftover.unlink()
    print(f"videos: {cases} cases in {time.perf_counter() - started:.0f} s, exit codes {dict(sorted(codes.items()))}")
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="mutated images per role")
    parser.add_argument("--videos", type=int, default=0, help="mutated videos")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--faces", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "faces")
    args = parser.parse_args()
    if not (args.faces / "obama.jpg").is_file():
        print(f"no photos in {args.faces}; pass --faces FOLDER")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ.update(LIVECAM_MODELS_DIR=str(work / "models"), LIVECAM_CACHE_DIR=str(work / "cache"),
                          LIVECAM_OFFLINE="1")
        bad = fuzz_images(args.faces, work, args.cases, args.seed)
        if args.videos:
            bad += fuzz_videos(args.faces, work, args.videos, args.seed)
    print(f"{bad} bad cases")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
