"""Pre- and post-processing as small ONNX graphs, built at run time with onnx.helper.

On a GPU these run on the device beside the models, so only uint8 pixels cross the bus: the
frame goes up once (2.7 MB at 720p instead of a 4.9 MB float blob) and the model's output comes
back as a uint8 crop. Each graph does what the numpy/OpenCV path does today and is checked
against it on the CPU provider (tests/runtime/test_graphs.py, within one grey level):

- `blob_graph`: uint8 HxWx3 BGR -> float32 1x3xHxW RGB, x * scale + offset (faces/align.to_blob);
- `letterbox_graph`: the detector's input: the frame resized (bilinear) into the top-left of a
  size x size canvas, zeros elsewhere, then normalised (faces/scrfd.ScrfdDetector._letterbox);
- `warp_crop_graph`: the similarity-warp crop (GridSample, bilinear, black or replicated border,
  as cv2.warpAffine) then normalised: the swapper's and the enhancer's inputs;
- `output_graph`: a model's float 1x3xSxS RGB output -> uint8 SxSx3 BGR, clip and scale (the
  swapper's truncation or the enhancer's rounding).

Nothing is shipped: each graph is a few nodes, built in milliseconds when a lane starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

OPSET = 17  # GridSample needs 16


@dataclass(frozen=True)
class Front:
    """A pre-graph to join in front of a model (runtime/sessions.get_session's `front`): its
    name (part of the session pool's key), its builder (opset -> graph) and the model input
    its output feeds. `input_shape`: that input's dims rewritten to this fixed shape before
    the join (the detector at one det size: ONNX Runtime then folds the model's Shape ops)."""

    name: str
    build: Callable[[int], Any]
    connect: str
    input_shape: tuple[int, ...] | None = None


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any], name: str,
           opset: int = OPSET) -> Any:
    from onnx import checker, helper

    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="livecam")
    model.ir_version = 8
    checker.check_model(model)
    return model


