"""BlazeFace (MediaPipe face detection, short and full range) decoded on ONNX Runtime.

The models take a letterboxed RGB square in [-1, 1] (NCHW after conversion) and give, per SSD
anchor, 16 regressors (box centre offset, box size, 6 keypoints; all in input pixels) and one
score logit. Anchors are MediaPipe's SSD anchors with fixed size 1 (so sizes are not scaled):
short range 128x128, strides 8, 16, 16, 16 (896 anchors); full range 192x192, stride 4, one
anchor per cell (2304 anchors). Overlapping detections are blended (weighted NMS).

Keypoints of the model, in the person's terms: right eye, left eye, nose tip, mouth centre, right
ear, left ear. livecam's 5 kps are: eye on the image's left (person's right), other eye, nose tip,
and two mouth corners placed beside the mouth centre along the eye line (FaceMesh refines them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from livecam.errors import ModelError
from livecam.faces.align import to_bgr, to_blob
from livecam.faces.face import Face
from livecam.faces.nms import iou_matrix

RAW_SCORE_LIMIT = 80.0  # clip logits so that exp() cannot overflow in float32
NMS_IOU = 0.3  # MediaPipe's suppression threshold for BlazeFace
# Half the mouth width as a fraction of the eye distance: (70.73 - 41.55) / 2 / (73.53 - 38.29)
# from the ArcFace template, i.e. where the alignment expects the mouth corners to be.
MOUTH_HALF_WIDTH = 0.414


@dataclass(frozen=True)
class Variant:
    size: int
    strides: tuple[int, ...]
    anchors_per_layer: int  # 2 when MediaPipe's interpolated scale is on, else 1
    num_anchors: int


VARIANTS = {
    "short": Variant(128, (8, 16, 16, 16), 2, 896),
    "full": Variant(192, (4,), 1, 2304),
}


def ssd_anchors(variant: Variant) -> np.ndarray:
    """Anchor centres (N, 2) in normalised input coordinates, in the model's output order:
    per group of layers sharing a stride, row-major cells, each repeated once per anchor."""
    centres = []
    strides = list(variant.strides)
    i = 0
    while i < len(strides):
        j = i
        while j < len(strides) and strides[j] == strides[i]:
            j += 1
        cells = variant.size // strides[i]
        repeats = (j - i) * variant.anchors_per_layer
        grid = (np.arange(cells, dtype=np.float32) + 0.5) / cells
        ys, xs = np.meshgrid(grid, grid, indexing="ij")
        cell_centres = np.stack([xs.ravel(), ys.ravel()], axis=1)
        centres.append(np.repeat(cell_centres, repeats, axis=0))
        i = j
    return np.concatenate(centres, axis=0)


def shrink(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resize without aliasing, cheaply: plain bilinear to twice the target, then an exact 2x box
    filter (INTER_AREA's fast path; INTER_AREA at 5x costs 4x as much on a 640x480 frame)."""
    h, w = image.shape[:2]
    if width >= w and height >= h:
        return cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
    if 2 * width < w and 2 * height < h:
        image = cv2.resize(image, (2 * width, 2 * height), interpolation=cv2.INTER_LINEAR)
    return cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)


def letterbox(image_bgr: np.ndarray, size: int) -> tuple[np.ndarray, float, float, float]:
    """The image scaled into a centred size x size canvas: (canvas, scale, pad_x, pad_y), with
    frame = (canvas - pad) / scale."""
    h, w = image_bgr.shape[:2]
    scale = size / max(h, w)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    resized = shrink(image_bgr, nw, nh)
    pad_x, pad_y = (size - nw) // 2, (size - nh) // 2
    return (cv2.copyMakeBorder(resized, pad_y, size - nh - pad_y, pad_x, size - nw - pad_x,
                               cv2.BORDER_CONSTANT, value=(0, 0, 0)),
            scale, float(pad_x), float(pad_y))


