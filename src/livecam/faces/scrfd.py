"""SCRFD face detector (insightface buffalo_l `det_10g.onnx`) on ONNX Runtime.

The frame is letterboxed into a det_size x det_size canvas anchored top-left (aspect ratio
kept, the rest zero), converted to RGB and scaled to (x - 127.5) / 128. The model gives, for
strides 8, 16 and 32 in that order, scores (sigmoid applied), box distances and keypoint
offsets, two anchors per feature-map cell, rows ordered (y * W + x) * 2 + anchor. Distances
are in stride units; boxes and keypoints are divided by the letterbox scale to get back to
frame pixels, thresholded, then suppressed by NMS.
"""

from __future__ import annotations

import logging
from typing import Any

import cv2
import numpy as np

from livecam.errors import InputError, ModelError
from livecam.faces.align import to_bgr, to_blob
from livecam.faces.face import Face
from livecam.faces.nms import nms
from livecam.runtime.graphs import Front

STRIDES: tuple[int, ...] = (8, 16, 32)
NUM_ANCHORS = 2
DET_SIZES: tuple[int, ...] = (320, 480, 640)
INPUT_MEAN = 127.5
INPUT_STD = 128.0
# The reference decoder measures overlap with inclusive pixel widths (x2 - x1 + 1).
NMS_PIXEL_OFFSET = 1.0

log = logging.getLogger("livecam")


def _front_graph(opset: int) -> Any:
    from livecam.runtime.graphs import letterbox_graph

    return letterbox_graph(None, 1.0 / INPUT_STD, -INPUT_MEAN / INPUT_STD, opset)


# The letterbox as a graph joined in front of det_10g (runtime/graphs.py): uint8 frame in.
FRONT = Front("scrfd_letterbox", _front_graph, "input.1")


