"""Stand-in ONNX models with the exact tensor names, shapes and dtypes of the real ones.

The real weights cannot be downloaded in tests; these small random-weight graphs exercise the
same pre- and post-processing code paths (and let insightface's classes be run as an oracle).
"""

from pathlib import Path

import onnx
import onnxruntime
from onnx import helper


def save_model(graph: onnx.GraphProto, path: str | Path) -> Path:
    """Wrap a stand-in graph in an opset-13 model, check it and save it; returns the path."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="livecam-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = Path(path)
    onnx.save(model, str(path))
    return path


def cpu_session(path: str | Path) -> onnxruntime.InferenceSession:
    """A quiet one-thread CPU session of a stand-in, as the processor tests run them."""
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def build_swap_models(folder: Path, *, face_parser: bool = False) -> Path:
    """A models folder with stand-ins of what the neural swap loads: ArcFace (w600k_r50) and
    inswapper_128, and with `face_parser` the region mask's parser (bisenet_resnet_34)."""
    from tests.standins.arcface import build_arcface
    from tests.standins.inswapper import build_inswapper
    from tests.standins.masks import build_bisenet

    folder.mkdir(parents=True, exist_ok=True)
    build_arcface(folder / "w600k_r50.onnx")
    build_inswapper(folder / "inswapper_128.onnx")
    if face_parser:
        build_bisenet(folder / "bisenet_resnet_34.onnx")
    return folder
