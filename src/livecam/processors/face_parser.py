"""The region mask: a BiSeNet face parser (catalog entry bisenet_resnet_34) on the aligned crop.

It labels every pixel with one of the 19 CelebAMask-HQ classes; the mask is the union of the
chosen regions (--face-mask-regions), so what is not chosen (glasses by default, hair, ears,
the background) stays the target's. Signature (catalog, with its sources): input `input` float
[batch, 3, 512, 512], RGB in [0, 1] normalised with ImageNet's mean and std; three outputs of
[batch, 19, 512, 512]: `output`, the class logits, and two auxiliary heads of training, never
run. The logits are the output named `output`, else (a re-export that renamed them) the first
output of 19 channels; only that one is computed.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Sequence

import cv2
import numpy as np

from livecam.errors import ModelError
from livecam.models.catalog import download_command

PARSER_MODEL = "bisenet_resnet_34"
PARSER_SIZE = 512
PARSER_CLASSES = 19
# CelebAMask-HQ's label indices as the BiSeNet parsers are trained: 0 background, 1 skin,
# 2 l_brow, 3 r_brow, 4 l_eye, 5 r_eye, 6 eye_g (glasses), 7 l_ear, 8 r_ear, 9 ear_r, 10 nose,
# 11 mouth, 12 u_lip, 13 l_lip, 14 neck, 15 neck_l, 16 cloth, 17 hair, 18 hat.
REGION_CLASSES: Mapping[str, int] = MappingProxyType({
    "skin": 1, "left-eyebrow": 2, "right-eyebrow": 3, "left-eye": 4, "right-eye": 5, "glasses": 6,
    "nose": 10, "mouth": 11, "upper-lip": 12, "lower-lip": 13,
})
_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)  # ImageNet, RGB
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class FaceParser:
    def __init__(self, session: Any) -> None:
        inputs, outputs = session.get_inputs(), session.get_outputs()
        shape = tuple(inputs[0].shape) if len(inputs) == 1 else ()
        logits = _logits_output(outputs)
        if len(shape) != 4 or shape[1:] != (3, PARSER_SIZE, PARSER_SIZE) or logits is None:
            raise ModelError(f"the face parser must take one [1,3,{PARSER_SIZE},{PARSER_SIZE}] input and give "
                             f"[1,{PARSER_CLASSES},{PARSER_SIZE},{PARSER_SIZE}] logits, got "
                             f"{[(i.name, i.shape) for i in inputs]} -> {[(o.name, o.shape) for o in outputs]}; "
                             f"run `{download_command(PARSER_MODEL)}`")
        self._session = session
        self._input, self._output = inputs[0].name, logits

    def labels(self, crop: np.ndarray) -> np.ndarray:
        """PARSER_SIZE x PARSER_SIZE class indices (uint8) for an SxSx3 uint8 BGR crop."""
        rgb = cv2.resize(crop, (PARSER_SIZE, PARSER_SIZE), interpolation=cv2.INTER_LINEAR)[:, :, ::-1]
        norm = (rgb.astype(np.float32) * np.float32(1.0 / 255.0) - _MEAN) / _STD
        blob = np.ascontiguousarray(norm.transpose(2, 0, 1)[None])
        logits = np.asarray(self._session.run([self._output], {self._input: blob})[0])
        if logits.shape[1:2] != (PARSER_CLASSES,):
            raise ModelError(f"the face parser gave {list(logits.shape)}, not {PARSER_CLASSES} class logits; "
                             f"run `{download_command(PARSER_MODEL)}`")
        return logits[0].argmax(axis=0).astype(np.uint8)

    def regions(self, crop: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """float32 SxS: 1 on the named regions of the crop, 0 elsewhere."""
        wanted = np.array([REGION_CLASSES[n] for n in names], dtype=np.uint8)
        mask = np.isin(self.labels(crop), wanted).astype(np.float32)
        size = crop.shape[0]
        return cv2.resize(mask, (size, size), interpolation=cv2.INTER_AREA if size < PARSER_SIZE else cv2.INTER_LINEAR)


def _logits_output(outputs: Sequence[Any]) -> str | None:
    """The name of the class-logits output: `output`, else the first 4-d one with PARSER_CLASSES
    (or a symbolic number of) channels; None when there is no such output."""
    fitting = [o for o in outputs
               if len(o.shape or []) == 4 and (o.shape[1] == PARSER_CLASSES or not isinstance(o.shape[1], int))]
    named = [o for o in fitting if o.name == "output"]
    return (named or fitting)[0].name if fitting else None