class ScrfdDetector:
    """Finds faces with SCRFD: boxes, scores and 5 keypoints in frame pixels."""

    def __init__(self, session: Any, det_size: int = 640, threshold: float = 0.5, nms_iou: float = 0.4,
                 joined: Any = None) -> None:
        """`joined`: the same model with FRONT (the letterbox as a graph) in front, run instead
        of the numpy letterbox + `session` (a lane on a GPU: only the uint8 frame is uploaded)."""
        self._session = session
        self._joined = joined
        inputs = session.get_inputs()
        outputs = session.get_outputs()
        if len(inputs) != 1 or len(outputs) != 3 * len(STRIDES):
            raise ModelError(
                f"the SCRFD model should have 1 input and 9 outputs (scores, boxes, keypoints for strides "
                f"8/16/32), it has {len(inputs)} and {len(outputs)}; use insightface's det_10g.onnx "
                "(`livecam models download det_10g`)"
            )
        self._input_name = inputs[0].name
        self._output_names = [o.name for o in outputs]
        # Some exports fix the input at one square size; det_size then cannot change.
        dims = list(inputs[0].shape)[2:]
        self._fixed_size = dims[0] if len(dims) == 2 and isinstance(dims[0], int) and dims[0] == dims[1] else None
        self.det_size = self._fixed_size or 640
        self.set_det_size(det_size)
        self.threshold = float(threshold)
        self.nms_iou = float(nms_iou)
        # Anchor centres per (rows, cols, stride): the same det_size always gives the same grids.
        self._centres: dict[tuple[int, int, int], np.ndarray] = {}

    def set_det_size(self, det_size: int) -> None:
        """Change the square detection canvas (320/480/640; any multiple of 32 works)."""
        if det_size < 32 or det_size % 32 != 0:
            raise InputError(f"--det-size must be a multiple of 32 such as 320, 480 or 640, got {det_size}")
        if self._fixed_size is not None and det_size != self._fixed_size:
            log.warning("this SCRFD model only takes %dx%d input; ignoring det size %d",
                        self._fixed_size, self._fixed_size, det_size)
            return
        self.det_size = int(det_size)

    def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
        """Faces in the frame, highest score first; with max_faces > 0 only the largest ones
        (by box area, largest first)."""
        bgr = to_bgr(image)
        if bgr.shape[0] == 0 or bgr.shape[1] == 0:
            return []
        if self._joined is not None:  # the letterbox runs in the session: the uint8 frame goes in
            new_h, new_w = self._fit(*bgr.shape[:2])
            side = np.array([self.det_size, self.det_size], np.int64)
            outs = self._joined.run(self._output_names, {"pre_image": bgr, "pre_canvas": side,
                                                         "pre_resized": np.array([new_h, new_w], np.int64)})
            det_scale, height, width = float(new_h) / bgr.shape[0], self.det_size, self.det_size
        else:
            blob, det_scale = self._letterbox(bgr)
            outs = self._session.run(self._output_names, {self._input_name: blob})
            height, width = blob.shape[2], blob.shape[3]
        scores, boxes, kps = self._decode(outs, height, width)
        if scores.size == 0:
            return []
        boxes /= np.float32(det_scale)
        kps /= np.float32(det_scale)
        order = np.argsort(-scores, kind="stable")
        scores, boxes, kps = scores[order], boxes[order], kps[order]
        keep = nms(boxes, scores, self.nms_iou, offset=NMS_PIXEL_OFFSET)
        # Degenerate boxes (negative distances) or NaNs from a bad model are not faces.
        valid = (np.isfinite(boxes).all(axis=1) & np.isfinite(kps).all(axis=(1, 2))
                 & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1]))
        faces = [Face(bbox=boxes[i], score=float(scores[i]), kps=kps[i]) for i in keep if valid[i]]
        if max_faces > 0 and len(faces) > max_faces:
            faces = sorted(faces, key=lambda f: f.area, reverse=True)[:max_faces]
        return faces

    def _fit(self, h: int, w: int) -> tuple[int, int]:
        """(new_h, new_w): the frame's size scaled into the det_size square, aspect kept."""
        size = self.det_size
        ratio = float(h) / w
        if ratio > 1.0:
            new_h = size
            new_w = int(new_h / ratio)
        else:
            new_w = size
            new_h = int(new_w * ratio)
        return max(new_h, 1), max(new_w, 1)

    def _letterbox(self, bgr: np.ndarray) -> tuple[np.ndarray, float]:
        """(1, 3, S, S) float32 RGB blob of the frame scaled into the top-left corner."""
        size = self.det_size
        h = bgr.shape[0]
        new_h, new_w = self._fit(*bgr.shape[:2])
        canvas = np.zeros((size, size, 3), dtype=np.uint8)
        canvas[:new_h, :new_w] = cv2.resize(bgr, (new_w, new_h))
        # BGR->RGB, (x - mean) / std, HWC->NCHW float32, one pass per plane.
        blob = to_blob([canvas], 1.0 / INPUT_STD, -INPUT_MEAN / INPUT_STD)
        return blob, float(new_h) / h

    def _anchor_centres(self, rows: int, cols: int, stride: int) -> np.ndarray:
        key = (rows, cols, stride)
        centres = self._centres.get(key)
        if centres is None:
            ys, xs = np.mgrid[:rows, :cols]
            grid = np.stack([xs, ys], axis=-1).reshape(-1, 2).astype(np.float32) * stride
            centres = np.repeat(grid, NUM_ANCHORS, axis=0)
            self._centres[key] = centres
        return centres

    def _decode(self, outs: list[np.ndarray], height: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Thresholded scores (N,), boxes (N, 4) and keypoints (N, 5, 2) in canvas pixels."""
        n = len(STRIDES)
        all_scores, all_boxes, all_kps = [], [], []
        for i, stride in enumerate(STRIDES):
            centres = self._anchor_centres(height // stride, width // stride, stride)
            scores = np.asarray(outs[i]).reshape(-1)
            if scores.shape[0] != centres.shape[0]:
                raise ModelError(
                    f"SCRFD output {self._output_names[i]!r} has {scores.shape[0]} rows for stride {stride}, "
                    f"expected {centres.shape[0]} at {width}x{height}; the model is not a 2-anchor SCRFD "
                    "(use det_10g.onnx)"
                )
            pos = np.nonzero(scores >= self.threshold)[0]
            if pos.size == 0:
                continue
            dist = np.asarray(outs[i + n]).reshape(-1, 4)[pos] * np.float32(stride)
            offs = np.asarray(outs[i + 2 * n]).reshape(-1, 10)[pos] * np.float32(stride)
            c = centres[pos]
            boxes = np.concatenate([c - dist[:, :2], c + dist[:, 2:]], axis=1)
            kps = offs.reshape(-1, 5, 2) + c[:, None, :]
            all_scores.append(scores[pos])
            all_boxes.append(boxes)
            all_kps.append(kps)
        if not all_scores:
            return np.empty(0, np.float32), np.empty((0, 4), np.float32), np.empty((0, 5, 2), np.float32)
        return (np.concatenate(all_scores).astype(np.float32), np.concatenate(all_boxes).astype(np.float32),
                np.concatenate(all_kps).astype(np.float32))
