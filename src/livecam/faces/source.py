"""SourceIdentity: the face to put on every target, analysed once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from livecam.faces.face import Face


@dataclass(frozen=True)
class SourceIdentity:
    paths: tuple[Path, ...]  # the photos it was built from
    image: np.ndarray  # BGR uint8 photo the face below lives in (the first photo)
    face: Face  # largest face of that photo, with landmarks when FaceMesh ran
    embedding: np.ndarray | None  # mean of the photos' normed ArcFace embeddings, re-normed
