"""The occlusion mask: DeepFaceLab's XSeg network (catalog entry xseg_1) on the aligned crop.

What covers the face (a hand, a cup, a microphone, a strand of hair) is not "face" to XSeg, so
pasting only where it says "face" leaves those in front. Signature (catalog, with its sources):
one input `input`, NHWC float [1, 256, 256, 3], the crop's BGR pixels scaled to [0, 1]
(DeepFaceLab trains on OpenCV's BGR frames); one output `output` [1, 256, 256, 1], the face
probability in [0, 1]. The names are read from the session, not assumed (a re-export may rename
them); a mask of any other size is refused.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from livecam.errors import ModelError
from livecam.models.catalog import download_command

OCCLUDER_MODEL = "xseg_1"
OCCLUDER_SIZE = 256


class Occluder:
    def __init__(self, session: Any) -> None:
        inputs, outputs = session.get_inputs(), session.get_outputs()
        shape = tuple(inputs[0].shape) if len(inputs) == 1 else ()
        if len(shape) != 4 or shape[1:] != (OCCLUDER_SIZE, OCCLUDER_SIZE, 3) or len(outputs) != 1:
            raise ModelError(f"the occluder must take one NHWC [1,{OCCLUDER_SIZE},{OCCLUDER_SIZE},3] input and give "
                             f"one mask, got {[(i.name, i.shape) for i in inputs]}; "
                             f"run `{download_command(OCCLUDER_MODEL)}`")
        self._session = session
        self._input, self._output = inputs[0].name, outputs[0].name

    def visible(self, crop: np.ndarray) -> np.ndarray:
        """float32 SxS for an SxSx3 uint8 BGR crop: 1 where the face is seen, 0 where covered."""
        size = crop.shape[0]
        scaled = cv2.resize(crop, (OCCLUDER_SIZE, OCCLUDER_SIZE), interpolation=cv2.INTER_LINEAR)
        blob = scaled[None].astype(np.float32) * np.float32(1.0 / 255.0)
        out = np.asarray(self._session.run([self._output], {self._input: blob})[0], dtype=np.float32)
        if out.size != OCCLUDER_SIZE * OCCLUDER_SIZE:
            raise ModelError(f"the occluder gave a {list(out.shape)} mask, not [1,{OCCLUDER_SIZE},{OCCLUDER_SIZE},1]; "
                             f"run `{download_command(OCCLUDER_MODEL)}`")
        mask = np.clip(out.reshape(OCCLUDER_SIZE, OCCLUDER_SIZE), 0.0, 1.0)
        shrink = cv2.INTER_AREA if size < OCCLUDER_SIZE else cv2.INTER_LINEAR
        return cv2.resize(mask, (size, size), interpolation=shrink)
