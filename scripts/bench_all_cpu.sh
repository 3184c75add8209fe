#!/usr/bin/env bash
# Every CPU benchmark of BENCHMARKS.md, one after another, into OUT (default bench-out/).
# REPLICAS and TRIVIAL point at the folders scripts/make_replicas.py wrote (full and --trivial).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}; REPLICAS=${REPLICAS:-/work/replicas}; TRIVIAL=${TRIVIAL:-/work/replicas_trivial}
PY=${PYTHON:-python}
mkdir -p "$OUT"
uptime > "$OUT/uptime_start.txt"
$PY scripts/bench_faces.py --runs 100 --threads 1 > "$OUT/faces.txt" 2>&1
$PY scripts/bench_swap.py --runs 150 > "$OUT/swap.txt" 2>&1
$PY scripts/bench_enhance.py --runs 200 --clock cpu --threads 1 > "$OUT/enhance.txt" 2>&1
$PY scripts/bench_live.py --frames 300 > "$OUT/live.txt" 2>&1
$PY -m livecam --offline bench --source ../shared/faces/obama.jpg --frames 300 --resolution 640x480 \
    > "$OUT/livecam_bench_live.txt" 2>&1
if [ -d "$REPLICAS" ] && [ -d "$TRIVIAL" ]; then
    for extra in "" --enhance; do
        $PY scripts/bench_baseline.py --models "$REPLICAS" --trivial-models "$TRIVIAL" --parts overhead \
            --overhead-frames 20 --rounds 2 $extra > "$OUT/baseline_overhead${extra}.txt" 2>&1
    done
fi
$PY scripts/bench_video.py --frames 300 --workers 1 2 4 > "$OUT/video.txt" 2>&1
uptime > "$OUT/uptime_end.txt"
