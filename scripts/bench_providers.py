#!/usr/bin/env python
"""Per-model latency on each execution provider, measured alternately in one run.

    python scripts/bench_providers.py --models-dir /work/replicas --providers cpu openvino [--runs 5]

Every .onnx file of livecam's catalog found in --models-dir (real files or the replicas of
scripts/make_replicas.py) and the embedded models are opened once per provider through livecam's
own provider options (`runtime/providers.py`); then, round after round, each model runs once on
each provider in turn, on random inputs of its real shape (batch 1, SCRFD at 640). Prints the
median ms per model and provider and the ratio to the first provider. Sessions use ORT's default
thread count, as `livecam image` does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from livecam.models.catalog import CATALOG  # noqa: E402
from livecam.runtime.providers import resolve_providers  # noqa: E402
from livecam.runtime.sessions import get_session, input_dtype  # noqa: E402

EMBEDDED = Path(__file__).resolve().parents[1] / "src" / "livecam" / "models" / "default"


def random_feeds(session: object, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feeds = {}
    for inp in session.get_inputs():  # type: ignore[attr-defined]
        shape = [d if isinstance(d, int) else (640 if i >= 2 else 1) for i, d in enumerate(inp.shape)]
        feeds[inp.name] = rng.standard_normal(shape).astype(input_dtype(inp.type))
    return feeds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, required=True)
    parser.add_argument("--providers", nargs="+", default=["cpu"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()

    files = {}
    for name, spec in CATALOG.items():
        folder = EMBEDDED if spec.bundled else args.models_dir
        if (folder / spec.file_name).is_file():
            files[name] = folder / spec.file_name
    if not files:
        print(f"no catalog model in {args.models_dir}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    sessions = {(m, p): get_session(path, resolve_providers([p])) for m, path in files.items()
                for p in args.providers}
    feeds = {m: random_feeds(sessions[(m, args.providers[0])], rng) for m in files}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in sessions}
    for round_index in range(args.warmup + args.runs):
        for m in files:
            for p in args.providers:
                t0 = time.perf_counter()
                sessions[(m, p)].run(None, feeds[m])
                if round_index >= args.warmup:
                    times[(m, p)].append((time.perf_counter() - t0) * 1000.0)
    base = args.providers[0]
    print(f"median ms of {args.runs} runs after {args.warmup} warm-up, providers alternating; ratio = {base} / provider")
    print(f"{'model':<24}" + "".join(f"{p:>12}" for p in args.providers) + "".join(
        f"{'x ' + p:>14}" for p in args.providers[1:]))
    for m in files:
        medians = [statistics.median(times[(m, p)]) for p in args.providers]
        print(f"{m:<24}" + "".join(f"{v:>12.1f}" for v in medians)
              + "".join(f"{medians[0] / v:>14.2f}" for v in medians[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