def _const(name: str, value: Any, dtype: Any = np.float32) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _bgr_to_rgb_nchw(image: str, prefix: str = "") -> tuple[list[Any], list[Any], str]:
    """Nodes that turn uint8 HxWx3 BGR `image` into float 1x3xHxW RGB; (nodes, inits, output)."""
    from onnx import TensorProto, helper

    p = prefix
    nodes = [
        helper.make_node("Cast", [image], [p + "f"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", [p + "f"], [p + "chw"], perm=[2, 0, 1]),
        # channels reversed: B, G, R -> R, G, B
        helper.make_node("Slice", [p + "chw", p + "rev_start", p + "rev_end", p + "axis0", p + "rev_step"], [p + "rgb"]),
        helper.make_node("Unsqueeze", [p + "rgb", p + "axis0"], [p + "nchw"]),
    ]
    inits = [_const(p + "rev_start", [2], np.int64), _const(p + "rev_end", [-4], np.int64),
             _const(p + "axis0", [0], np.int64), _const(p + "rev_step", [-1], np.int64)]
    return nodes, inits, p + "nchw"


def _normalise(x: str, scale: float, offset: float, out: str) -> tuple[list[Any], list[Any]]:
    from onnx import helper

    return ([helper.make_node("Mul", [x, "norm_scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "norm_offset"], [out])],
            [_const("norm_scale", scale), _const("norm_offset", offset)])


def blob_graph(scale: float, offset: float = 0.0) -> Any:
    """image uint8 [H, W, 3] BGR -> blob float32 [1, 3, H, W] RGB, x * scale + offset."""
    from onnx import TensorProto, helper

    nodes, inits, rgb = _bgr_to_rgb_nchw("image")
    more, consts = _normalise(rgb, scale, offset, "blob")
    return _model(nodes + more, [helper.make_tensor_value_info("image", TensorProto.UINT8, ["H", "W", 3])],
                  [helper.make_tensor_value_info("blob", TensorProto.FLOAT, [1, 3, "H", "W"])],
                  inits + consts, "livecam_blob")


def letterbox_graph(size: int | None, scale: float, offset: float, opset: int = OPSET) -> Any:
    """image uint8 [H, W, 3] BGR and resized int64 [2] (new_h, new_w) -> blob float32
    [1, 3, size, size] RGB: the frame resized to new_h x new_w (bilinear, rounded to whole
    levels as cv2.resize's uint8 result is) in the top-left corner, zeros elsewhere, then
    x * scale + offset. size None: the canvas is an input too, `canvas` int64 [2] (the
    detector's det_size, which the governor changes), so one graph serves every size. `opset` (11 and later): the detector's own, so that the two can be joined
    into one model (`with_preprocessing`)."""
    from onnx import TensorProto, helper

    nodes, inits, rgb = _bgr_to_rgb_nchw("image")
    nodes += [
        helper.make_node("Concat", ["nc", "resized"], ["sizes"], axis=0),
        helper.make_node("Resize", [rgb, "", "", "sizes"], ["resized_f"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
        helper.make_node("Round", ["resized_f"], ["resized_r"]),
        helper.make_node("Sub", ["canvas", "resized"], ["pad_hw"]),
        helper.make_node("Concat", ["zeros6", "pad_hw"], ["pads"], axis=0),
        helper.make_node("Pad", ["resized_r", "pads"], ["canvas_f"], mode="constant"),
    ]
    inits += [_const("nc", [1, 3], np.int64), _const("zeros6", [0] * 6, np.int64)]
    inputs = [helper.make_tensor_value_info("image", TensorProto.UINT8, ["H", "W", 3]),
              helper.make_tensor_value_info("resized", TensorProto.INT64, [2])]
    if size is None:
        inputs.append(helper.make_tensor_value_info("canvas", TensorProto.INT64, [2]))
    else:
        inits.append(_const("canvas", [size, size], np.int64))
    side: int | str = size if size is not None else "S"
    more, consts = _normalise("canvas_f", scale, offset, "blob")
    return _model(nodes + more, inputs,
                  [helper.make_tensor_value_info("blob", TensorProto.FLOAT, [1, 3, side, side])],
                  inits + consts, "livecam_letterbox", opset)


def warp_crop_graph(size: int, scale: float, offset: float, *, replicate: bool = False) -> Any:
    """image uint8 [H, W, 3] BGR and inverse float32 [2, 3] (crop pixel -> frame pixel, as
    cv2.invertAffineTransform gives it) -> blob float32 [1, 3, size, size] RGB: the bilinear crop
    (outside the frame black, or the edge replicated), rounded to whole levels as
    cv2.warpAffine's uint8 result is, then x * scale + offset."""
    from onnx import TensorProto, helper

    nodes, inits, rgb = _bgr_to_rgb_nchw("image")
    ys, xs = np.mgrid[:size, :size].astype(np.float32)
    base = np.stack([xs.ravel(), ys.ravel(), np.ones(size * size, np.float32)], axis=1)  # (x, y, 1) per crop pixel
    nodes += [
        helper.make_node("Transpose", ["inverse"], ["inverse_t"], perm=[1, 0]),
        helper.make_node("MatMul", ["base", "inverse_t"], ["frame_xy"]),  # [size*size, 2] frame pixels
        # GridSample's [-1, 1] with align_corners=0: pixel centre x lies at (2x + 1) / W - 1
        helper.make_node("Shape", ["image"], ["hw3"]),
        helper.make_node("Slice", ["hw3", "zero", "two"], ["hw"]),
        helper.make_node("Slice", ["hw", "rev_from", "rev_to", "zero", "rev_by"], ["wh"]),
        helper.make_node("Cast", ["wh"], ["wh_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["frame_xy", "two_f"], ["xy2"]),
        helper.make_node("Add", ["xy2", "one_f"], ["xy2p1"]),
        helper.make_node("Div", ["xy2p1", "wh_f"], ["xy_unit"]),
        helper.make_node("Sub", ["xy_unit", "one_f"], ["grid_flat"]),
        helper.make_node("Reshape", ["grid_flat", "grid_shape"], ["grid"]),
        helper.make_node("GridSample", [rgb, "grid"], ["sampled"], mode="bilinear",
                         padding_mode="border" if replicate else "zeros", align_corners=0),
        helper.make_node("Round", ["sampled"], ["crop_f"]),
    ]
    inits += [_const("base", base), _const("zero", [0], np.int64), _const("two", [2], np.int64),
              _const("rev_from", [1], np.int64), _const("rev_to", [-3], np.int64), _const("rev_by", [-1], np.int64),
              _const("two_f", 2.0), _const("one_f", 1.0), _const("grid_shape", [1, size, size, 2], np.int64)]
    more, consts = _normalise("crop_f", scale, offset, "blob")
    return _model(nodes + more,
                  [helper.make_tensor_value_info("image", TensorProto.UINT8, ["H", "W", 3]),
                   helper.make_tensor_value_info("inverse", TensorProto.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info("blob", TensorProto.FLOAT, [1, 3, size, size])],
                  inits + consts, "livecam_warp_crop")


def output_graph(size: int, scale: float, offset: float, *, rounded: bool) -> Any:
    """output float32 [1, 3, size, size] RGB -> crop uint8 [size, size, 3] BGR:
    clip(x * scale + offset, 0, 255), rounded (the enhancer's saturating cast) or truncated (the
    swapper's astype)."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Mul", ["output", "out_scale"], ["o_scaled"]),
        helper.make_node("Add", ["o_scaled", "out_offset"], ["o_levels"]),
        helper.make_node("Round" if rounded else "Floor", ["o_levels"], ["o_whole"]),
        helper.make_node("Clip", ["o_whole", "lo", "hi"], ["o_clipped"]),
        helper.make_node("Cast", ["o_clipped"], ["o_u8"], to=TensorProto.UINT8),
        helper.make_node("Squeeze", ["o_u8", "axis0"], ["o_chw"]),
        helper.make_node("Slice", ["o_chw", "rev_start", "rev_end", "axis0", "rev_step"], ["o_bgr"]),
        helper.make_node("Transpose", ["o_bgr"], ["crop"], perm=[1, 2, 0]),
    ]
    inits = [_const("out_scale", scale), _const("out_offset", offset), _const("lo", 0.0), _const("hi", 255.0),
             _const("axis0", [0], np.int64), _const("rev_start", [2], np.int64), _const("rev_end", [-4], np.int64),
             _const("rev_step", [-1], np.int64)]
    return _model(nodes, [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])],
                  [helper.make_tensor_value_info("crop", TensorProto.UINT8, [size, size, 3])],
                  inits, "livecam_output")


def joined_model(model_path: str, pre: Callable[[int], Any], connect: str,
                 input_shape: tuple[int, ...] | None = None) -> bytes:
    """The model file at `model_path` with the graph `pre(opset)` in front (its output feeding
    `connect`, whose dims are first fixed to `input_shape` when given), serialised for an
    InferenceSession."""
    import onnx

    model = onnx.load(model_path)
    if input_shape is not None:
        with_fixed_input(model, connect, input_shape)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    return bytes(with_preprocessing(pre(opset), model, connect).SerializeToString())


def with_fixed_input(model: Any, name: str, shape: tuple[int, ...]) -> Any:
    """`model` (changed in place) with input `name` declared as exactly `shape`: every dim a
    number, so shape inference, and ONNX Runtime's constant folding of Shape nodes, reach through
    the whole graph. ValueError when the input's rank or a fixed dim disagrees."""
    graph_input = next((i for i in model.graph.input if i.name == name), None)
    if graph_input is None:
        raise ValueError(f"the model has no input {name!r}")
    dims = graph_input.type.tensor_type.shape.dim
    if len(dims) != len(shape) or any(d.HasField("dim_value") and d.dim_value != v for d, v in zip(dims, shape)):
        raise ValueError(f"input {name!r} cannot take shape {list(shape)}")
    for dim, value in zip(dims, shape):
        dim.ClearField("dim_param")
        dim.dim_value = int(value)
    return model


def with_preprocessing(pre: Any, model: Any, connect: str) -> Any:
    """One model: `pre`'s output `blob` feeds `model`'s input `connect`, so the pair takes what
    `pre` takes (uint8 pixels) and gives what `model` gives; `pre`'s names are prefixed."""
    from onnx import compose

    pre.ir_version = model.ir_version
    return compose.merge_models(pre, model, io_map=[("blob", connect)], prefix1="pre_")


def session_of(model: Any, providers: Any = None) -> Any:
    """An ORT session of a graph built here (on `providers`, a ProviderChoice; CPU by default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if providers is None:
        return ort.InferenceSession(model.SerializeToString(), sess_options=options,
                                    providers=["CPUExecutionProvider"])
    names, opts = providers.as_ort_args()
    return ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=names,
                                provider_options=opts)
