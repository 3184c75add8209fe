"""`livecam models convert GFPGANv1.4.pth`: the PyTorch checkpoint to ONNX, once.

Needs torch (the optional `livecam[convert]` extra); nothing else in livecam imports this
module, so torch is never needed at run time. The checkpoint's configuration (size, widths,
style width) is read off its tensor shapes, so GFPGANv1.4 and other GFPGANv1Clean checkpoints
convert alike. The ONNX file has input `input` float32 [1, 3, S, S] (RGB in [-1, 1]) and output
`output` of the same shape, and is written through a temporary file in the target's folder, so a
failed conversion never leaves a half-written model behind.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any, Mapping

from livecam.errors import InputError, OutputError

log = logging.getLogger("livecam")

OPSET = 17
INPUT_NAME = "input"
OUTPUT_NAME = "output"


def load_state_dict(checkpoint: Path) -> Mapping[str, Any]:
    """The generator weights of a GFPGAN checkpoint (`params_ema`, else `params`, else the file
    itself when it is a bare state dict)."""
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns on stderr about pickle protocols
            data = torch.load(str(checkpoint), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - pickle, zip and torch errors alike
        # torch's texts say nothing useful about the file here (a paragraph on its weights-only
        # default, a bare KeyError '101'); -v shows them.
        raise InputError(f"{checkpoint} is not a readable PyTorch checkpoint; give the GFPGANv1.4.pth file "
                         f"(-v shows torch's error)") from exc
    if isinstance(data, Mapping):
        for key in ("params_ema", "params"):
            if isinstance(data.get(key), Mapping):
                return data[key]
        if all(isinstance(v, torch.Tensor) for v in data.values()):
            return data
    raise InputError(f"{checkpoint} holds no GFPGAN weights (expected a `params_ema` state dict); "
                     f"give the GFPGANv1.4.pth file")


def build_model(state: Mapping[str, Any]) -> Any:
    """GFPGANv1Clean with the checkpoint's configuration and weights, in eval mode."""
    from livecam.models.gfpgan_arch import GFPGANv1Clean, config_from_state_dict

    try:
        cfg = config_from_state_dict(state)
        model = GFPGANv1Clean(cfg)
        model.load_state_dict(state, strict=True)
    except (KeyError, RuntimeError, ValueError, ZeroDivisionError, AssertionError) as exc:
        detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise InputError(f"the checkpoint is not a GFPGANv1Clean (GFPGAN v1.3/v1.4) model ({detail})") from exc
    return model.eval()


def export_onnx(model: Any, output: Path) -> None:
    """Export with a fixed opset to `output` (the caller writes through livecam.atomic.AtomicOutput,
    so `output` is its temporary file)."""
    import torch

    size = model.cfg.out_size
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and exporter chatter, not the user's concern
            torch.onnx.export(model, (torch.zeros(1, 3, size, size),), str(output), dynamo=False,
                              opset_version=OPSET, input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                              do_constant_folding=True)
    except OSError as exc:
        raise OutputError(f"cannot write {output}: {exc.strerror or exc}") from exc


def convert_gfpgan(checkpoint: Path, output: Path) -> Path:
    """GFPGANv1.4.pth (or another GFPGANv1Clean checkpoint) -> ONNX at `output` (a temporary file
    of the caller's AtomicOutput: commands/models.py)."""
    state = load_state_dict(checkpoint)
    model = build_model(state)
    log.info("converting %s (GFPGANv1Clean, %d px) to %s", checkpoint.name, model.cfg.out_size, output)
    export_onnx(model, output)
    return output