def weighted_nms(boxes: np.ndarray, points: np.ndarray, scores: np.ndarray,
                 iou_threshold: float) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Blend each cluster of overlapping detections into one: the best score's cluster (IoU above
    the threshold) is averaged with score weights; the result keeps the best score."""
    order = np.argsort(-scores)
    boxes, points, scores = boxes[order], points[order], scores[order]
    alive = np.ones(len(scores), dtype=bool)
    out = []
    for i in range(len(scores)):
        if not alive[i]:
            continue
        cluster = alive & (iou_matrix(boxes[i], boxes)[0] > iou_threshold)
        cluster[i] = True
        w = scores[cluster][:, None]
        box = (boxes[cluster] * w).sum(axis=0) / w.sum()
        pts = (points[cluster] * w[:, :, None]).sum(axis=0) / w.sum()
        out.append((box, pts, float(scores[i])))
        alive &= ~cluster
    return out


def mouth_corners(eye_a: np.ndarray, eye_b: np.ndarray, mouth: np.ndarray) -> np.ndarray:
    """Two mouth corners beside the mouth centre along the eye line (eye_a's side first)."""
    half = (eye_b - eye_a) * MOUTH_HALF_WIDTH
    return np.stack([mouth - half, mouth + half])


class BlazeFaceDetector:
    """Finds faces with a BlazeFace session; `variant` is "short" (faces within ~2 m, the
    webcam case) or "full" (small faces, group photos)."""

    def __init__(self, session: Any, variant: str = "short", threshold: float = 0.5) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"BlazeFace variant must be one of {sorted(VARIANTS)}, got {variant!r}")
        self.session = session
        self.variant = VARIANTS[variant]
        self.threshold = float(threshold)
        inputs, outputs = session.get_inputs(), session.get_outputs()
        shape = list(inputs[0].shape)
        size = self.variant.size
        if len(outputs) != 2 or shape[1:] != [3, size, size]:
            raise ModelError(
                f"BlazeFace {variant}-range model must take [1,3,{size},{size}] and give 2 outputs, "
                f"got input {shape} and {len(outputs)} outputs; use the bundled "
                f"blazeface_{variant}_range model"
            )
        self._input = inputs[0].name
        # regressors (1, N, 16) and scores (1, N, 1); find them by shape, not by name
        by_width = {o.shape[-1]: o.name for o in outputs}
        if set(by_width) != {16, 1}:
            raise ModelError(f"BlazeFace outputs must end in 16 and 1 values, got {sorted(by_width)}")
        self._outputs = [by_width[16], by_width[1]]
        self.anchors = ssd_anchors(self.variant)

    def detect(self, image_bgr: np.ndarray, max_faces: int = 0) -> list[Face]:
        """Faces in the frame, best score first (at most max_faces when > 0)."""
        size = self.variant.size
        canvas, scale, pad_x, pad_y = letterbox(to_bgr(image_bgr), size)
        # NCHW RGB in [-1, 1]: (x - 127.5) / 127.5
        blob = to_blob([canvas], 1.0 / 127.5, -1.0)
        regressors, logits = self.session.run(self._outputs, {self._input: blob})
        logits = np.clip(logits.reshape(-1), -RAW_SCORE_LIMIT, RAW_SCORE_LIMIT)
        scores = 1.0 / (1.0 + np.exp(-logits))
        keep = np.nonzero(scores > self.threshold)[0]
        if keep.size == 0:
            return []
        raw = regressors.reshape(-1, 16)[keep]
        # everything is in input pixels relative to the anchor centre (anchor size 1)
        anchors = self.anchors[keep] * size
        centre = raw[:, 0:2] + anchors
        half = raw[:, 2:4] / 2
        boxes = np.concatenate([centre - half, centre + half], axis=1)
        points = raw[:, 4:16].reshape(-1, 6, 2) + anchors[:, None, :]
        valid = np.all(half > 0, axis=1)
        if not np.any(valid):
            return []
        found = weighted_nms(boxes[valid], points[valid], scores[keep][valid], NMS_IOU)
        if max_faces > 0:
            found = found[:max_faces]
        h, w = image_bgr.shape[:2]
        pad = np.array([pad_x, pad_y], dtype=np.float32)
        faces = []
        for box, pts, score in found:
            box = ((box.reshape(2, 2) - pad) / scale).reshape(-1)
            box = np.clip(box, 0, [w, h, w, h])
            pts = (pts - pad) / scale
            eye_a, eye_b, nose, mouth = pts[0], pts[1], pts[2], pts[3]
            kps = np.vstack([eye_a, eye_b, nose, mouth_corners(eye_a, eye_b, mouth)])
            faces.append(Face(bbox=box, score=score, kps=kps))
        return faces
