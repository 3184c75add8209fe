#!/usr/bin/env python
"""Identity transfer of the mesh swapper, judged by an independent face recogniser.

    python scripts/eval_identity.py [--faces-dir ../shared/faces]
        [--recogniser-python .venv-identity/bin/python] [--strength 0,0.5,1]
        [--pairs obama:biden,biden:obama] [--json FILE] [--save-dir DIR] [-v]

Every face of the photos in --faces-dir (obama, obama2, biden, astronaut and the six faces of
group6) is a target; every one except obama2 is a source. For each (source, target) pair of two
different people (or only the --pairs given, as SOURCE:TARGET labels) the source is swapped onto
that one target face with livecam's mesh swapper (landmarks from the shipped BlazeFace + FaceMesh
models, default swap settings), and the result's face is compared by dlib's ResNet face
recogniser (dlib with the model files of the face_recognition_models package, run in its own
venv: it is never a livecam dependency) with:
  d_source  the distance to the source person: to obama2.jpg (a held-out photo) when the source
            is obama.jpg, otherwise to the source photo itself (marked '*': not held out);
  d_target  the distance to the target face before the swap;
  d_before  the distance from the untouched target face to that same source reference: what
            d_source would be if the swap did nothing (the baseline, measured in the same run);
  transfer  d_target - d_source (higher is better; dlib calls < 0.6 "same person");
  gain      d_before - d_source: how much nearer the source person the swap brought the face.
Prints one table (with -v: one per --strength), then per strength: the medians, the mean
transfer, the median over the held-out pairs, how many results dlib calls the source person and
the target person (< 0.6), and how many pairs transfer better/worse than at the first strength.
--json writes every pair's figures (tests/processors/test_mesh_identity_dlib.py reads them).
--strength is the mesh swapper's shape_strength (how far the target's inner face geometry moves
towards the source's; 0 is texture only); without it the swapper's default is used. No
assertion: this is a measurement. All 80 pairs take about a minute on 2 cores.

The recogniser venv needs only `dlib-bin` (or `dlib`) and `face_recognition_models==0.3.0`
(.ci/identity-requirements.txt; `bash .ci/run` makes it as .venv-identity).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from livecam.faces.face import Face
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.processors.mesh.swapper import MeshSwapper
from livecam.settings import SwapSettings

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = REPO / "src" / "livecam" / "models" / "default"
SAME_PERSON = 0.6  # dlib's threshold

# Runs in the recogniser's venv. Reads [[png, [x1, y1, x2, y2]], ...] on stdin, writes one 128-d
# descriptor per image. The face is found by dlib's HOG detector (input upsampled once; the face
# nearest the hinted box); the hint box is used only when dlib finds none. Landmarks: dlib's
# 68-point predictor; one jitter. face_recognition_models is only a folder of model files here:
# its __init__ imports pkg_resources (setuptools), which a Python 3.12+ venv does not have.
WORKER = r"""
import importlib.util, json, sys
from pathlib import Path
import dlib
spec = importlib.util.find_spec("face_recognition_models")
models = Path(list(spec.submodule_search_locations)[0]) / "models"
detect = dlib.get_frontal_face_detector()
shape_of = dlib.shape_predictor(str(models / "shape_predictor_68_face_landmarks.dat"))
describe = dlib.face_recognition_model_v1(str(models / "dlib_face_recognition_resnet_model_v1.dat"))
out = []
for path, (x1, y1, x2, y2) in json.load(sys.stdin):
    img = dlib.load_rgb_image(path)
    found = list(detect(img, 1))
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    def off(r):
        return ((r.left() + r.right()) / 2 - cx) ** 2 + ((r.top() + r.bottom()) / 2 - cy) ** 2
    box = min(found, key=off) if found else dlib.rectangle(int(x1), int(y1), int(x2), int(y2))
    vec = describe.compute_face_descriptor(img, shape_of(img, box), 1)
    out.append({"enc": list(vec), "detected": bool(found)})
