"""Stand-ins for the GPEN-BFR and CodeFormer ONNX files FaceFusion publishes (models-3.0.0).

Signatures, as the publisher's code feeds these files:
- gpen_bfr_256.onnx: input `input` float32 [1, 3, 256, 256], RGB in [-1, 1]; one output float32
  [1, 3, 256, 256] (named `output` here; livecam reads the name from the session).
- gpen_bfr_512.onnx: the same at 512.
- codeformer.onnx: `input` float32 [1, 3, 512, 512] and `weight` float64 [1] (the fidelity w);
  output float32 [1, 3, 512, 512].

kind="identity": output = input. kind="random": a random 3x3 convolution that overshoots [-1, 1].
CodeFormer's stand-in mixes them by its weight, output = w * input + (1 - w) * conv(input), so
w = 1 keeps the input (as the real w keeps the input face most) and the weight's effect shows.
weight_shape: [1] as FaceFusion feeds it; another runner of the same file feeds [1, 1].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.standins import save_model
from tests.standins.gfpgan import restorer_nodes

SIZES = {"gpen_bfr_256": 256, "gpen_bfr_512": 512, "codeformer": 512}


def build_enhancer(path: Path, name: str, kind: str = "random", seed: int = 0,
                   weight_shape: tuple[int, ...] = (1,)) -> Path:
    size = SIZES[name]
    shape = [1, 3, size, size]
    nodes, inits = restorer_nodes(kind, seed)
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)]
    if name == "codeformer":
        inputs.append(helper.make_tensor_value_info("weight", TensorProto.DOUBLE, list(weight_shape)))
        inits.append(numpy_helper.from_array(np.ones(1, np.float32), "one"))
        nodes += [helper.make_node("Cast", ["weight"], ["wf"], to=TensorProto.FLOAT),
                  helper.make_node("Sub", ["one", "wf"], ["rest"]),
                  helper.make_node("Mul", ["input", "wf"], ["kept"]),
                  helper.make_node("Mul", ["y", "rest"], ["restored"]),
                  helper.make_node("Add", ["kept", "restored"], ["output"])]
    else:
        nodes.append(helper.make_node("Identity", ["y"], ["output"]))
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)]
    return save_model(helper.make_graph(nodes, f"{name}_standin", inputs, outputs, inits), path)
