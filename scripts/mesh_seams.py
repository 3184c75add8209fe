#!/usr/bin/env python
"""The mesh swap's seam and cheeks on the real photos, each swapped onto each other one (no
assertion; the measures are tests/processors/test_mesh_seams.py's).

    python scripts/mesh_seams.py [--faces-dir ../shared/faces] [--save-dir DIR] [--timing N]

Per pair: seam = per sector round the face, the output's mean Lab on the skin just inside the
oval minus just outside, less the target's own step (Lab distance, and its L part); cheeks =
how much lighter the output's cheeks are than the target's; upper lip = how much lighter
the skin over the upper lip is than the target's; lip rim = the same for the skin right along
the upper lip, each on its own FaceMesh fit. group6.jpg's six faces are
targets of obama.jpg too. Medians of their sizes close each
column. --timing N: the median of N swaps per
pair instead (ms per face).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from livecam.faces.source import SourceIdentity  # noqa: E402
from livecam.frame import FramePacket  # noqa: E402
from livecam.processors.mesh.swapper import MeshSwapper  # noqa: E402
from livecam.settings import SwapSettings  # noqa: E402
from tests.processors import test_mesh_seams as seams  # noqa: E402
from tests.processors.test_mesh_identity import embedded_analysis  # noqa: E402
from tests.processors.test_mesh_quality import analyser, obama_on_group6  # noqa: E402


def timing(analysed: seams.Any, faces_dir: Path, runs: int) -> None:
    """The median CPU time of `runs` swaps per pair, OpenCV on one thread (the machine's other
    load moves wall-clock figures by a third)."""
    cv2.setNumThreads(1)
    per_face = []
    for source in seams.PHOTOS:
        for target in seams.PHOTOS:
            if source == target:
                continue
            src_image, src_face = analysed(faces_dir / source)
            tgt_image, tgt_face = analysed(faces_dir / target)
            swapper = MeshSwapper(SwapSettings())
            swapper.prepare([SourceIdentity((faces_dir / source,), src_image, src_face, None)])
            times = []
            for _ in range(runs):
                packet = FramePacket(index=0, image=tgt_image.copy(), faces=[tgt_face])
                start = time.process_time()
                swapper.process(packet)
                times.append((time.process_time() - start) * 1000.0)
            per_face.append(statistics.median(times))
            print(f"  {source:>13} on {target:<13} {per_face[-1]:6.1f} ms")
    print(f"  median over pairs {statistics.median(per_face):.1f} ms, total {sum(per_face):.1f} ms")


def summary(rows: list[tuple[float, ...]]) -> None:
    """The medians of each column's size (a cheek or seam off either way is off)."""
    print("  median of sizes " + " ".join(f"{v:.2f}" for v in np.median(np.abs(np.array(rows)), axis=0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faces-dir", type=Path, default=REPO.parent / "shared" / "faces")
    parser.add_argument("--save-dir", type=Path, default=None, help="write each output here")
    parser.add_argument("--timing", type=int, default=0, metavar="N")
    args = parser.parse_args()
    analysed = analyser()
    if args.timing:
        timing(analysed, args.faces_dir, args.timing)
        return
    print("source on target: seam Lab distance, seam L, cheeks L, upper lip L, lip rim L "
          "(output - target)")
    _, refit = embedded_analysis()
    rows = []
    for source in seams.PHOTOS:
        for target in seams.PHOTOS:
            if source == target:
                continue
            out, tgt, face = seams.swap(analysed, args.faces_dir / source, args.faces_dir / target)
            if args.save_dir is not None:
                args.save_dir.mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(args.save_dir / f"{Path(source).stem}_on_{Path(target).stem}.png"), out)
            distance, lightness = seams.seam_difference(out, tgt, face)
            rows.append((distance, lightness, seams.cheek_difference(out, tgt, face),
                         seams.upper_lip_difference(out, tgt, face),
                         seams.lip_rim_difference(out, tgt, face, refit)))
            print(f"  {source:>13} on {target:<13} " + " ".join(f"{v:+6.2f}" for v in rows[-1]))
    summary(rows)
    out, group, faces = obama_on_group6(args.faces_dir, MeshSwapper(SwapSettings()))
    group_rows = []
    for face in sorted(faces, key=lambda f: float(f.bbox[0])):
        distance, lightness = seams.seam_difference(out, group, face)
        group_rows.append((distance, lightness, seams.cheek_difference(out, group, face),
                           seams.upper_lip_difference(out, group, face),
                           seams.lip_rim_difference(out, group, face, refit)))
    print("  obama.jpg on group6.jpg (left to right): "
          + "; ".join(" ".join(f"{v:+.2f}" for v in r) for r in group_rows))
    summary(group_rows)


if __name__ == "__main__":
    main()
