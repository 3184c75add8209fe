"""FramePacket: the one record that travels through every pipeline stage."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from livecam.faces.face import Face


@dataclass(slots=True)
class FramePacket:
    index: int  # position in the stream; never reordered
    image: np.ndarray  # HxWx3 uint8 BGR
    captured_at: float = field(default_factory=time.perf_counter)
    faces: list[Face] = field(default_factory=list)  # filled by analyse
    timings: dict[str, float] = field(default_factory=dict)  # ms per stage
    pts: float | None = None  # presentation time in seconds, for file sources
    duration: float | None = None  # seconds the input shows it, for file sources (None: unknown)
    # presentation times of the output frames after this one that show it (--fps above the
    # input's rate): the file pipeline processes it once and writes the result on each
    repeats: tuple[float, ...] = ()
    # the visible label's corner, decided by the file pipeline in frame order (None: not yet)
    label_corner: str | None = None
    # faces big enough to change that the swapper left as they were (their paste mask came out
    # empty, e.g. none of the --face-mask-regions visible): processors.base.changed_faces
    left_as_is: int = 0
    # of those, faces the mesh swapper left because FaceMesh could not fit them (cut off by the
    # edge, turned away): processors.base.why_unchanged says which it was
    unfitted: int = 0
    # of those, faces whose paste changed no pixel: --blend, and in a video the fade-in at the
    # size limit (processors.base.presence), too faint to move a grey level
    faint: int = 0
    # faces the detector found before selection (without --many-faces one is chosen): a still's
    # summary says how many others were left as they are
    found: int = 0

    def __post_init__(self) -> None:
        img = self.image
        if not isinstance(img, np.ndarray) or img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
            got = getattr(img, "shape", type(img).__name__), getattr(img, "dtype", "")
            raise ValueError(f"FramePacket.image must be HxWx3 uint8 BGR, got {got}")
