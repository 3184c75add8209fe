"""The Face record shared by detectors, trackers and processors.

Coordinates are frame pixels, x to the right and y down, origin at the top-left corner of the
top-left pixel; float32 throughout. Keypoints are, in order: left eye, right eye, nose tip, left
mouth corner, right mouth corner, where "left" is the image's left (the person's right eye).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

NUM_KEYPOINTS = 5
MESH_LANDMARKS = 468
EMBEDDING_SIZE = 512


@dataclass(frozen=True, slots=True)
class Face:
    bbox: np.ndarray  # (4,) float32: x1, y1, x2, y2
    score: float
    kps: np.ndarray  # (5, 2) float32
    landmarks: np.ndarray | None = None  # (N, 2) float32, N = 468 for FaceMesh
    embedding: np.ndarray | None = None  # (512,) float32, L2-normalised
    track_id: int | None = None
    source_key: int = 0  # which SourceIdentity to put on this face (--map); 0 otherwise
    # FaceMesh ran on the face as it stands, fitted or not: tracking takes its verdict and does
    # not run FaceMesh again (FaceAnalyser._mesh sets it; a video's worker fits, track() reads)
    fit_tried: bool = False

    def __post_init__(self) -> None:
        bbox = np.asarray(self.bbox, dtype=np.float32).reshape(-1)
        kps = np.asarray(self.kps, dtype=np.float32)
        if bbox.shape != (4,) or not np.all(np.isfinite(bbox)):
            raise ValueError(f"Face.bbox must be 4 finite numbers, got {self.bbox!r}")
        if bbox[2] < bbox[0] or bbox[3] < bbox[1]:
            raise ValueError(f"Face.bbox must have x2 >= x1 and y2 >= y1, got {bbox.tolist()}")
        if kps.shape != (NUM_KEYPOINTS, 2) or not np.all(np.isfinite(kps)):
            raise ValueError(f"Face.kps must be 5x2 finite numbers, got shape {kps.shape}")
        object.__setattr__(self, "bbox", bbox)
        object.__setattr__(self, "kps", kps)
        if self.landmarks is not None:
            lm = np.asarray(self.landmarks, dtype=np.float32)
            if lm.ndim != 2 or lm.shape[1] != 2:
                raise ValueError(f"Face.landmarks must be Nx2, got shape {lm.shape}")
            object.__setattr__(self, "landmarks", lm)
        if self.embedding is not None:
            emb = np.asarray(self.embedding, dtype=np.float32).reshape(-1)
            if emb.shape != (EMBEDDING_SIZE,):
                raise ValueError(f"Face.embedding must have 512 values, got {emb.shape}")
            object.__setattr__(self, "embedding", emb)

    @property
    def width(self) -> float:
        return float(self.bbox[2] - self.bbox[0])

    @property
    def height(self) -> float:
        return float(self.bbox[3] - self.bbox[1])

    @property
    def area(self) -> float:
        return self.width * self.height

    @property
    def eye_distance(self) -> float:
        return float(np.linalg.norm(self.kps[1] - self.kps[0]))

    @property
    def yaw(self) -> float:
        """How far the head is turned: the nose tip's offset from the eyes' midpoint along the
        eye line, in half eye distances (0 frontal, about +-1 in profile)."""
        along = self.kps[1].astype(np.float64) - self.kps[0]
        half = float(along @ along) / 2.0
        if half < 1e-9:
            return 0.0
        return float((self.kps[2] - (self.kps[0] + self.kps[1]) / 2.0) @ along) / half

    def with_(self, **changes: Any) -> "Face":
        """A copy with some fields replaced (Face is immutable)."""
        return replace(self, **changes)
