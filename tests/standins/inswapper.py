"""A stand-in for inswapper_128.onnx and inswapper_128_fp16.onnx.

Same interface as the real model: inputs, in this order, `target` float32 [1, 3, 128, 128]
(RGB in [0, 1]) and `source` float32 [1, 512]; output `output` float32 [1, 3, 128, 128] (RGB in
[0, 1]); static shapes; the graph's LAST initializer is `emap` float32 [512, 512]. A 3x3
convolution of the target plus a per-channel offset projected from the source latent, through
a sigmoid, stands in for the generator, so the output depends on both inputs.

The fp16 variant stores every weight (emap included) as float16 and casts at the graph's edges,
so its inputs and outputs stay float32 like the real fp16 file. `io_fp16=True` builds a file whose
inputs and output are float16 themselves (the swapper must read the types and cast).
`batch="N"` makes the batch dimension dynamic (a named dim), as some exports have; `identity=True`
returns the target unchanged (the source is an input, unused), so tiling can be checked exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.standins import save_model


def build_inswapper(path: Path, seed: int = 0, fp16: bool = False, io_fp16: bool = False,
                    bias: float = -2.0, batch: int | str = 1, identity: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    wdt = np.float16 if fp16 or io_fp16 else np.float32
    # Near the identity (a sigmoid of the crop with a little mixing, tinted per channel by the
    # source): the swapped crop still looks like a face, so parity is judged on real pixels.
    w_conv = (rng.standard_normal((3, 3, 3, 3)) * 0.05).astype(np.float32)
    w_conv[[0, 1, 2], [0, 1, 2], 1, 1] += 4.0
    b_conv = np.full(3, bias, dtype=np.float32)  # bias=40: an all-white output (mask tests)
    w_src = (rng.standard_normal((512, 3)) * 0.4).astype(np.float32)
    emap = rng.standard_normal((512, 512)).astype(np.float32)
    inits = [numpy_helper.from_array(a.astype(wdt), n) for a, n in
             ((w_conv, "conv.w"), (b_conv, "conv.b"), (w_src, "src.w"))]
    inits.append(numpy_helper.from_array(np.array([-1, 3, 1, 1], dtype=np.int64), "shape"))
    inits.append(numpy_helper.from_array(emap.astype(wdt), "emap"))  # must stay last

    io_type = TensorProto.FLOAT16 if io_fp16 else TensorProto.FLOAT
    half = fp16 and not io_fp16  # fp16 weights behind float32 I/O: cast in and out
    t_in, s_in, out = "target", "source", "output"
    nodes = []
    if half:
        nodes += [helper.make_node("Cast", ["target"], ["t16"], to=TensorProto.FLOAT16),
                  helper.make_node("Cast", ["source"], ["s16"], to=TensorProto.FLOAT16)]
        t_in, s_in, out = "t16", "s16", "o16"
    nodes += [
        helper.make_node("Conv", [t_in, "conv.w", "conv.b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("MatMul", [s_in, "src.w"], ["p"]),
        helper.make_node("Reshape", ["p", "shape"], ["p4"]),
        helper.make_node("Add", ["c", "p4"], ["a"]),
        helper.make_node("Sigmoid", ["a"], [out]),
    ]
    if half:
        nodes.append(helper.make_node("Cast", ["o16"], ["output"], to=TensorProto.FLOAT))
    if identity:
        nodes = [helper.make_node("Identity", ["target"], ["output"])]
    inputs = [helper.make_tensor_value_info("target", io_type, [batch, 3, 128, 128]),
              helper.make_tensor_value_info("source", io_type, [batch, 512])]
    outputs = [helper.make_tensor_value_info("output", io_type, [batch, 3, 128, 128])]
    return save_model(helper.make_graph(nodes, "inswapper_standin", inputs, outputs, inits), path)
