"""SCRFD face detector (insightface buffalo_l `det_10g.onnx`) on ONNX Runtime.

The frame is letterboxed into a det_size x det_size canvas anchored top-left (aspect ratio
kept, the rest zero), converted to RGB and scaled to (x - 127.5) / 128. The model gives, for
strides 8, 16 and 32 in that order, scores (sigmoid applied), box distances and keypoint
offsets, two anchors per feature-map cell, rows ordered (y * W + x) * 2 + anchor. Distances
are in stride units; boxes and keypoints are divided by the letterbox scale to get back to
frame pixels, thresholded, then suppressed by NMS.

On a lane with device fronts (runtime/lanes.py: a GPU), the letterbox runs in the session as a
graph joined in front of the model, so only the uint8 frame is uploaded. There the detector is
one session per det size (`front(size)`): the canvas is a constant and det_10g's input is
rewritten to [1, 3, size, size], so ONNX Runtime folds the model's Shape nodes and nothing past
the letterbox has a dynamic dim. Only the frame's height and width stay dynamic (known per
stream). set_det_size (the governor's 640 -> 320 step) only switches between those sessions; the
lane warm-up (pipeline/engine.py) builds and runs every size the governor can step to before
the first frame (`warm`), and a size that was not warmed is built on its first detection.
A frame outside the TensorRT frame profile (providers.frame_in_profile: over 2160 x 3840,
under 64) takes the numpy path, through the plain session, opened then.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import cv2
import numpy as np

from livecam.errors import InputError, ModelError
from livecam.faces.align import to_bgr, to_blob
from livecam.faces.face import Face
from livecam.faces.nms import nms
from livecam.models.catalog import download_command
from livecam.runtime.graphs import Front
from livecam.runtime.providers import PROFILE_FRAME_H, PROFILE_FRAME_W, frame_in_profile

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


# The letterbox as a graph joined in front of det_10g (runtime/graphs.py): uint8 frame in, the
# canvas side an input (one session for every det size).
FRONT = Front("scrfd_letterbox", _front_graph, "input.1", frame_input="image")


def front(size: int) -> Front:
    """The letterbox at one det size joined in front of det_10g with its input fixed to
    [1, 3, size, size] (a lane's detector on a GPU: see the module docstring)."""
    from livecam.runtime.graphs import letterbox_graph

    def build(opset: int) -> Any:
        return letterbox_graph(size, 1.0 / INPUT_STD, -INPUT_MEAN / INPUT_STD, opset)

    # `resized` (new_h, new_w) is the frame scaled into the square: one side `size`, the other
    # 1 to `size`; optimised for the landscape frame the frame profile is (providers.PROFILE_FRAME_*).
    opt = (max(1, size * PROFILE_FRAME_H[1] // PROFILE_FRAME_W[1]), size)
    resized = ((1, 1), opt, (size, size))
    return Front(f"scrfd_letterbox_{size}", build, "input.1", input_shape=(1, 3, size, size), frame_input="image",
                 shape_values=(("resized", resized),))


class ScrfdDetector:
    """Finds faces with SCRFD: boxes, scores and 5 keypoints in frame pixels."""

    def __init__(self, session: Any, det_size: int = 640, threshold: float = 0.5, nms_iou: float = 0.4,
                 joined: Any = None, fronts: Callable[[int], Any] | None = None,
                 plain: Callable[[], Any] | None = None) -> None:
        """`joined`: the same model with FRONT (the letterbox as a graph, any det size) in front,
        run instead of the numpy letterbox + `session`. `fronts(size)`: opens the model with
        front(size) in front (None when it cannot be joined: that size keeps the numpy path);
        one session per det size, which a lane on a GPU uses (only the uint8 frame goes up).
        `plain`: opens the session the numpy path runs, on the first size whose join fails;
        given, `session` is only read for the model's inputs and outputs (it may be a
        models.store.ModelDescription)."""
        self._session = session if plain is None else None
        self._plain = plain
        self._any_size = joined
        self._fronts = fronts
        self._by_size: dict[int, Any] = {}  # det size -> its fixed-size joined session (or None)
        inputs = session.get_inputs()
        outputs = session.get_outputs()
        if len(inputs) != 1 or len(outputs) != 3 * len(STRIDES):
            raise ModelError(
                f"the SCRFD model should have 1 input and 9 outputs (scores, boxes, keypoints for strides "
                f"8/16/32), it has {len(inputs)} and {len(outputs)}; use insightface's det_10g.onnx "
                f"(`{download_command('det_10g')}`)"
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

    @property
    def joined(self) -> Any:
        """The session with the letterbox in front that detect() runs at the current det size
        (None: the numpy letterbox and the plain session). Opens nothing."""
        if self._fronts is not None:
            return self._by_size.get(self.det_size)
        return self._any_size

    def _joined_at(self, size: int) -> Any:
        if self._fronts is None:
            return self._any_size
        if size not in self._by_size:  # not warmed (engine.py warms the governor's sizes)
            log.debug("SCRFD: opening the %dx%d detector session on first use", size, size)
            self._by_size[size] = self._fronts(size)
            if self._by_size[size] is None:
                self._runner()  # opened now, by the warm-up, rather than on a frame
        return self._by_size[size]

    def _runner(self) -> Any:
        """The plain session (numpy letterbox path), opened on first need where only a description was given."""
        if self._session is None:
            assert self._plain is not None
            self._session = self._plain()
        return self._session

    def warm(self, image: np.ndarray, sizes: Sequence[int], runs: int = 1) -> None:
        """Open the session of every det size in `sizes` and run each `runs` times on `image`
        (buffers bound, CUDA kernels chosen) so that set_det_size later builds nothing. The det
        size is left as it was."""
        for size in dict.fromkeys(int(s) for s in sizes):
            if self._fixed_size is not None and size != self._fixed_size:
                continue
            for _ in range(runs):
                self._detect_at(image, size)

    def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
        """Faces in the frame, highest score first; with max_faces > 0 only the largest ones
        (by box area, largest first)."""
        faces = self._detect_at(image, self.det_size)  # read once: the governor may change it
        if max_faces > 0 and len(faces) > max_faces:
            faces = sorted(faces, key=lambda f: f.area, reverse=True)[:max_faces]
        return faces

    def _detect_at(self, image: np.ndarray, size: int) -> list[Face]:
        bgr = to_bgr(image)
        if bgr.shape[0] == 0 or bgr.shape[1] == 0:
            return []
        joined = self._joined_at(size)
        if joined is not None and not frame_in_profile(bgr.shape[0], bgr.shape[1]):
            joined = None  # outside the frame profile TensorRT would refuse it: the numpy path
        if joined is not None:  # the letterbox runs in the session: the uint8 frame goes in
            new_h, new_w = self._fit(bgr.shape[0], bgr.shape[1], size)
            feeds = {"pre_image": bgr, "pre_resized": np.array([new_h, new_w], np.int64)}
            if joined is self._any_size:  # the canvas is an input there, a constant in front(size)
                feeds["pre_canvas"] = np.array([size, size], np.int64)
            outs = joined.run(self._output_names, feeds)
            det_scale, height, width = float(new_h) / bgr.shape[0], size, size
        else:
            blob, det_scale = self._letterbox(bgr, size)
            outs = self._runner().run(self._output_names, {self._input_name: blob})
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
        return [Face(bbox=boxes[i], score=float(scores[i]), kps=kps[i]) for i in keep if valid[i]]

    def _fit(self, h: int, w: int, size: int | None = None) -> tuple[int, int]:
        """(new_h, new_w): the frame's size scaled into the size (det_size) square, aspect kept."""
        size = self.det_size if size is None else size
        ratio = float(h) / w
        if ratio > 1.0:
            new_h = size
            new_w = int(new_h / ratio)
        else:
            new_w = size
            new_h = int(new_w * ratio)
        return max(new_h, 1), max(new_w, 1)

    def _letterbox(self, bgr: np.ndarray, size: int | None = None) -> tuple[np.ndarray, float]:
        """(1, 3, S, S) float32 RGB blob of the frame scaled into the top-left corner (S: size,
        by default det_size)."""
        size = self.det_size if size is None else size
        h = bgr.shape[0]
        new_h, new_w = self._fit(bgr.shape[0], bgr.shape[1], size)
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