json.dump(out, sys.stdout)
"""


@dataclass(frozen=True)
class Entry:
    label: str  # photo name, with the face's index for group photos
    person: str  # same person, same string
    path: Path
    image: np.ndarray
    face: Face


def analyser():
    from livecam.faces.blazeface import BlazeFaceDetector
    from livecam.faces.facemesh import FaceMesh
    from livecam.runtime.providers import resolve_providers
    from livecam.runtime.sessions import get_session

    providers = resolve_providers(("cpu",))
    detector = BlazeFaceDetector(
        get_session(DEFAULT_MODELS / "blazeface_full_range.onnx", providers), variant="full")
    mesh = FaceMesh(get_session(DEFAULT_MODELS / "face_landmark.onnx", providers))

    def run(image: np.ndarray) -> list[Face]:
        faces = [f for f in mesh.refine(image, detector.detect(image)) if f.landmarks is not None]
        return sorted(faces, key=lambda f: float(f.bbox[0]))

    return run


def load_entries(faces_dir: Path) -> list[Entry]:
    analyse = analyser()
    entries: list[Entry] = []
    for name in ("obama.jpg", "obama2.jpg", "biden.jpg", "astronaut.png", "group6.jpg"):
        path = faces_dir / name
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if image is None:
            sys.exit(f"eval_identity: cannot read {path}")
        faces = analyse(image)
        stem = path.stem
        if stem.startswith("group"):
            for i, face in enumerate(faces):
                entries.append(Entry(f"{stem}#{i}", f"{stem}#{i}", path, image, face))
        elif faces:
            face = max(faces, key=lambda f: f.area)
            person = "obama" if stem.startswith("obama") else stem
            entries.append(Entry(stem, person, path, image, face))
    return entries


def face_crop(image: np.ndarray, face: Face) -> tuple[np.ndarray, list[float]]:
    """The face with a generous margin, rescaled so that it is about 200 px wide (dlib's
    detector and recogniser like faces of 80-300 px), and the face box in the crop."""
    x1, y1, x2, y2 = face.bbox.astype(float)
    w, h = x2 - x1, y2 - y1
    m = 0.6 * max(w, h)
    H, W = image.shape[:2]
    cx1, cy1 = int(max(x1 - m, 0)), int(max(y1 - m, 0))
    cx2, cy2 = int(min(x2 + m, W)), int(min(y2 + m, H))
    crop = image[cy1:cy2, cx1:cx2]
    scale = 200.0 / max(w, 1.0)
    crop = cv2.resize(crop, None, fx=scale, fy=scale,
                      interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
    box = [(x1 - cx1) * scale, (y1 - cy1) * scale, (x2 - cx1) * scale, (y2 - cy1) * scale]
    return crop, box


def encode(python: str, items: list[tuple[Path, list[float]]]) -> list[dict]:
    if not Path(python).is_file():
        sys.exit(f"eval_identity: no recogniser venv at {python}: python -m venv .venv-identity; "
                 ".venv-identity/bin/pip install -r .ci/identity-requirements.txt")
    payload = json.dumps([[str(p), b] for p, b in items])
    done = subprocess.run([python, "-c", WORKER], input=payload, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"eval_identity: the recogniser failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def swap(entry_src: Entry, entry_tgt: Entry, strength: float | None) -> np.ndarray:
    kwargs = {} if strength is None else {"shape_strength": strength}
    swapper = MeshSwapper(SwapSettings(), **kwargs)
    swapper.prepare([SourceIdentity((entry_src.path,), entry_src.image, entry_src.face, None)])
    packet = FramePacket(index=0, image=entry_tgt.image.copy(), faces=[entry_tgt.face])
    return swapper.process(packet).image


def choose_pairs(entries: list[Entry], wanted: str | None) -> list[tuple[Entry, Entry]]:
    """Every (source, target) of two different people, or the SOURCE:TARGET labels asked for."""
    sources = [e for e in entries if e.label != "obama2"]
    every = [(s, t) for s in sources for t in entries if s.person != t.person]
    if wanted is None:
        return every
    by_name = {f"{s.label}:{t.label}": (s, t) for s, t in every}
    names = [item.strip() for item in wanted.split(",")]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        sys.exit(f"eval_identity: no pair {unknown[0]!r} of two people; faces: "
                 f"{', '.join(e.label for e in entries)}")
    return [by_name[n] for n in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faces-dir", type=Path, default=REPO.parent / "shared" / "faces")
    parser.add_argument("--recogniser-python", default=str(REPO / ".venv-identity" / "bin" / "python"))
    parser.add_argument("--strength", default=None,
                        help="comma-separated shape_strength values (default: the swapper's)")
    parser.add_argument("--pairs", default=None,
                        help="comma-separated SOURCE:TARGET face labels (default: every pair)")
    parser.add_argument("--json", type=Path, default=None, help="write every pair's figures here")
    parser.add_argument("--save-dir", type=Path, default=None, help="keep the result crops here")
    parser.add_argument("-v", "--verbose", action="store_true", help="a table per strength")
    args = parser.parse_args()
    strengths: list[float | None] = (
        [None] if args.strength is None else [float(s) for s in args.strength.split(",")])

    entries = load_entries(args.faces_dir)
    print(f"faces: {', '.join(e.label for e in entries)}")
    by_label = {e.label: e for e in entries}
    pairs = choose_pairs(entries, args.pairs)
    # Only the faces the pairs are judged against are encoded (obama2 judges obama's swaps).
    used = {e.label for pair in pairs for e in pair}
    if "obama" in used and "obama2" in by_label:
        used.add("obama2")
    refs_needed = [e for e in entries if e.label in used]

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.save_dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        items: list[tuple[Path, list[float]]] = []
        for e in refs_needed:
            crop, box = face_crop(e.image, e.face)
            path = folder / f"orig_{e.label.replace('#', '_')}.png"
            cv2.imwrite(str(path), crop)
            items.append((path, box))
        for k, strength in enumerate(strengths):
            for s, t in pairs:
                crop, box = face_crop(swap(s, t, strength), t.face)
                tag = f"s{k}_{s.label}_on_{t.label}".replace("#", "_")
                path = folder / f"{tag}.png"
                cv2.imwrite(str(path), crop)
                items.append((path, box))
        codes = encode(args.recogniser_python, items)

    refs = {e.label: codes[i] for i, e in enumerate(refs_needed)}
    missing = [label for label, c in refs.items() if c["enc"] is None]
    if missing:
        sys.exit(f"eval_identity: the recogniser found no face in {missing}")

    def dist(a: dict, b: dict) -> float:
        return float(np.linalg.norm(np.asarray(a["enc"]) - np.asarray(b["enc"])))

    summary = []
    report = []
    first: list[float | None] = []  # transfer per pair at the first strength, to compare with
    pos = len(refs_needed)
    for strength in strengths:
        rows = []
        for s, t in pairs:
            res = codes[pos]
            pos += 1
            held_out = s.label == "obama" and "obama2" in by_label
            ref = refs["obama2" if held_out else s.label]
            d_before = dist(refs[t.label], ref)
            if res["enc"] is None:
                rows.append((s.label, t.label, None, None, d_before, held_out, False))
                continue
            rows.append((s.label, t.label, dist(res, ref), dist(res, refs[t.label]), d_before,
                         held_out, res["detected"]))
        name = "default" if strength is None else f"{strength:g}"
        report += [{"strength": strength, "source": sl, "target": tl, "d_source": ds,
                    "d_target": dt, "d_before": db, "held_out": ho, "detected": det}
                   for sl, tl, ds, dt, db, ho, det in rows]
        if args.verbose or len(strengths) == 1:
            print(f"\nshape_strength {name}")
            print(f"{'source':<11} {'target':<11} {'d_source':>8} {'d_target':>8} {'transfer':>8} "
                  f"{'d_before':>8} {'gain':>6}")
            for sl, tl, ds, dt, db, ho, det in rows:
                if ds is None:
                    print(f"{sl:<11} {tl:<11} {'no face found by the recogniser':>26}")
                    continue
                mark = "" if ho else "*"
                hint = "" if det else "  (dlib did not detect it; box from livecam)"
                print(f"{sl:<11} {tl:<11} {ds:7.3f}{mark:1} {dt:8.3f} {dt - ds:8.3f} {db:8.3f} "
                      f"{db - ds:6.3f}{hint}")
        ok = [r for r in rows if r[2] is not None]
        med = (statistics.median(r[2] for r in ok), statistics.median(r[3] for r in ok),
               statistics.median(r[3] - r[2] for r in ok),
               statistics.fmean(r[3] - r[2] for r in ok),
               statistics.median(r[4] - r[2] for r in ok))
        held = [r[3] - r[2] for r in ok if r[5]]
        transfer = [None if r[2] is None else r[3] - r[2] for r in rows]
        if not first:
            first = transfer
        pairs_both = [(a, b) for a, b in zip(transfer, first) if a is not None and b is not None]
        better = (sum(a > b + 1e-9 for a, b in pairs_both),
                  sum(a < b - 1e-9 for a, b in pairs_both))
        summary.append((name, len(ok), len(rows), med,
                        statistics.median(held) if held else float("nan"),
                        sum(r[2] < SAME_PERSON for r in ok),
                        sum(r[3] < SAME_PERSON for r in ok),
                        sum(r[2] < r[4] for r in ok), better))
    print(f"\n{'strength':>8} {'pairs':>7} {'med d_src':>9} {'med d_tgt':>9} {'med transfer':>12} "
          f"{'mean':>6} {'held-out':>8} {'d_src<0.6':>9} {'d_tgt<0.6':>9} {'med gain':>8} "
          f"{'nearer':>6} {'better/worse':>12}")
    for name, n, total, (ms, mt, mx, mean, mg), ho, ns, nt, nearer, better in summary:
        print(f"{name:>8} {n:>3}/{total:<3} {ms:9.3f} {mt:9.3f} {mx:12.3f} {mean:6.3f} {ho:8.3f} "
              f"{ns:>9} {nt:>9} {mg:8.3f} {nearer:>6} {better[0]:>6}/{better[1]:<5}")
    print("(held-out: median transfer of the obama.jpg swaps judged against obama2.jpg; "
          "nearer: pairs whose result is nearer the source person than the untouched target; "
          "better/worse: pairs whose transfer is above/below the first strength's)")
    if args.json is not None:
        args.json.write_text(json.dumps({"pairs": report}, indent=1))


if __name__ == "__main__":
    main()
