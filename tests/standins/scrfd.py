"""A stand-in for insightface's SCRFD det_10g.onnx.

Same interface as the real model: input `input.1` float32 [1, 3, H, W] with dynamic H and W;
nine outputs in the real order (scores for strides 8, 16, 32, then boxes, then keypoints) with
shapes (H/s * W/s * 2, 1), (.., 4) and (.., 10), rows ordered (y * W/s + x) * 2 + anchor,
sigmoid scores, non-negative box distances. A few small random convolutions stand in for the
network, with a score bias chosen so that some cells exceed the 0.5 threshold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.standins import save_model

# The real det_10g output names, in output order.
OUTPUT_NAMES = ("448", "471", "494", "451", "474", "497", "454", "477", "500")
STRIDES = (8, 16, 32)
ANCHORS = 2


def build_scrfd(path: Path, seed: int = 0, channels: int = 8,
                score_bias: tuple[float, float, float] = (-4.0, -4.0, -1.0),
                fixed_size: int | None = None, shape_ops: bool = False) -> Path:
    """Write the stand-in to `path`; `fixed_size` pins the input to that square size, as some
    exports of det_10g do (the real one is dynamic). `shape_ops`: a feature-pyramid top-down
    path as a dynamic-size export writes it: each coarser map is upsampled (Resize) to the size
    of the finer one read at run time (Shape, Slice, Concat), and added to it."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def conv(name: str, x: str, cin: int, cout: int, k: int, s: int, bias: float = 0.0, scale: float = 1.0) -> str:
        w = (rng.standard_normal((cout, cin, k, k)) * scale / np.sqrt(cin * k * k)).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.1 + bias).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, const(f"{name}.w", w), const(f"{name}.b", b)], [name],
                                      kernel_shape=[k, k], strides=[s, s]))
        return name

    def relu(x: str) -> str:
        nodes.append(helper.make_node("Relu", [x], [x + ".relu"]))
        return x + ".relu"

    def rows(x: str, width: int, out: str) -> None:
        # (1, A*k, h, w) -> (1, h, w, A*k) -> (h*w*A, k): row = (y*w + x)*A + anchor
        nodes.append(helper.make_node("Transpose", [x], [x + ".t"], perm=[0, 2, 3, 1]))
        nodes.append(helper.make_node("Reshape", [x + ".t", const(f"{out}.shape", np.array([-1, width], np.int64))],
                                      [out]))

    f8 = relu(conv("f8", "input.1", 3, channels, 8, 8, scale=2.0))
    f16 = relu(conv("f16", f8, channels, channels, 2, 2, scale=1.5))
    f32 = relu(conv("f32", f16, channels, channels, 2, 2, scale=1.5))
    if shape_ops:
        f16 = upsampled_sum(f16, f32, channels, nodes, const)
        f8 = upsampled_sum(f8, f16, channels, nodes, const)
    feats = (f8, f16, f32)
    for i, f in enumerate(feats):
        logits = conv(f"score{i}", f, channels, ANCHORS, 1, 1, bias=score_bias[i], scale=3.0)
        nodes.append(helper.make_node("Sigmoid", [logits], [logits + ".sig"]))
        rows(logits + ".sig", 1, OUTPUT_NAMES[i])
    for i, f in enumerate(feats):
        # Distances of about 1..4 strides: real boxes are a few cells wide.
        d = conv(f"box{i}", f, channels, ANCHORS * 4, 1, 1, bias=1.5)
        nodes.append(helper.make_node("Abs", [d], [d + ".abs"]))
        rows(d + ".abs", 4, OUTPUT_NAMES[3 + i])
    for i, f in enumerate(feats):
        rows(conv(f"kps{i}", f, channels, ANCHORS * 10, 1, 1), 10, OUTPUT_NAMES[6 + i])

    hw = [fixed_size, fixed_size] if fixed_size else ["?", "?"]
    inp = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, *hw])
    outs = [helper.make_tensor_value_info(OUTPUT_NAMES[k], TensorProto.FLOAT, [None, (1, 4, 10)[k // 3]])
            for k in range(9)]
    return save_model(helper.make_graph(nodes, "scrfd_standin", [inp], outs, inits), path)


def upsampled_sum(fine: str, coarse: str, channels: int, nodes: list[onnx.NodeProto], const: Any) -> str:
    """fine + coarse resized to fine's height and width, the sizes taken from fine's shape."""
    nc = const(f"{fine}.nc", np.array([1, channels], np.int64))
    nodes += [
        helper.make_node("Shape", [fine], [fine + ".shape"]),
        helper.make_node("Slice", [fine + ".shape", const(f"{fine}.from", np.array([2], np.int64)),
                                   const(f"{fine}.to", np.array([4], np.int64))], [fine + ".hw"]),
        helper.make_node("Concat", [nc, fine + ".hw"], [fine + ".sizes"], axis=0),
        helper.make_node("Resize", [coarse, "", "", fine + ".sizes"], [coarse + ".up"], mode="nearest"),
        helper.make_node("Add", [fine, coarse + ".up"], [fine + ".fpn"]),
    ]
    return fine + ".fpn"
