"""A stand-in for insightface's ArcFace w600k_r50.onnx.

Same interface as the real model: input `input.1` float32 [N, 3, 112, 112] with dynamic batch,
output `683` float32 [N, 512] (not normalised). One strided convolution and a fully connected
layer with random weights stand in for the ResNet-50, so the output depends on where things
are in the crop, as a real embedding does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.standins import save_model


def build_arcface(path: Path, seed: int = 0, channels: int = 4) -> Path:
    rng = np.random.default_rng(seed)
    k = 8
    cells = (112 // k) ** 2 * channels
    w_conv = (rng.standard_normal((channels, 3, k, k)) / np.sqrt(3 * k * k)).astype(np.float32)
    b_conv = (rng.standard_normal(channels) * 0.1).astype(np.float32)
    w_fc = (rng.standard_normal((512, cells)) / np.sqrt(cells)).astype(np.float32)
    b_fc = (rng.standard_normal(512) * 0.01).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((w_conv, "conv.w"), (b_conv, "conv.b"), (w_fc, "fc.w"), (b_fc, "fc.b"))]
    # Node names are left empty: insightface sniffs names starting with Sub/Mul to guess
    # MXNet-style normalisation, which the real model does not use.
    nodes = [
        helper.make_node("Conv", ["input.1", "conv.w", "conv.b"], ["c"], kernel_shape=[k, k], strides=[k, k]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["683"], transB=1),
    ]
    inp = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["None", 3, 112, 112])
    out = helper.make_tensor_value_info("683", TensorProto.FLOAT, ["None", 512])
    return save_model(helper.make_graph(nodes, "arcface_standin", [inp], [out], inits), path)
