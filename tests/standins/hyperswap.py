"""A stand-in for FaceFusion's hyperswap_1a_256.onnx, hyperswap_1b_256.onnx and hyperswap_1c_256.onnx.

Same interface as the real files (FaceFusion Labs' exporter, hyperswap/src/exporting.py): inputs,
in this order, `source` float32 [1, 512] (the normed ArcFace embedding) and `target` float32
[1, 3, 256, 256] (RGB, (x / 255 - 0.5) / 0.5); outputs `output` float32 [1, 3, 256, 256] (RGB in
[-1, 1]) and `mask` float32 [1, 1, 256, 256] (in [0, 1]); static shapes. Like the real generator,
the output is already blended into the target by the mask: output = face * mask + target *
(1 - mask). Here the face is a tanh of a 3x3 convolution of the target plus a per-channel offset
projected from the source, and the mask a fixed soft ellipse over the face part of the crop, so
the output depends on both inputs and is the target exactly outside the ellipse.

`identity=True` returns the target unchanged (the mask all ones; the source an unused input), so
tiling can be checked exactly; `batch="N"` makes the batch dimension dynamic.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.standins import save_model

SIZE = 256


def face_ellipse(size: int = SIZE) -> np.ndarray:
    """The stand-in's mask: 1 inside an ellipse over the face of an ArcFace crop, feathered."""
    mask = np.zeros((size, size), np.float32)
    cv2.ellipse(mask, (size // 2, int(size * 0.56)), (int(size * 0.28), int(size * 0.36)), 0, 0, 360, 1.0, -1)
    return cv2.GaussianBlur(mask, (0, 0), size / 64)


def build_hyperswap(path: Path, seed: int = 0, batch: int | str = 1, identity: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    w_conv = (rng.standard_normal((3, 3, 3, 3)) * 0.05).astype(np.float32)
    w_conv[[0, 1, 2], [0, 1, 2], 1, 1] += 1.0  # near the identity: the face still looks like one
    w_src = (rng.standard_normal((512, 3)) * 0.6).astype(np.float32)
    inits = [numpy_helper.from_array(w_conv, "conv.w"), numpy_helper.from_array(np.zeros(3, np.float32), "conv.b"),
             numpy_helper.from_array(w_src, "src.w"),
             numpy_helper.from_array(np.array([-1, 3, 1, 1], dtype=np.int64), "shape"),
             numpy_helper.from_array(face_ellipse()[None, None], "ellipse"),
             numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "one")]
    if identity:
        nodes = [helper.make_node("Identity", ["target"], ["output"]),
                 helper.make_node("ReduceMax", ["target"], ["m0"], axes=[1], keepdims=1),
                 helper.make_node("Mul", ["m0", "zero"], ["m1"]),
                 helper.make_node("Add", ["m1", "one"], ["mask"])]
        inits.append(numpy_helper.from_array(np.zeros((1, 1, 1, 1), np.float32), "zero"))
    else:
        nodes = [
            helper.make_node("Conv", ["target", "conv.w", "conv.b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            helper.make_node("MatMul", ["source", "src.w"], ["p"]),
            helper.make_node("Reshape", ["p", "shape"], ["p4"]),
            helper.make_node("Add", ["c", "p4"], ["a"]),
            helper.make_node("Tanh", ["a"], ["face"]),
            # mask broadcast to the batch: ellipse * 1 (shape [B,1,256,256] from the target)
            helper.make_node("ReduceMax", ["target"], ["tm"], axes=[1], keepdims=1),
            helper.make_node("Mul", ["tm", "zero"], ["z"]),
            helper.make_node("Add", ["z", "ellipse"], ["mask"]),
            helper.make_node("Sub", ["face", "target"], ["d"]),
            helper.make_node("Mul", ["d", "mask"], ["dm"]),
            helper.make_node("Add", ["target", "dm"], ["output"]),  # face * mask + target * (1 - mask)
        ]
        inits.append(numpy_helper.from_array(np.zeros((1, 1, 1, 1), np.float32), "zero"))
    inputs = [helper.make_tensor_value_info("source", TensorProto.FLOAT, [batch, 512]),
              helper.make_tensor_value_info("target", TensorProto.FLOAT, [batch, 3, SIZE, SIZE])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 3, SIZE, SIZE]),
               helper.make_tensor_value_info("mask", TensorProto.FLOAT, [batch, 1, SIZE, SIZE])]
    return save_model(helper.make_graph(nodes, "hyperswap_standin", inputs, outputs, inits), path)
