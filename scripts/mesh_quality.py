#!/usr/bin/env python
"""The mesh swap's known defects on the real photos, measured in process (no assertion).

    python scripts/mesh_quality.py [--faces-dir ../shared/faces] [--save-dir DIR]

Each figure is the same measure the tests in tests/processors/test_mesh_quality.py use (imported
from there), so a before/after pair is two runs of this script on two commits:
  upper lip      SOURCE on TARGET: the skin between the outer upper lip contour and that contour
                 moved up 0.07 face sizes (off the lips, above the corners' line): mean Lab L of
                 the output minus the target's own there ("L+"), and the mean structure-tensor
                 coherence of L there (Sobel, Gaussian 2 px; 0 isotropic, 1 one streak direction)
                 of the output and the target ("streaks"); and that skin against the cheeks
                 beside the nose (discs of 0.05 face sizes at FaceMesh 203/423, 205/425, on the
                 skin): its mean L and mean chroma minus their medians, output / target
                 ("band"; a grey, moustache-like band is lower in both).
  nose wings     SOURCE on TARGET: per nose wing (image left, right), the nose-wing triangles'
                 mean L minus the median L of the skin round them (0.06 face sizes), output
                 minus target ("lift"), and the mean white top-hat (5 px disc) of L over them
                 ("light lines").
  turned cheeks  obama.jpg / obama2.jpg on group6.jpg: how much lighter the two most turned
                 faces' cheeks come out than their own (cheek_lightness).
  proportions    the proportions test's figure (tests/processors/test_mesh_identity.py): obama.jpg
                 onto biden.jpg, FaceMesh rerun, the inner-face mismatch against 0.85 x Biden's own.
Identity is scripts/eval_identity.py's (dlib), run separately.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from livecam.faces import mesh_indices  # noqa: E402
from livecam.faces.face import Face  # noqa: E402
from livecam.processors.mesh.swapper import MeshSwapper  # noqa: E402
from livecam.settings import SwapSettings  # noqa: E402
from tests.processors import test_mesh_quality as quality  # noqa: E402

LIP_PAIRS = (("obama", "biden"), ("obama2", "biden"), ("biden", "obama"), ("biden", "obama2"),
             ("obama", "astronaut"), ("obama2", "astronaut"))
NOSE_PAIRS = (("obama2", "biden"), ("obama2", "astronaut"), ("obama2", "obama"),
              ("biden", "obama2"), ("obama", "biden"))


# The nose wings' mesh triangles (image left, right), as test_mesh_quality has them.
NOSE_WINGS = (quality._OTHER_WING, quality._NOSE_WING)


def mean_lightness(image: np.ndarray, region: np.ndarray) -> float:
    return float(quality.lightness_chroma(image, region)[0].mean())


def wing_mask(face: Face, shape: tuple[int, int], wing: np.ndarray) -> np.ndarray:
    inside = np.zeros(shape, np.uint8)
    for tri in wing:
        cv2.fillConvexPoly(inside, np.round(face.landmarks[tri] - 0.5).astype(np.int32), 1)
    return inside > 0


def wing_lift(image: np.ndarray, face: Face, wing: np.ndarray) -> float:
    """test_mesh_quality's nose_wing_lift on either wing."""
    size = float(np.ptp(face.landmarks[mesh_indices.FACE_OVAL], axis=0).max())
    inside = wing_mask(face, image.shape[:2], wing).astype(np.uint8)
    grow = int(0.06 * size) | 1
    ring = (cv2.dilate(inside, np.ones((grow, grow), np.uint8)) > 0) & (inside == 0)
    lightness = cv2.cvtColor(image, cv2.COLOR_BGR2LAB).astype(np.float32)[..., 0]
    return float(lightness[inside > 0].mean() - np.median(lightness[ring]))


def wing_tophat(image: np.ndarray, face: Face, wing: np.ndarray) -> float:
    """Mean white top-hat (5 px disc) of L over a nose wing's triangles: thin light lines."""
    lightness = cv2.cvtColor(image, cv2.COLOR_BGR2LAB)[..., 0]
    tophat = cv2.morphologyEx(lightness, cv2.MORPH_TOPHAT,
                              cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5)))
    return float(tophat[wing_mask(face, image.shape[:2], wing)].astype(np.float64).mean())


