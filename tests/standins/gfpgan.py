"""A stand-in for GFPGAN v1.4 as ONNX (gfpgan_1.4.onnx).

Same interface as the real export: input `input` float32 [1, 3, 512, 512] (or a dynamic batch
dimension, as some exports have), RGB normalised to [-1, 1]; one output whose name differs
between exports (read from the session), float32 [N, 3, 512, 512] in about [-1, 1].

kind="identity": output = input (checks the pre/post-processing round trip).
kind="random": a random 3x3 convolution whose output overshoots [-1, 1] (checks the clamp).
weight=True adds a `weight` input (float64 [1], as some exports have); the output is multiplied
by it, so an identity stand-in is only the identity when the processor feeds 1.0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from tests.standins import save_model

OUTPUT_NAME = "restored_face"  # deliberately not "output": the processor must read it


def restorer_nodes(kind: str, seed: int = 0) -> tuple[list[NodeProto], list[TensorProto]]:
    """The body every restorer stand-in shares, `input` -> `y` (NCHW RGB): the identity, or a
    random 3x3 convolution that keeps a face face-like but overshoots [-1, 1]."""
    if kind == "identity":
        return [helper.make_node("Identity", ["input"], ["y"])], []
    if kind != "random":
        raise ValueError(f"unknown stand-in kind {kind!r}")
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((3, 3, 3, 3)) * 0.3).astype(np.float32)
    w[[0, 1, 2], [0, 1, 2], 1, 1] += 1.2
    inits = [numpy_helper.from_array(w, "conv.w"),
             numpy_helper.from_array((rng.standard_normal(3) * 0.1).astype(np.float32), "conv.b")]
    conv = helper.make_node("Conv", ["input", "conv.w", "conv.b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    return [conv], inits


def build_gfpgan(path: Path, kind: str = "identity", dynamic_batch: bool = False, weight: bool = False,
                 seed: int = 0) -> Path:
    batch: int | str = "batch" if dynamic_batch else 1
    nodes, inits = restorer_nodes(kind, seed)
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 512, 512])]
    if weight:
        inputs.append(helper.make_tensor_value_info("weight", TensorProto.DOUBLE, [1]))
        nodes += [helper.make_node("Cast", ["weight"], ["wf"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["y", "wf"], [OUTPUT_NAME])]
    else:
        nodes.append(helper.make_node("Identity", ["y"], [OUTPUT_NAME]))
    outputs = [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [batch, 3, 512, 512])]
    return save_model(helper.make_graph(nodes, "gfpgan_standin", inputs, outputs, inits), path)
