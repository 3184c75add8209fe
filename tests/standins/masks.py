"""Stand-ins for the mask models, returning KNOWN masks so composites are checked pixel for pixel.

xseg_1.onnx: input `input` float32 [1, 256, 256, 3] (NHWC, BGR in [0, 1]); output `output`
float32 [1, 256, 256, 1]. The stand-in says "face" (1) on the left half of its input's columns
and "occluded" (0) on the right half, whatever the pixels (the input is still read: a 0-weight
term keeps it in the graph).

bisenet_resnet_34.onnx: input `input` float32 [1, 3, 512, 512]; output `output` float32
[1, 19, 512, 512] logits. The stand-in labels the top half of rows class `top` and the bottom
half class `bottom` (CelebAMask-HQ indices), again whatever the pixels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.standins import save_model


def _known_plus_zero_times_input(reduce_axes: list[int]) -> list:
    """Nodes computing output = known + 0 * mean(input over reduce_axes) (broadcast)."""
    return [
        helper.make_node("ReduceMean", ["input"], ["m"], axes=reduce_axes, keepdims=1),
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["known", "z"], ["output"]),
    ]


def build_xseg(path: Path) -> Path:
    known = np.zeros((1, 256, 256, 1), dtype=np.float32)
    known[:, :, :128, :] = 1.0  # columns 0..127 of the 256 input: face; the rest: occluded
    inits = [numpy_helper.from_array(known, "known"), numpy_helper.from_array(np.zeros(1, np.float32), "zero")]
    nodes = _known_plus_zero_times_input([1, 2, 3])
    graph = helper.make_graph(nodes, "xseg_standin",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 256, 256, 3])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 256, 256, 1])], inits)
    return save_model(graph, path)


def build_bisenet(path: Path, top: int = 17, bottom: int = 1, aux_heads: bool = False) -> Path:
    """Rows 0..255 of the 512 input: class `top` (default hair); rows 256..511: `bottom` (skin).
    aux_heads: two more outputs of the same shape after `output` (a BiSeNet export that kept its
    training heads), saying the opposite, so reading the wrong one shows."""
    known = np.zeros((1, 19, 512, 512), dtype=np.float32)
    known[0, top, :256, :] = 10.0
    known[0, bottom, 256:, :] = 10.0
    inits = [numpy_helper.from_array(known, "known"), numpy_helper.from_array(np.zeros(1, np.float32), "zero")]
    nodes = _known_plus_zero_times_input([1, 2, 3])
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 19, 512, 512])]
    if aux_heads:
        nodes.append(helper.make_node("Neg", ["output"], ["aux16"]))
        nodes.append(helper.make_node("Neg", ["output"], ["aux32"]))
        outputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 19, 512, 512]) for n in ("aux16", "aux32")]
    graph = helper.make_graph(nodes, "bisenet_standin",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 512, 512])],
                              outputs, inits)
    return save_model(graph, path)