def most_turned(faces: list[Face]) -> list[Face]:
    """group6.jpg's two most turned faces, as the turned-cheeks test picks them."""
    return [min(faces, key=lambda f: abs(float(f.bbox[0]) - x) + abs(float(f.bbox[1]) - y))
            for x, y in ((266, 165), (866, 70))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faces-dir", type=Path, default=REPO.parent / "shared" / "faces")
    parser.add_argument("--save-dir", type=Path, default=None, help="write each output here")
    parser.add_argument("--only", default="lip,nose,cheeks,proportions")
    args = parser.parse_args()
    only = set(args.only.split(","))
    analysed = quality.analyser()

    def photo(name: str) -> Path:
        return args.faces_dir / (name + (".png" if name == "astronaut" else ".jpg"))

    def swapped(source: str, target: str) -> tuple[np.ndarray, np.ndarray, Face]:
        out, tgt, face = quality.swap(analysed, photo(source), photo(target))
        if args.save_dir is not None:
            args.save_dir.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(args.save_dir / f"{source}_on_{target}.png"), out)
        return out, tgt, face

    if "lip" in only:
        print("upper lip: pair, L+ (output - target), streaks output / target, band against "
              "the cheeks: L, chroma output / target")
        for source, target in LIP_PAIRS:
            out, tgt, face = swapped(source, target)
            region = quality.upper_lip_skin(face, tgt.shape[:2])
            lift = mean_lightness(out, region) - mean_lightness(tgt, region)
            (out_l, out_c), (tgt_l, tgt_c) = (quality.upper_lip_band(image, face)
                                              for image in (out, tgt))
            print(f"  {source:>6} on {target:<9} {lift:+6.1f}   "
                  f"{quality.coherence(out, region):.3f} / {quality.coherence(tgt, region):.3f}   "
                  f"{out_l:+6.1f} {out_c:+5.1f} / {tgt_l:+6.1f} {tgt_c:+5.1f}")
    if "nose" in only:
        print("nose wings: pair, lift output - target (left, right), light lines output / target "
              "(left, right), shine on the left wing output / target")
        for source, target in NOSE_PAIRS:
            out, tgt, face = swapped(source, target)
            lifts, lines = [], []
            for side in NOSE_WINGS:
                lifts.append(wing_lift(out, face, side) - wing_lift(tgt, face, side))
                lines.append((wing_tophat(out, face, side), wing_tophat(tgt, face, side)))
            print(f"  {source:>6} on {target:<9} {lifts[0]:+6.1f} {lifts[1]:+6.1f}   "
                  + "  ".join(f"{o:.2f} / {t:.2f}" for o, t in lines)
                  + f"   {quality.wing_light(out, face):.1%} / {quality.wing_light(tgt, face):.1%}")
    if "cheeks" in only:
        print("turned cheeks (group6.jpg's two most turned faces): source, lighter by")
        for source in ("obama.jpg", "obama2.jpg"):
            out, group, faces = quality.obama_on_group6(args.faces_dir, MeshSwapper(SwapSettings()),
                                                        source=source)
            turned = most_turned(faces)
            excess = [quality.cheek_lightness(out, f) - quality.cheek_lightness(group, f)
                      for f in turned]
            everyone = [quality.cheek_lightness(out, f) - quality.cheek_lightness(group, f)
                        for f in sorted(faces, key=lambda f: float(f.bbox[0]))]
            print(f"  {source:<10} turned {excess[0]:+.1f} {excess[1]:+.1f};  all six (left to right) "
                  + " ".join(f"{e:+.1f}" for e in everyone))
    if "proportions" in only:
        print(f"proportions (obama.jpg onto biden.jpg): {proportions(args.faces_dir):.4f}")


def proportions(faces_dir: Path) -> float:
    """The proportions test's mismatch at shape strength 1 (its bound: 0.85 x the target's own)."""
    from tests.processors.test_mesh_identity import proportion_mismatches

    results, before = proportion_mismatches(faces_dir, (1.0,))
    print(f"  (bound {0.85 * before:.4f})")
    return results[1.0]


if __name__ == "__main__":
    main()
