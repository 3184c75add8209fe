"""1 vs 2 cluster workers (and no cluster) on this machine: `livecam video` wall times, medians.

    PYTHONPATH=src python scripts/cluster_bench.py --photos ../shared/faces --runs 3

Runs the real CLI (embedded models, mesh swapper, one execution thread per worker) on a
generated clip, the variants interleaved run by run so that a change in the machine's load hits
all of them alike. Wall time includes starting Ray and each worker's model loading.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.videos import make_clip  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "faces")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--segment-seconds", type=float, default=1.0)
    args = parser.parse_args()
    variants = {"no cluster": [], "cluster, 1 worker": ["--cluster", "local", "--workers", "1"],
                "cluster, 2 workers": ["--cluster", "local", "--workers", "2"]}
    times: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        clip = make_clip(work / "in.mp4", frames=args.frames, size=(320, 240), fps=30,
                         source_image=args.photos / "biden.jpg")
        env = {**os.environ, "LIVECAM_CACHE_DIR": str(work / "cache"), "LIVECAM_OFFLINE": "1",
               "PYTHONPATH": str(ROOT / "src")}
        env.pop("LIVECAM_CLUSTER", None)
        for run in range(args.runs):
            for number, (name, extra) in enumerate(variants.items()):
                out = work / f"out{run}-{number}.mp4"
                started = time.monotonic()
                proc = subprocess.run([sys.executable, "-m", "livecam", "video", str(clip), str(out), "--source",
                                       str(args.photos / "obama.jpg"), "--swap-model", "mesh", "--execution-threads",
                                       "1", "--segment-seconds", str(args.segment_seconds), "--no-c2pa", *extra],
                                      env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise SystemExit(f"{name}: {proc.stderr}")
                times[name].append(time.monotonic() - started)
                print(f"run {run + 1} {name}: {times[name][-1]:.1f} s", flush=True)
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name}: median {median:.1f} s over {len(values)} runs ({args.frames / median:.2f} fps end to end)")


if __name__ == "__main__":
    main()
