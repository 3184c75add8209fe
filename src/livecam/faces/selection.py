"""Which detected faces get swapped: the largest, all of them, or those of reference people.

Distances are Euclidean between L2-normalised ArcFace embeddings: 0 for the same vector,
typically below about 1.1 for the same person across photos and 1.25-1.41 for strangers
(sqrt(2) means orthogonal), so the default --reference-distance of 1.0 is on the strict side.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from livecam.faces.arcface import normalise
from livecam.faces.face import Face


def largest_face(faces: Sequence[Face]) -> Face | None:
    """The face with the largest box (ties: the first), or None."""
    if not faces:
        return None
    return max(faces, key=lambda f: f.area)


def select_faces(faces: Sequence[Face], many: bool) -> list[Face]:
    """All faces (in their order) when `many`, else only the largest one.

    The largest, not the left-most, so a passer-by in the background does not steal the swap."""
    if many:
        return list(faces)
    best = largest_face(faces)
    return [] if best is None else [best]


def embedding_distances(faces: Sequence[Face], references: Sequence[np.ndarray]) -> np.ndarray:
    """(faces, references) Euclidean distances between normalised embeddings."""
    missing = [i for i, f in enumerate(faces) if f.embedding is None]
    if missing:
        raise ValueError(f"faces {missing} have no embedding; run the embedder before reference matching")
    if not faces or not references:
        return np.zeros((len(faces), len(references)), dtype=np.float32)
    a = normalise(np.stack([f.embedding for f in faces if f.embedding is not None]))  # all, checked above
    b = normalise(np.stack([np.asarray(r, dtype=np.float32).reshape(-1) for r in references]))
    # |a - b|^2 = 2 - 2 a.b for unit vectors; clip tiny negatives from rounding.
    return np.sqrt(np.clip(2.0 - 2.0 * (a @ b.T), 0.0, 4.0)).astype(np.float32)


def match_reference(faces: Sequence[Face], references: Sequence[np.ndarray], max_distance: float) -> list[Face]:
    """Faces of the reference people only, each with `source_key` set to the index of its
    closest reference (that index picks the source face for --map). Faces farther than
    `max_distance` from every reference are dropped; order is kept."""
    if not faces or not references:
        return []
    dist = embedding_distances(faces, references)
    best = np.argmin(dist, axis=1)
    return [f.with_(source_key=int(k)) for f, k, row in zip(faces, best, dist)
            if row[k] <= max_distance]


def filter_by_reference(faces: Sequence[Face], references: Sequence[np.ndarray], max_distance: float) -> list[Face]:
    """Faces within `max_distance` of any reference, unchanged (--reference without --map)."""
    if not faces or not references:
        return []
    dist = embedding_distances(faces, references)
    return [f for f, row in zip(faces, dist) if row.min() <= max_distance]
