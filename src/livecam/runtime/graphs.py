"""Pre- and post-processing as small ONNX graphs, built at run time with onnx.helper.

On a GPU these run on the device beside the models, so only uint8 pixels cross the bus: the
frame goes up once (2.7 MB at 720p instead of a 4.9 MB float blob) and the model's output comes
back as a uint8 crop. Each graph does what the numpy/OpenCV path does today and is checked
against it on the CPU provider (tests/runtime/test_graphs.py, within one grey level):

- `blob_graph`: uint8 HxWx3 BGR -> float32 1x3xHxW RGB, x * scale + offset, to the bit as
  faces/align.to_blob (whose OpenCV call rounds once, so the graph works in double);
  with batch=True uint8 NxHxWx3 crops -> Nx3xHxW (the swapper's tiles, the enhancer's crops);
- `letterbox_graph`: the detector's input: the frame resized (bilinear) into the top-left of a
  size x size canvas, zeros elsewhere, then normalised (faces/scrfd.ScrfdDetector._letterbox);
- `warp_crop_graph`: the similarity-warp crop (GridSample, bilinear, black or replicated border,
  as cv2.warpAffine) then normalised: the swapper's and the enhancer's inputs;
- `output_graph`: a model's float Nx3xSxS RGB output in its input's range (x * scale + offset)
  -> uint8 NxSxSx3 BGR (or Nx3xSxS BGR planes), mapped back by the swapper's float32 steps and
  clipped (the swapper's truncation or the enhancer's rounding).

A `Front` names the graphs joined around one model (`joined_model`: `with_preprocessing` before
it, `with_postprocessing` after it, a Cast at either edge where the model's own input or output
is float16), so that one session takes and gives uint8 pixels: a lane's SCRFD on the GPU takes
the frame (faces/scrfd.front(size), one session per det size), its swapper and enhancer take the CPU's uint8 crop and give the
uint8 result (`pixel_front`, used by processors/face_swapper.py and face_enhancer.py).

Nothing is shipped: each graph is a few nodes, built in milliseconds when a lane starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

OPSET = 17  # GridSample needs 16


# The joined model's names: the graph in front is prefixed PRE, the one after POST.
PRE, POST = "pre_", "post_"
PIXELS_IN = PRE + "image"  # a pixel front's uint8 input (blob_graph's `image`)
PIXELS_OUT = POST + "crop"  # a pixel back's uint8 output (output_graph's `crop`)


@dataclass(frozen=True)
class Front:
    """The graphs to join around a model (runtime/sessions.get_session's `front`). `name` names
    the whole (part of the session pool's key: one name, one pair of graphs); `build` (opset ->
    graph, or None) goes in front, its output `blob` feeding the model input `connect`; `back`
    (opset -> graph, or None) goes after, its input `output` taking the model output `result`
    (the model's first output when empty). Both are built at the model's opset. `input_shape`:
    the `connect` input's dims rewritten to this fixed shape before the join (the detector at one
    det size: ONNX Runtime then folds the model's Shape ops); `fixed_inputs`: (name, shape) of the
    model's other inputs rewritten alike (the swapper's source at its tile count). `frame_input`:
    the input of `build`'s graph that takes a whole frame, [H, W, 3] (the detector's letterbox):
    its open dims range over frame sides in a TensorRT profile (providers.profile_for).
    `shape_values`: (input of `build`'s graph, (min, opt, max) values) for an input whose values
    are a shape (the letterbox's `resized`, a Resize's sizes): TensorRT takes it as a shape tensor,
    and ONNX Runtime refuses a TensorRT profile that leaves one out."""

    name: str
    build: Callable[[int], Any] | None
    connect: str = ""
    back: Callable[[int], Any] | None = None
    result: str = ""
    input_shape: tuple[int, ...] | None = None
    fixed_inputs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    frame_input: str = ""
    shape_values: tuple[tuple[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]], ...] = ()


def pixel_front(name: str, connect: str, result: str, scale: float, offset: float, *, rounded: bool,
                planar: bool = False, shape: tuple[int, int] | None = None,
                fixed_inputs: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> Front:
    """uint8 pixels in and out of an image model whose input is pixel * scale + offset (NCHW RGB,
    any batch) and whose output `result` is in the same range: in, uint8 NxSxSx3 BGR crops
    (PIXELS_IN); out (PIXELS_OUT), uint8 BGR, NxSxSx3 or with `planar` Nx3xSxS, rounded or
    truncated to whole levels, clipped to [0, 255].

    `shape` (N, S): every call takes N crops of S x S, so the model's input `connect` is fixed to
    [N, 3, S, S], the graphs around it too, and `fixed_inputs` fixes its other inputs: a session
    whose inputs are all fixed can replay a CUDA graph (providers.model_tuning) and needs no
    TensorRT profile. The name then carries N and S (one session per shape in the pool)."""

    def build(opset: int) -> Any:
        return blob_graph(scale, offset, batch=True, opset=opset,
                          fixed=(shape[0], shape[1], shape[1]) if shape is not None else None)

    def back(opset: int) -> Any:
        batch, side = shape if shape is not None else (None, None)
        return output_graph(side, scale, offset, rounded=rounded, planar=planar, opset=opset, batch=batch)

    if shape is None:
        return Front(name, build, connect, back, result, fixed_inputs=fixed_inputs)
    n, s = shape
    return Front(f"{name}_{n}x{s}", build, connect, back, result, input_shape=(n, 3, s, s), fixed_inputs=fixed_inputs)


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


def _bgr_to_rgb_nchw(image: str, prefix: str = "", batch: bool = False) -> tuple[list[Any], list[Any], str]:
    """Nodes that turn uint8 HxWx3 BGR `image` into float 1x3xHxW RGB (with `batch`, NxHxWx3
    into Nx3xHxW); (nodes, inits, output)."""
    from onnx import TensorProto, helper

    p = prefix
    nodes = [helper.make_node("Cast", [image], [p + "f"], to=TensorProto.FLOAT),
             helper.make_node("Transpose", [p + "f"], [p + "chw"], perm=[0, 3, 1, 2] if batch else [2, 0, 1])]
    # channels reversed: B, G, R -> R, G, B
    channels = p + ("axis1" if batch else "axis0")
    nodes.append(helper.make_node("Slice", [p + "chw", p + "rev_start", p + "rev_end", channels, p + "rev_step"],
                                  [p + "rgb" if not batch else p + "nchw"]))
    inits = [_const(p + "rev_start", [2], np.int64), _const(p + "rev_end", [-4], np.int64),
             _const(channels, [1 if batch else 0], np.int64), _const(p + "rev_step", [-1], np.int64)]
    if not batch:
        nodes.append(helper.make_node("Unsqueeze", [p + "rgb", p + "axis0"], [p + "nchw"]))
    return nodes, inits, p + "nchw"


def _normalise(x: str, scale: float, offset: float, out: str) -> tuple[list[Any], list[Any]]:
    from onnx import helper

    return ([helper.make_node("Mul", [x, "norm_scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "norm_offset"], [out])],
            [_const("norm_scale", scale), _const("norm_offset", offset)])


def blob_graph(scale: float, offset: float = 0.0, *, batch: bool = False, opset: int = OPSET,
               fixed: tuple[int, int, int] | None = None) -> Any:
    """image uint8 [H, W, 3] BGR -> blob float32 [1, 3, H, W] RGB, x * scale + offset; with
    `batch`, image [N, H, W, 3] -> blob [N, 3, H, W], and `fixed` (N, H, W) numbers for those."""
    from onnx import TensorProto, helper

    nodes, inits, rgb = _bgr_to_rgb_nchw("image", batch=batch)
    # to_blob's cv2.addWeighted rounds x * scale + offset once (float32 scale and offset, the sum
    # in double): the same here, so that a model that passes pixels through (HyperSwap outside
    # its mask) gives back the levels the plain path gives, truncation included.
    more = [helper.make_node("Cast", [rgb], ["rgb64"], to=TensorProto.DOUBLE),
            helper.make_node("Mul", ["rgb64", "norm_scale"], ["scaled"]),
            helper.make_node("Add", ["scaled", "norm_offset"], ["blob64"]),
            helper.make_node("Cast", ["blob64"], ["blob"], to=TensorProto.FLOAT)]
    consts = [_const("norm_scale", np.float64(np.float32(scale)), np.float64),
              _const("norm_offset", np.float64(np.float32(offset)), np.float64)]
    n, h, w = fixed if fixed is not None and batch else ("N", "H", "W")
    lead: list[int | str] = [n] if batch else []
    return _model(nodes + more, [helper.make_tensor_value_info("image", TensorProto.UINT8, [*lead, h, w, 3])],
                  [helper.make_tensor_value_info("blob", TensorProto.FLOAT, [n if batch else 1, 3, h, w])],
                  inits + consts, "livecam_blob", opset)


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


def output_graph(size: int | None, scale: float, offset: float, *, rounded: bool, planar: bool = False,
                 opset: int = OPSET, batch: int | None = None) -> Any:
    """output float32 [N, 3, size, size] RGB in a model's input range (pixel * scale + offset) ->
    crop uint8 [N, size, size, 3] BGR (with `planar` [N, 3, size, size] BGR planes): the swapper's
    float32 steps, (x - offset) * (1 / (scale * 255)) * 255, then rounded (the enhancer's
    saturating cast, half to even as cv2's) or truncated (the swapper's astype), clipped to
    [0, 255]. size None: any; batch None: any N."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Sub", ["output", "out_offset"], ["o_shifted"]),
        helper.make_node("Mul", ["o_shifted", "out_unit"], ["o_unit"]),
        helper.make_node("Mul", ["o_unit", "out_255"], ["o_levels"]),
        helper.make_node("Round" if rounded else "Floor", ["o_levels"], ["o_whole"]),
        helper.make_node("Clip", ["o_whole", "lo", "hi"], ["o_clipped"]),
        helper.make_node("Cast", ["o_clipped"], ["o_u8"], to=TensorProto.UINT8),
        helper.make_node("Slice", ["o_u8", "rev_start", "rev_end", "axis1", "rev_step"],
                         ["crop" if planar else "o_bgr"]),
    ]
    if not planar:
        nodes.append(helper.make_node("Transpose", ["o_bgr"], ["crop"], perm=[0, 2, 3, 1]))
    inits = [_const("out_offset", offset), _const("out_unit", 1.0 / (scale * 255.0)), _const("out_255", 255.0),
             _const("lo", 0.0), _const("hi", 255.0), _const("axis1", [1], np.int64), _const("rev_start", [2], np.int64),
             _const("rev_end", [-4], np.int64), _const("rev_step", [-1], np.int64)]
    side: int | str = size if size is not None else "S"
    n: int | str = batch if batch is not None else "N"
    out_shape: list[int | str] = [n, 3, side, side] if planar else [n, side, side, 3]
    return _model(nodes, [helper.make_tensor_value_info("output", TensorProto.FLOAT, [n, 3, side, side])],
                  [helper.make_tensor_value_info("crop", TensorProto.UINT8, out_shape)],
                  inits, "livecam_output", opset)


