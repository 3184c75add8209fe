"""Stand-ins for the mask models, returning KNOWN masks so composites are checked pixel for pixel.
Their signatures are the real files' (sources in models/catalog.py):

xseg_1.onnx: one input `input` float32 [1, 256, 256, 3] (NHWC, BGR in [0, 1]); one output
`output` float32 [1, 256, 256, 1]. The stand-in says "face" (1) on the left half of its input's
columns and "occluded" (0) on the right half, whatever the pixels (the input is still read: a
0-weight term keeps it in the graph).

bisenet_resnet_34.onnx: input `input` float32 [batch, 3, 512, 512]; three outputs of
[batch, 19, 512, 512]: `output`, the class logits, then the auxiliary heads `0` and `1`. The
stand-in labels the top half of rows class `top` and the bottom half class `bottom`
(CelebAMask-HQ indices), again whatever the pixels; its auxiliary heads say the opposite, so
reading the wrong output shows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.standins import save_model


def build_xseg(path: Path, names: tuple[str, str] = ("input", "output")) -> Path:
    """names: the input's and the output's (the real file's by default)."""
    known = np.zeros((1, 256, 256, 1), dtype=np.float32)
    known[:, :, :128, :] = 1.0  # columns 0..127 of the 256 input: face; the rest: occluded
    inits = [numpy_helper.from_array(known, "known"), numpy_helper.from_array(np.zeros(1, np.float32), "zero")]
    nodes = [helper.make_node("ReduceMean", [names[0]], ["m"], axes=[1, 2, 3], keepdims=1),
             helper.make_node("Mul", ["m", "zero"], ["z"]),
             helper.make_node("Add", ["known", "z"], [names[1]])]
    graph = helper.make_graph(nodes, "xseg_standin",
                              [helper.make_tensor_value_info(names[0], TensorProto.FLOAT, [1, 256, 256, 3])],
                              [helper.make_tensor_value_info(names[1], TensorProto.FLOAT, [1, 256, 256, 1])], inits)
    return save_model(graph, path)


def build_bisenet(path: Path, top: int = 17, bottom: int = 1, heads: tuple[str, ...] = ("output", "0", "1"),
                  batch: int | str = "batch") -> Path:
    """Rows 0..255 of the 512 input: class `top` (default hair); rows 256..511: `bottom` (skin).
    heads: the graph's outputs in order: `output` (or, in a file without that name, the first)
    carries the logits, the others (auxiliary heads) the negated logits. batch: the batch
    dimension, symbolic as in the real export."""
    known = np.zeros((1, 19, 512, 512), dtype=np.float32)
    known[0, top, :256, :] = 10.0
    known[0, bottom, 256:, :] = 10.0
    inits = [numpy_helper.from_array(known, "known"), numpy_helper.from_array(np.zeros(1, np.float32), "zero")]
    nodes = [helper.make_node("ReduceMean", ["input"], ["m"], axes=[1, 2, 3], keepdims=1),
             helper.make_node("Mul", ["m", "zero"], ["z"]),
             helper.make_node("Add", ["known", "z"], ["class_logits"])]
    main = "output" if "output" in heads else heads[0]
    nodes += [helper.make_node("Identity" if name == main else "Neg", ["class_logits"], [name]) for name in heads]
    graph = helper.make_graph(nodes, "bisenet_standin",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 512, 512])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch, 19, 512, 512]) for n in heads],
                              inits)
    return save_model(graph, path)
