"""Following faces across frames: stable track ids and One-Euro smoothing of their points.

Matching: each track's box is first moved by its velocity to the new frame's time, then
detections and tracks are paired greedily by IoU, best pair first (two faces crossing keep
their ids because the prediction, not last frame's box, is compared). A track that finds no
detection for `max_missed` updates in a row is dropped; unmatched detections start new tracks.

Confirmation: update() may be given a `confirm` check (FaceMesh: is this a face at all?). It
runs once, on a track's first detection, not on every frame: a track it rejects (a whisky glass
BlazeFace scored 0.57) is followed like any other, so that it is not started and checked again
next frame, but its faces are never returned. A rejected track is checked again every
RECHECK_EVERY frames it is matched, and one that passes becomes a face (a head turned away or
half in view as its track started, which the neural swapper would otherwise skip for the whole
track): a cost only where a non-face is in view, and a small one there.

Smoothing: a One-Euro filter (Casiez et al., CHI 2012) per track on the 5 keypoints, the mesh
landmarks and the box. Its cut-off frequency rises with each point's speed, measured in eye
distances per second so that the same strength works for near and far faces: a still face is
smoothed hard, a moving one follows with little lag.

Not thread-safe: one tracker belongs to the one stage that analyses frames in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from livecam.faces.face import Face
from livecam.faces.nms import iou_matrix

DEFAULT_DT = 1.0 / 30.0  # used when timestamps do not advance
MAX_EXTRAPOLATION_S = 0.25  # never push a predicted face further ahead than this
RECHECK_EVERY = 15  # frames: a rejected track is confirmed again about twice a second at 30 FPS

# Whether each of some faces is a face at all (one bool per face, in order)
Confirm = Callable[[list[Face]], list[bool]]


@dataclass(frozen=True)
class OneEuroParams:
    min_cutoff: float  # Hz, cut-off for a still point
    beta: float  # extra Hz per (eye distance per second) of speed
    d_cutoff: float = 0.5  # Hz, cut-off for the speed estimate itself (low: noise must not open it)


def params_for_strength(smoothing: float) -> OneEuroParams | None:
    """Filter parameters for a smoothing strength in [0, 1]; None (off) at 0.

    0.5 (the default) gives a 0.3 Hz still cut-off, about 4x less detector jitter on a still
    face, and about 2 px of lag for a face crossing a 640 px frame in 4 seconds."""
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"smoothing must be between 0 and 1, got {smoothing}")
    if smoothing == 0.0:
        return None
    return OneEuroParams(min_cutoff=3.0 * 0.01**smoothing, beta=1.0 + 2.0 * (1.0 - smoothing))


def _alpha(cutoff: np.ndarray | float, dt: float) -> np.ndarray | float:
    tau = 1.0 / (2.0 * math.pi * cutoff)
    return 1.0 / (1.0 + tau / dt)


class OneEuroFilter:
    """One-Euro filter over an (N, 2) array of points, each point with its own cut-off."""

    def __init__(self, params: OneEuroParams) -> None:
        self.params = params
        self._x: np.ndarray | None = None
        self._dx: np.ndarray | None = None

    def reset(self) -> None:
        self._x = self._dx = None

    def __call__(self, points: np.ndarray, dt: float, scale: float) -> np.ndarray:
        """Filtered points; `scale` (pixels) turns speeds into face-relative units."""
        p = np.asarray(points, dtype=np.float64)
        if self._x is None or self._x.shape != p.shape or dt <= 0:
            self._x, self._dx = p.copy(), np.zeros_like(p)
            return p.astype(np.float32)
        assert self._dx is not None
        speed_raw = (p - self._x) / dt
        self._dx += _alpha(self.params.d_cutoff, dt) * (speed_raw - self._dx)
        speed = np.linalg.norm(self._dx, axis=-1, keepdims=True) / max(scale, 1.0)
        cutoff = self.params.min_cutoff + self.params.beta * speed
        self._x += _alpha(cutoff, dt) * (p - self._x)
        return self._x.astype(np.float32)


@dataclass
class _Track:
    track_id: int
    face: Face  # last output (smoothed) face
    raw_bbox: np.ndarray  # last detected box, for velocity and matching
    timestamp: float
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(2))  # box centre, px/s
    missed: int = 0
    seen: int = 1  # detections matched so far
    is_face: bool = True  # what `confirm` said of its first detection (or its last check)
    unchecked: int = 0  # frames matched since `confirm` last rejected it
    kps_filter: OneEuroFilter | None = None
    lm_filter: OneEuroFilter | None = None
    box_filter: OneEuroFilter | None = None

    def predicted_bbox(self, timestamp: float) -> np.ndarray:
        dt = min(max(timestamp - self.timestamp, 0.0), MAX_EXTRAPOLATION_S)
        shift = np.tile(self.velocity * dt, 2)
        return self.raw_bbox + shift


class FaceTracker:
    """Gives detected faces stable `track_id`s and smooths their points over time."""

    def __init__(self, smoothing: float, iou_threshold: float = 0.3, max_missed: int = 5) -> None:
        self.params = params_for_strength(smoothing)
        self.iou_threshold = float(iou_threshold)
        self.max_missed = int(max_missed)
        self._tracks: list[_Track] = []
        self._next_id = 1
        self._last_time: float | None = None

    def reset(self) -> None:
        self._tracks.clear()
        self._last_time = None

    def update(self, faces: Sequence[Face], timestamp: float, confirm: Confirm | None = None) -> list[Face]:
        """The detections of one frame, in their order, with track ids and smoothed points; those
        on a track that `confirm` rejected left out (see the module docstring)."""
        return [f for f in self.update_marked(faces, timestamp, confirm) if f is not None]

    def update_marked(self, faces: Sequence[Face], timestamp: float,
                      confirm: Confirm | None = None) -> list[Face | None]:
        """update(), with None in place of each detection on a rejected track."""
        if self._last_time is not None and timestamp < self._last_time:
            self.reset()  # time went backwards (seek, loop): old tracks say nothing about now
        self._last_time = timestamp
        pairs = self._match(faces, timestamp)
        owners: list[_Track | None] = [None] * len(faces)
        out: list[Face | None] = [None] * len(faces)
        for det_i, track_i in pairs:
            owners[det_i] = self._tracks[track_i]
            out[det_i] = self._advance(self._tracks[track_i], faces[det_i], timestamp)
        matched = {track_i for _, track_i in pairs}
        survivors = []
        for i, track in enumerate(self._tracks):
            if i not in matched:
                track.missed += 1
                if track.missed > self.max_missed:
                    continue
            survivors.append(track)
        self._tracks = survivors
        started = [det_i for det_i in range(len(faces)) if owners[det_i] is None]
        for det_i in started:
            owners[det_i] = track = self._start(faces[det_i], timestamp)
            self._tracks.append(track)
            out[det_i] = track.face
        tracks = [t for t in owners if t is not None]  # every detection has its track now
        if confirm is not None:
            for det_i, _ in pairs:
                tracks[det_i].unchecked += not tracks[det_i].is_face
            check = started + [det_i for det_i, _ in pairs if tracks[det_i].unchecked >= RECHECK_EVERY]
            if check:
                for det_i, ok in zip(check, confirm([faces[i] for i in check])):
                    tracks[det_i].is_face, tracks[det_i].unchecked = bool(ok), 0
        return [face if track.is_face else None for face, track in zip(out, tracks)]

    def rejected(self, faces: Sequence[Face], timestamp: float) -> list[bool]:
        """Whether each detection lies on a track `confirm` rejected (IoU with its predicted box at
        least the matching threshold). Changes no state."""
        bad = [t for t in self._tracks if not t.is_face]
        if not faces or not bad:
            return [False] * len(faces)
        iou = iou_matrix(np.stack([f.bbox for f in faces]), np.stack([t.predicted_bbox(timestamp) for t in bad]))
        return [bool(v) for v in iou.max(axis=1) >= self.iou_threshold]

    def predict(self, timestamp: float, extrapolate: bool = True) -> list[Face]:
        """Faces for a frame where detection was skipped: the tracks seen in the last update,
        moved along their velocity to `timestamp` when `extrapolate`. Changes no state."""
        faces = []
        for track in self._tracks:
            if track.missed or not track.is_face:
                continue
            if not extrapolate:
                faces.append(track.face)
                continue
            dt = min(max(timestamp - track.timestamp, 0.0), MAX_EXTRAPOLATION_S)
            shift = (track.velocity * dt).astype(np.float32)
            f = track.face
            faces.append(f.with_(bbox=f.bbox + np.tile(shift, 2), kps=f.kps + shift,
                                 landmarks=None if f.landmarks is None else f.landmarks + shift))
        return faces

    def _match(self, faces: Sequence[Face], timestamp: float) -> list[tuple[int, int]]:
        if not faces or not self._tracks:
            return []
        predicted = np.stack([t.predicted_bbox(timestamp) for t in self._tracks])
        iou = iou_matrix(np.stack([f.bbox for f in faces]), predicted)
        pairs = []
        used_d, used_t = set(), set()
        # Greedy, best overlap first; with a handful of faces this equals the optimal assignment
        # in practice and needs no solver.
        for flat in np.argsort(-iou, axis=None, kind="stable"):
            d, t = divmod(int(flat), iou.shape[1])
            if iou[d, t] < self.iou_threshold:
                break
            if d in used_d or t in used_t:
                continue
            used_d.add(d)
            used_t.add(t)
            pairs.append((d, t))
        return pairs

    def _start(self, face: Face, timestamp: float) -> _Track:
        track = _Track(track_id=self._next_id, face=face, raw_bbox=face.bbox.astype(np.float64), timestamp=timestamp)
        self._next_id += 1
        if self.params is not None:
            track.kps_filter = OneEuroFilter(self.params)
            track.lm_filter = OneEuroFilter(self.params)
            track.box_filter = OneEuroFilter(self.params)
        track.face = self._smooth(track, face, 0.0)
        return track

    def _advance(self, track: _Track, face: Face, timestamp: float) -> Face:
        dt = timestamp - track.timestamp
        if dt <= 0:
            dt = DEFAULT_DT
        centre_new = (face.bbox[:2] + face.bbox[2:]) / 2.0
        centre_old = (track.raw_bbox[:2] + track.raw_bbox[2:]) / 2.0
        measured = (centre_new - centre_old) / dt
        # A missed frame or two in between: the measured step spans them, dt accounts for it.
        fresh = track.missed or track.seen == 1
        track.velocity = measured if fresh else 0.5 * track.velocity + 0.5 * measured
        track.seen += 1
        track.raw_bbox = face.bbox.astype(np.float64)
        track.timestamp = timestamp
        track.missed = 0
        track.face = self._smooth(track, face, dt)
        return track.face

    def _smooth(self, track: _Track, face: Face, dt: float) -> Face:
        if self.params is None:
            return face.with_(track_id=track.track_id)
        assert track.kps_filter and track.lm_filter and track.box_filter
        scale = face.eye_distance or max(face.width, face.height) * 0.4
        kps = track.kps_filter(face.kps, dt, scale)
        box = track.box_filter(face.bbox.reshape(2, 2), dt, scale).reshape(4)
        if box[2] < box[0] or box[3] < box[1]:  # corners filtered apart on a big jump: restart
            track.box_filter.reset()
            box = track.box_filter(face.bbox.reshape(2, 2), 0.0, scale).reshape(4)
        landmarks = face.landmarks
        if landmarks is None:
            track.lm_filter.reset()
        else:
            landmarks = track.lm_filter(landmarks, dt, scale)
        return face.with_(track_id=track.track_id, kps=kps, bbox=box, landmarks=landmarks)