def joined_model(model_path: str, front: Front) -> bytes:
    """The model file at `model_path` with `front`'s graphs joined around it (before: its output
    feeding `front.connect`, whose dims are first fixed to `front.input_shape` when given; after: taking `front.result`), serialised for an InferenceSession."""
    import onnx

    model = onnx.load(model_path)
    if front.input_shape is not None:
        with_fixed_input(model, front.connect, front.input_shape)
    for name, shape in front.fixed_inputs:
        with_fixed_input(model, name, shape)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if front.build is not None:
        pre = front.build(opset)
        _cast_edge(pre, "blob", _elem_type(model.graph.input, front.connect))
        model = with_preprocessing(pre, model, front.connect)
    if front.back is not None:
        result = front.result or model.graph.output[0].name
        post = front.back(opset)
        _cast_edge(post, "output", _elem_type(model.graph.output, result))
        model = with_postprocessing(model, post, result)
    return bytes(model.SerializeToString())


def joined_inputs(front: Front, model_inputs: Sequence[tuple[str | None, Sequence[int | None] | None]]
                  ) -> list[tuple[str | None, tuple[int | None, ...] | None]]:
    """The inputs (name, shape; None = dynamic) of the model that `joined_model` makes, without
    loading the model file again: the front graph's inputs, prefixed PRE (the graph built at
    OPSET to read them: a few nodes; the model's opset changes none of its dims), then the
    model's other inputs as `model_inputs` gives them, minus `connect`, with `front.input_shape`
    and `front.fixed_inputs` applied. The session tuning of a joined model is read from these
    (models/store.open_session)."""
    fixed: dict[str | None, tuple[int, ...]] = dict(front.fixed_inputs)
    if front.input_shape is not None:
        fixed[front.connect] = front.input_shape
    out: list[tuple[str | None, tuple[int | None, ...] | None]] = []
    if front.build is not None:
        graph = front.build(OPSET).graph
        for value in graph.input:
            dims = value.type.tensor_type.shape.dim
            out.append((PRE + value.name, tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)))
    for name, shape in model_inputs:
        if front.build is not None and name == front.connect:
            continue
        out.append((name, fixed[name] if name in fixed else (None if shape is None else tuple(shape))))
    return out


