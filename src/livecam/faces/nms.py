"""Box overlap helpers: IoU matrices and greedy non-maximum suppression.

Boxes are (N, 4) arrays of x1, y1, x2, y2. `offset` is added to widths and heights: 1.0 gives
the "inclusive pixel" convention SCRFD's reference decoder uses, 0.0 the plain geometric one
(use 0.0 for normalised coordinates).
"""

from __future__ import annotations

import numpy as np

MATRIX_LIMIT = 2000  # above this many boxes, NMS avoids the N x N overlap matrix


def box_areas(boxes: np.ndarray, offset: float = 0.0) -> np.ndarray:
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return np.maximum(b[:, 2] - b[:, 0] + offset, 0.0) * np.maximum(b[:, 3] - b[:, 1] + offset, 0.0)


def iou_matrix(a: np.ndarray, b: np.ndarray, offset: float = 0.0) -> np.ndarray:
    """(len(a), len(b)) intersection over union; 0 where a union is empty."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=np.float64)
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]) + offset
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]) + offset
    inter = np.maximum(w, 0.0) * np.maximum(h, 0.0)
    union = box_areas(a, offset)[:, None] + box_areas(b, offset)[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float, offset: float = 0.0) -> np.ndarray:
    """Greedy NMS: indices of the kept boxes, highest score first.

    A box is dropped when its IoU with an already kept, higher-scoring box exceeds `iou`.
    Ties in score keep their input order (stable sort), so results are deterministic."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(boxes) != len(scores):
        raise ValueError(f"nms: {len(boxes)} boxes but {len(scores)} scores")
    order = np.argsort(-scores, kind="stable")
    if len(order) > MATRIX_LIMIT:
        return _nms_loop(boxes, order, iou, offset)
    # All pairwise overlaps at once, then one cheap pass that only does work for kept boxes.
    overlap = iou_matrix(boxes[order], boxes[order], offset)
    alive = np.ones(len(order), dtype=bool)
    keep: list[int] = []
    for i in range(len(order)):
        if not alive[i]:
            continue
        keep.append(int(order[i]))
        alive[i + 1:] &= overlap[i, i + 1:] <= iou
    return np.asarray(keep, dtype=np.int64)


def _nms_loop(boxes: np.ndarray, order: np.ndarray, iou: float, offset: float) -> np.ndarray:
    """Memory-light variant for very many boxes (no N x N matrix)."""
    areas = box_areas(boxes, offset)
    keep: list[int] = []
    while order.size > 0:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        w = np.minimum(boxes[i, 2], boxes[rest, 2]) - np.maximum(boxes[i, 0], boxes[rest, 0]) + offset
        h = np.minimum(boxes[i, 3], boxes[rest, 3]) - np.maximum(boxes[i, 1], boxes[rest, 1]) + offset
        inter = np.maximum(w, 0.0) * np.maximum(h, 0.0)
        union = areas[i] + areas[rest] - inter
        overlap = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        order = rest[overlap <= iou]
    return np.asarray(keep, dtype=np.int64)
