#!/bin/bash
# Live detection cost (issue 16): `livecam bench` in live mode, alternating in one run
#   short  - a checkout from before the change (live = BlazeFace short range), given as OLD
#   full   - this checkout (full range on every frame, as `livecam video`)
#   every2 - this checkout with detection on every 2nd frame (the governor's first detection
#            step: faces carried and re-fitted with FaceMesh between)
# on the generated default clip (one portrait) and on a still clip of the group photo cropped to
# 1280x720 (six faces 95-135 px wide, --many-faces). Usage:
#   scripts/bench_live_detector.sh OLD_CHECKOUT OUT_FOLDER [ROUNDS]
set -eu
OLD=$1; OUT=$2; ROUNDS=${3:-2}
NEW=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
FACES=${FACES:-$NEW/../shared/faces}
mkdir -p "$OUT"
export LIVECAM_OFFLINE=1 LIVECAM_MODELS_DIR=$OUT/models LIVECAM_CACHE_DIR=$OUT/cache
PYTHONPATH=$NEW/src $PY - "$FACES/group6.jpg" "$OUT/group6_720.mp4" <<'PYEOF'
import sys
from fractions import Fraction
from pathlib import Path
from livecam.media.images import read_image
from livecam.media.video_writer import OutputSpec, VideoWriter
group = read_image(Path(sys.argv[1]))
top = (group.shape[0] - 720) // 2
frame = group[top:top + 720, :1280].copy()
rate = Fraction(30)
writer = VideoWriter(OutputSpec(path=Path(sys.argv[2]), format="mp4", width=1280, height=720, rate=rate,
                                time_base=1 / rate, quality=18))
for i in range(70):
    writer.write(frame.copy(), i / 30)
writer.close()
PYEOF
EVERY2='import dataclasses as d, livecam.commands.bench as b
run = b._run_bench
b._run_bench = lambda job: run(d.replace(job, processing=d.replace(job.processing, analysis=d.replace(job.processing.analysis, detect_every=2))))
from livecam.cli import main; main()'
for round in $(seq "$ROUNDS"); do
  for clip in default group; do
    args=()
    [ "$clip" = group ] && args=(--input "$OUT/group6_720.mp4" --many-faces -s "$FACES/obama.jpg")
    (cd "$OLD" && PYTHONPATH=$OLD/src $PY -m livecam bench --frames 60 --json "${args[@]}" > "$OUT/${round}_${clip}_short.json")
    (cd "$NEW" && PYTHONPATH=$NEW/src $PY -m livecam bench --frames 60 --json "${args[@]}" > "$OUT/${round}_${clip}_full.json")
    (cd "$NEW" && PYTHONPATH=$NEW/src $PY -c "$EVERY2" bench --frames 60 --json "${args[@]}" > "$OUT/${round}_${clip}_every2.json")
  done
done
