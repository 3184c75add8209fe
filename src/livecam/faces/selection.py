"""Which detected faces get swapped: the largest, all of them, or those of reference people.

What a processor can change is stated here, below the processors, so that selection picks by the
same rule: `usable` (big enough), `fitted` (FaceMesh's landmarks), `changeable` (both, where the
swap needs landmarks). Without --many-faces "the one" face is the first by order that is
changeable, not merely the first: a big face in profile (under 24 px between the eyes) or one cut
by the picture's edge that FaceMesh cannot fit was chosen, left alone, and the user got nothing
while a smaller face beside it could have been swapped.

Filters (--face-min-size, --face-selector-order) apply in every mode: faces whose box's shorter
side is under the minimum are left alone (and never embedded); the order decides which face is
"the one" without --many-faces (default: the largest) and the order in which --many-faces and
--map faces are swapped (a later face is pasted over an earlier one where their crops overlap).

Distances are Euclidean between L2-normalised ArcFace embeddings: 0 for the same vector,
typically below about 1.1 for the same person across photos and 1.25-1.41 for strangers
(sqrt(2) means orthogonal), so the default --reference-distance of 1.0 is on the strict side.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from livecam.faces.arcface import normalise
from livecam.faces.face import MESH_LANDMARKS, Face
from livecam.faces.nms import iou_matrix

MIN_EYE_DISTANCE = 24.0  # px between the eyes; smaller faces are left as they are


def usable(face: Face) -> bool:
    """Whether a face is big enough for a processor to change (every swapper and the enhancer
    use this one rule)."""
    return face.eye_distance >= MIN_EYE_DISTANCE


def fitted(face: Face) -> bool:
    """Whether FaceMesh fitted its 468 landmarks to the face (what the mesh swapper warps by)."""
    lm = face.landmarks
    return lm is not None and len(lm) == MESH_LANDMARKS and bool(np.all(np.isfinite(lm)))


def changeable(face: Face, need_fit: bool = False) -> bool:
    """Whether a processor can change the face: usable, and fitted where `need_fit`."""
    return usable(face) and (fitted(face) or not need_fit)


def largest_face(faces: Sequence[Face]) -> Face | None:
    """The face with the largest box (ties: the first), or None."""
    if not faces:
        return None
    return max(faces, key=lambda f: f.area)


def _centre(face: Face) -> tuple[float, float]:
    x1, y1, x2, y2 = (float(v) for v in face.bbox)
    return (x1 + x2) / 2.0, (y1 + y2) / 2.0


# --face-selector-order: a sort key and whether it runs high to low. Positions by the box's
# centre (a big face's left edge says little about where it is); sorts are stable, so ties keep
# the detector's order.
_ORDERS = {
    "left-right": (lambda f: _centre(f)[0], False),
    "right-left": (lambda f: _centre(f)[0], True),
    "top-bottom": (lambda f: _centre(f)[1], False),
    "bottom-top": (lambda f: _centre(f)[1], True),
    "small-large": (lambda f: f.area, False),
    "large-small": (lambda f: f.area, True),
    "best-worst": (lambda f: f.score, True),  # the detector's confidence
}


def order_faces(faces: Sequence[Face], order: str | None) -> list[Face]:
    """The faces sorted by a --face-selector-order name (None: as they are)."""
    if order is None:
        return list(faces)
    try:
        key, descending = _ORDERS[order]
    except KeyError:
        raise ValueError(f"unknown face order {order!r}; choose from {', '.join(_ORDERS)}") from None
    return sorted(faces, key=key, reverse=descending)


def large_enough(faces: Sequence[Face], min_size: float) -> list[Face]:
    """Faces whose box's shorter side is at least `min_size` px (all when it is 0), order kept."""
    if min_size <= 0:
        return list(faces)
    return [f for f in faces if min(f.width, f.height) >= min_size]


def ranked(faces: Sequence[Face], order: str | None) -> list[Face]:
    """The faces in the order "the one" is looked for: by `order`, by default the largest first
    (ties: as detected)."""
    return order_faces(faces, order or "large-small")


def first_changeable(candidates: Sequence[Face], need_fit: bool = False) -> list[Face]:
    """The first of `candidates` a processor can change (changeable), else the first (its
    warning, "too small" or "could not fit", then says why nothing changed); [] for none."""
    best = next((f for f in candidates if changeable(f, need_fit)), None)
    return [best] if best is not None else list(candidates[:1])


def keep_previous(candidates: Sequence[Face], previous: Face | None, min_iou: float = 0.3) -> list[Face]:
    """`candidates` with the one on `previous`'s place (the most overlap, IoU at least `min_iou`)
    moved first: live, "the one" face stays while it is changeable, where by order alone it
    flipped from frame to frame between a largest face hovering at the 24 px limit and the next."""
    if previous is None or not candidates:
        return list(candidates)
    overlap = iou_matrix(np.stack([f.bbox for f in candidates]), previous.bbox[None])[:, 0]
    best = int(np.argmax(overlap))
    if overlap[best] < min_iou:
        return list(candidates)
    return [candidates[best], *candidates[:best], *candidates[best + 1:]]


def select_faces(faces: Sequence[Face], many: bool, order: str | None = None, min_size: float = 0) -> list[Face]:
    """The faces to swap among `faces` (already limited to reference people, if any), after
    dropping those under `min_size`: all when `many` (sorted by `order` when given, else as
    detected), else only the first by `order` (by default the largest) that is usable.

    The largest, not the left-most, so a passer-by in the background does not steal the swap."""
    faces = large_enough(faces, min_size)
    if many:
        return order_faces(faces, order)
    return first_changeable(ranked(faces, order))


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