def _elem_type(values: Any, name: str) -> int:
    for value in values:
        if value.name == name:
            return int(value.type.tensor_type.elem_type)
    raise ValueError(f"the model has no tensor {name!r} to join a graph to")


def _cast_edge(graph_model: Any, name: str, elem_type: int) -> None:
    """Make the input or output `name` of a graph built here (float32) of `elem_type`, through a
    Cast at that edge (float16 models: inswapper_128_fp16, a converted GFPGAN), in place."""
    from onnx import TensorProto, helper

    g = graph_model.graph
    if elem_type == TensorProto.FLOAT:
        return
    inner = name + "_f32"
    outputs = [o for o in g.output if o.name == name]
    if outputs:
        for node in g.node:
            node.output[:] = [inner if o == name else o for o in node.output]
        g.node.append(helper.make_node("Cast", [inner], [name], to=elem_type))
        outputs[0].type.tensor_type.elem_type = elem_type
    else:
        for node in g.node:
            node.input[:] = [inner if i == name else i for i in node.input]
        g.node.insert(0, helper.make_node("Cast", [name], [inner], to=TensorProto.FLOAT))
        next(i for i in g.input if i.name == name).type.tensor_type.elem_type = elem_type


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
    `pre` takes (uint8 pixels) and gives what `model` gives; `pre`'s names are prefixed PRE."""
    from onnx import compose

    pre.ir_version = model.ir_version
    return compose.merge_models(pre, model, io_map=[("blob", connect)], prefix1=PRE)


def with_postprocessing(model: Any, post: Any, result: str) -> Any:
    """One model: `model`'s output `result` feeds `post`'s input `output`, so the pair takes what
    `model` takes and gives only what `post` gives (uint8 pixels; another output of the model,
    HyperSwap's mask, is left out); `post`'s names are prefixed POST."""
    from onnx import compose

    post.ir_version = model.ir_version
    return compose.merge_models(model, post, io_map=[(result, "output")], prefix2=POST,
                                outputs=[POST + o.name for o in post.graph.output])


def session_of(model: Any, providers: Any = None) -> Any:
    """An ORT session of a graph built here (on `providers`, a ProviderChoice; CPU by default)."""
    from livecam.runtime.providers import import_onnxruntime

    ort = import_onnxruntime()

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if providers is None:
        return ort.InferenceSession(model.SerializeToString(), sess_options=options,
                                    providers=["CPUExecutionProvider"])
    names, opts = providers.as_ort_args()
    return ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=names,
                                provider_options=opts)
