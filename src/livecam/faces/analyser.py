"""FaceAnalyser: detection, landmarks, embeddings, selection and tracking in one call.

Per frame: detect every face (in a picture, only those FaceMesh sees as faces too: confirmed;
in video and live, each track once as it starts: _update_tracks) ->
drop those under --face-min-size -> (reference or --map mode)
embed them all in one batch and keep the faces of the reference people -> keep the first by
--face-selector-order (default: the largest) that a processor can change (selection.changeable:
big enough, and fitted by FaceMesh where landmarks are needed), or all (--many-faces, --map) in
that order -> FaceMesh landmarks for the kept faces when a processor needs them -> tracking and smoothing
(live and video). In live mode, detection may run only every Nth frame (the governor's knob):
in between, the previous frame's faces are carried and, when FaceMesh is loaded, re-fitted on
the new frame, which follows the face as MediaPipe's own tracking does.

analyse(track=False) keeps no state, so file workers may call it from several threads;
analyse(track=True) is for one thread (the live analysis stage). Video files split the two:
workers call analyse(track=False, choose=False) in parallel, then track() runs strictly in frame
order (one call at a time; see pipeline.file): it confirms each new track, and without
--many-faces and --map chooses "the one" there, among the confirmed faces, kept from the last
frame while changeable (selection.keep_previous) as live; then it smooths. Chosen in a worker, a
non-face ranked first (a glass larger than the face) hid the face before tracking rejected it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import cv2
import numpy as np

from livecam.errors import ModelError
from livecam.faces import selection
from livecam.faces.align import arcface_template
from livecam.faces.face import Face
from livecam.faces.tracking import Confirm, FaceTracker
from livecam.settings import AnalysisSettings

# The embedded BlazeFace runs its full-range model in every command: the short-range one is
# faster but misses faces under about 140 px at 1280x720 (someone a step back from the webcam,
# two people on a sofa), and live mode must find what `livecam video` finds on the same frames.
# Its cost is in BENCHMARKS.md; the governor's detect-every-2nd-frame step absorbs it.
BLAZEFACE = "blazeface_full_range"
# A face that fills its image (an aligned 112x112 crop, as face datasets ship them) is outside
# what detectors are trained on; on a padded copy it is an ordinary face. Photos get that retry
# whenever no face is found; frames only up to this size (crops, thumbnails), as a faceless
# video frame would otherwise pay for two detections.
PAD_RETRY_MAX_SIDE = 512
PAD_FRACTION = 0.5  # border on each side, as a fraction of the image's longer side


class Detector(Protocol):
    def detect(self, image_bgr: np.ndarray, max_faces: int = 0) -> list[Face]: ...


class Landmarker(Protocol):
    def refine(self, image_bgr: np.ndarray, faces: list[Face]) -> list[Face]: ...


class Embedder(Protocol):
    def embed(self, image_bgr: np.ndarray, faces: Sequence[Face]) -> list[Face]: ...


class Tracker(Protocol):
    def update_marked(self, faces: list[Face], timestamp: float,
                      confirm: Confirm | None = None) -> list[Face | None]: ...

    def rejected(self, faces: list[Face], timestamp: float) -> list[bool]: ...

    def reset(self) -> None: ...


@dataclass(frozen=True)
class ModelNames:
    """Which model files the analyser runs (for describe() and cache keys)."""

    detector: str
    landmarker: str | None = None
    embedder: str | None = None
    stamp: str = ""  # sizes and mtimes of the files, so cached results follow model changes


@dataclass(frozen=True)
class Analysis:
    """One frame's FaceAnalyser.analyse: the faces to process, and how many faces its detection
    found before selection (0 where no detection ran: faces carried from an earlier frame), which
    `livecam image` tells the user the faces it left apart from."""

    faces: list[Face]
    found: int


class FaceAnalyser:
    """Finds, describes, selects and follows faces. See the module docstring for the steps."""

    def __init__(self, detector: Detector, settings: AnalysisSettings, *, names: ModelNames,
                 landmarker: Landmarker | None = None, embedder: Embedder | None = None,
                 need_landmarks: bool = False, tracker: Tracker | None = None,
                 references: Sequence[np.ndarray] = (), confirm: bool = False) -> None:
        self.detector = detector
        # Pictures: every detection confirmed by FaceMesh (confirmed); a frame of a video or
        # a live run would pay a FaceMesh run per face for it
        self.confirm = confirm and landmarker is not None
        self.settings = settings
        self.names = names
        self.landmarker = landmarker
        self.embedder = embedder
        self.need_landmarks = need_landmarks and landmarker is not None
        self.tracker = tracker
        self.references = [np.asarray(r, dtype=np.float32).reshape(-1) for r in references]
        if self.references and embedder is None:
            raise ValueError("reference matching needs an embedder")
        self._detect_every = max(1, int(settings.detect_every))
        self._since_detect = 0
        self._carried: list[Face] | None = None
        self._chosen: Face | None = None  # a video file's last "the one" (track())

    # ---- construction ---------------------------------------------------------------------------
    @classmethod
    def create(cls, settings: AnalysisSettings, store: Any, providers: Any, *, need_landmarks: bool,
               need_embedding: bool, live: bool, intra_op_threads: int = 0,
               references: Sequence[np.ndarray] = (), still: bool = False) -> "FaceAnalyser":
        """Open the models the settings call for through the model store (ModelError when one is
        missing and cannot be downloaded). `still`: the frames are single pictures, where the
        embedded detector looks for faces at every roll (faces/rolls.py)."""
        detector_name = pick_detector(settings.detector, store)

        def plain() -> Any:
            return store.open_session(detector_name, providers, intra_op_threads)

        if detector_name == "det_10g":
            from livecam.faces.scrfd import ScrfdDetector, front
            from livecam.runtime.lanes import uses_device_fronts

            detector: Detector
            if uses_device_fronts(providers):
                # A GPU lane runs the model in its joined sessions, one per det size, only: the
                # file's description stands where the plain session was (as ModelStore.open_joined
                # gives the processors), and that opens only for a size whose join fails.
                def fronts(size: int) -> Any:
                    return store.open_joined(detector_name, providers, intra_op_threads,
                                             lambda described: front(size))[1]

                detector = ScrfdDetector(store.describe(detector_name) or plain(), det_size=settings.det_size,
                                         threshold=settings.det_threshold, fronts=fronts, plain=plain)
            else:
                detector = ScrfdDetector(plain(), det_size=settings.det_size, threshold=settings.det_threshold)
        else:
            from livecam.faces.blazeface import BlazeFaceDetector
            from livecam.faces.rolls import AnyRoll

            # Pictures find faces at any roll (4 detections); video and live frames upright faces
            # only: 4 detections took 73 ms against 18 ms on a 640x480 frame (2 loaded CPU cores,
            # medians of 15) and `livecam bench --mode video` fell from 52 to 33 FPS. Source and
            # reference photos are searched at every roll either way (analyse_photo).
            detector = BlazeFaceDetector(plain(), variant="full", threshold=settings.det_threshold)
            if still:
                detector = AnyRoll(detector)
        # FaceMesh is small and also gives the source photo's landmarks, so it is always loaded;
        # it only runs on targets when a processor needs landmarks.
        from livecam.faces.facemesh import FaceMesh

        landmarker = FaceMesh(store.open_session("face_landmark", providers, intra_op_threads))
        embedder = None
        if need_embedding or references:
            from livecam.faces.arcface import ArcFaceEmbedder

            try:
                embedder = ArcFaceEmbedder(store.open_session("w600k_r50", providers, intra_op_threads))
            except ModelError as exc:
                option = "--map" if settings.face_map else "--reference" if settings.reference else ""
                if not option:
                    raise
                # Say why a mesh-swapper run wants a neural model at all.
                raise ModelError(f"{option} needs the ArcFace model w600k_r50 to recognise people: {exc.message}",
                                 exit_code=exc.exit_code) from exc
        # Live and video track (stable ids, each new track confirmed, the one face kept; live
        # also detection every nth frame), even unsmoothed; a picture confirms every detection.
        tracker = None if still else FaceTracker(smoothing=settings.smoothing)
        used = [detector_name, "face_landmark"] + (["w600k_r50"] if embedder is not None else [])
        names = ModelNames(detector_name, "face_landmark", "w600k_r50" if embedder is not None else None,
                           stamp=_stamp(store, used))
        return cls(detector, settings, names=names, landmarker=landmarker, embedder=embedder,
                   need_landmarks=need_landmarks, tracker=tracker, references=references,
                   confirm=still)

    def set_references(self, references: Sequence[np.ndarray]) -> None:
        """Keep only faces of these people (normed embeddings); with --map (settings.face_map)
        also set each kept face's source_key to the index of its reference."""
        if references and self.embedder is None:
            raise ValueError("reference matching needs an embedder")
        self.references = [np.asarray(r, dtype=np.float32).reshape(-1) for r in references]

    # ---- governor knobs ---------------------------------------------------------------------------
    @property
    def detect_every(self) -> int:
        return self._detect_every

    def set_detect_every(self, n: int) -> None:
        """Detect on every nth tracked frame (1: every frame)."""
        self._detect_every = max(1, int(n))

    @property
    def sparse_detection_saves(self) -> bool:
        """Whether detecting on every 2nd frame saves work. A carried frame runs FaceMesh on each
        face in place of the detection: that saves the detection where FaceMesh runs on every
        frame anyway (a processor needs landmarks) or the detector costs several FaceMesh runs
        (SCRFD, at a det size). The embedded BlazeFace alone is one run of the same 192 px input
        as FaceMesh: carrying only swapped one run for another (one per face, so more with
        several faces), and analysis took as long."""
        return self.need_landmarks or self.det_size is not None

    def set_det_size(self, size: int) -> None:
        """Change the detector's input size (SCRFD only; BlazeFace has a fixed input)."""
        setter = getattr(self.detector, "set_det_size", None)
        if setter is not None:
            setter(int(size))

    def warm(self, image: np.ndarray, sizes: Sequence[int], runs: int = 1) -> None:
        """Open and run every model this analyser holds `runs` times before a lane's first frame
        (pipeline/engine.py), whatever `image` shows: the detector at every det size in `sizes`
        (so that a governor step builds nothing: faces/scrfd.py; a detector with one input size
        at that size), then the landmarker and the embedder on a face placed in the middle of
        `image` (warm_face). Those run on frames only where a processor needs landmarks or a
        reference is matched, and live between detections; with CUDA graphs (a capture on a
        fixed-shape session's third run) none of them may capture mid-stream."""
        warm = getattr(self.detector, "warm", None)
        if warm is not None:
            warm(image, sizes, runs)
        else:
            for _ in range(runs):
                self.detector.detect(image)
        face = warm_face(image)
        for _ in range(runs):
            if self.landmarker is not None:
                self.landmarker.refine(image, [face])
            if self.embedder is not None:
                self.embedder.embed(image, [face])

    @property
    def det_size(self) -> int | None:
        return getattr(self.detector, "det_size", None)

    @property
    def cache_tag(self) -> str:
        """What a photo's analysis depends on besides its bytes (see faces.source)."""
        # "rolls": photos searched at every quarter turn, FaceMesh re-cropped (faces/rolls.py);
        # photos cached before that were analysed upright only. "confirmed": a face found only
        # on the padded copy counts where FaceMesh sees one (detect_padded); photos cached before
        # that kept a glass on a table as their face.
        return f"{self.names}|{self.det_size}|{self.settings.det_threshold}|rolls|confirmed"

    def describe(self) -> str:
        parts = [f"detector {self.names.detector}"]
        if self.det_size is not None:
            parts[0] += f" @{self.det_size}"
        if self.need_landmarks:
            parts.append(f"landmarks {self.names.landmarker}")
        if self.names.embedder:
            parts.append(f"embedder {self.names.embedder}")
        return ", ".join(parts)

    # ---- per frame --------------------------------------------------------------------------------
    def analyse(self, image: np.ndarray, timestamp: float | None = None, track: bool = False,
                timings: dict[str, float] | None = None, choose: bool = True) -> Analysis:
        """The faces to process in this frame, selected (and tracked when `track`), and the
        number this call's detection found before selection.

        `choose` False (a video file's workers, track() to follow): without --many-faces and
        --map, every candidate for "the one", ranked, the first that FaceMesh fits fitted where
        landmarks are needed (_fit_first); track() chooses. Ignored without a tracker.
        `timings` (optional) receives ms for "detect", "landmarks", "embed" and "track"."""
        timings = {} if timings is None else timings
        choose = choose or track or self.tracker is None
        # With nobody in view there is nothing to carry: detect (a swap-free frame can afford it).
        carry = track and bool(self._carried) and self._since_detect < self._detect_every
        ts = time.perf_counter() if timestamp is None else float(timestamp)
        hidden: list[Face] = []  # on a track FaceMesh rejected: tracked, never selected
        found = 0
        t0 = time.perf_counter()
        if carry:
            faces = list(self._carried or [])
            self._since_detect += 1
            timings["detect"] = 0.0
        else:
            faces = self.detector.detect(image)
            if faces and self.confirm:
                faces = confirmed(image, faces, self.landmarker, keep_cut=True)
            if not faces and max(image.shape[:2]) <= PAD_RETRY_MAX_SIDE:
                faces = detect_padded(self.detector, image, self.landmarker)
            timings["detect"] = _ms(t0)
            found = len(faces)
            if track and self.tracker is not None and self.settings.one_face and faces:
                # A glass bigger than the face would be "the one" every frame, and hide the face.
                marks = self.tracker.rejected(faces, ts)
                hidden = [f for f, m in zip(faces, marks) if m]
                faces = [f for f, m in zip(faces, marks) if not m]
            previous = self._carried[0] if track and self.settings.one_face and self._carried else None
            faces = self._select(image, faces, timings, previous, choose)
        if faces and self.landmarker is not None and (self.need_landmarks or carry):
            # Carried faces are re-fitted even when no processor needs landmarks: the mesh
            # moves their keypoints to where the face is now, for a fraction of a detection.
            t1 = time.perf_counter()
            if carry:
                faces = self._refit(image, faces)
            elif self.settings.one_face:
                faces = self._first_fitted(image, faces) if choose else self._fit_first(image, faces)
            else:
                faces = self._mesh(image, faces)
            timings["landmarks"] = _ms(t1)
        if track:
            if not carry:
                self._since_detect = 1
            self._carried = faces
            if self.tracker is not None:
                t2 = time.perf_counter()
                faces = faces + hidden  # keeps their tracks alive, so they are not confirmed again
                marked = self._update_tracks(image, faces, ts)
                self._carried = [raw for raw, kept in zip(faces, marked) if kept is not None]  # no glass re-fitted
                faces = [f for f in marked if f is not None]
                timings["track"] = _ms(t2)
        return Analysis(faces, found)

    def _update_tracks(self, image: np.ndarray, faces: list[Face], timestamp: float) -> list[Face | None]:
        """The tracker's update, each new track confirmed by FaceMesh once (a frame's faces are
        not confirmed, as a picture's are: a FaceMesh run per face per frame). A face FaceMesh
        has run on in this frame already (Face.fit_tried) is not fitted again: its fit or its
        "no face" stands. A rejected track is checked again every so often (tracking's module
        docstring)."""
        assert self.tracker is not None
        landmarker = self.landmarker
        if landmarker is None:
            return self.tracker.update_marked(faces, timestamp)

        def confirm(new: list[Face]) -> list[bool]:
            unfit = [f for f in new if not f.fit_tried]
            fits = iter(landmarker.refine(image, unfit) if unfit else [])
            fitted = [f if f.fit_tried else next(fits) for f in new]
            return [is_face(image, given, fit, keep_cut=True) for given, fit in zip(new, fitted)]

        return self.tracker.update_marked(faces, timestamp, confirm)

    @property
    def tracks(self) -> bool:
        """Whether track() changes faces (then a file pipeline must call it in frame order)."""
        return self.tracker is not None

    def track(self, faces: list[Face], timestamp: float, image: np.ndarray,
              timings: dict[str, float] | None = None) -> list[Face]:
        """The faces to process among those analyse(track=False, choose=False) found in `image`:
        the ordered step of a video file (frames in order, one call at a time). Each new track is
        confirmed (_update_tracks), a rejected one's faces dropped; without --many-faces and
        --map the one face is chosen among the rest, last frame's kept while changeable; track
        ids and smoothed points. Carries nothing: every frame of a file is detected."""
        if self.tracker is None:
            return faces
        t0 = time.perf_counter()
        if self.settings.one_face:
            faces = self._fit_kept(image, faces)
        faces = [f for f in self._update_tracks(image, faces, float(timestamp)) if f is not None]
        if self.settings.one_face:
            faces = selection.first_changeable(selection.keep_previous(faces, self._chosen), self.need_landmarks)
            self._chosen = faces[0] if faces else None
        if timings is not None:
            timings["track"] = _ms(t0)
        return faces

    def _fit_kept(self, image: np.ndarray, candidates: list[Face]) -> list[Face]:
        """The candidates, with last frame's face (keep_previous) fitted by FaceMesh where a
        processor needs landmarks and the worker did not reach it: _fit_first stops at the first
        that fits, and the kept one may rank after it. Before tracking, so its landmarks are
        smoothed too; FaceMesh runs here only on frames where rank and hysteresis disagree."""
        if not (self.need_landmarks and candidates and self._chosen is not None):
            return candidates
        kept = selection.keep_previous(candidates, self._chosen)[0]
        at = next(i for i, f in enumerate(candidates) if f is kept)
        if kept.fit_tried or not selection.usable(kept):
            return candidates
        return [*candidates[:at], *self._mesh(image, [kept]), *candidates[at + 1:]]

    def reset_tracking(self) -> None:
        """Forget the tracks and the carried faces: the next frame starts afresh (a new file or segment)."""
        if self.tracker is not None:
            self.tracker.reset()
        self._carried = self._chosen = None
        self._since_detect = 0

    def _refit(self, image: np.ndarray, faces: list[Face]) -> list[Face]:
        """FaceMesh on carried faces, their boxes moved with the landmarks so the next crop
        follows the face."""
        # Each crop on the face's level box from its last mesh (as MediaPipe tracks): on the
        # detector's box FaceMesh would run twice a frame for a tilted head (faces/facemesh.py).
        from livecam.faces.facemesh import level_box

        crops = [f.with_(bbox=level_box(f.landmarks, f.kps))
                 if f.landmarks is not None and len(f.landmarks) > 2 else f for f in faces]
        refined = self._mesh(image, crops)
        out = []
        for old, new in zip(faces, refined):
            if new is not old and old.landmarks is not None and new.landmarks is not None \
                    and old.landmarks.shape == new.landmarks.shape:
                shift = (new.landmarks - old.landmarks).mean(axis=0)
                new = new.with_(bbox=old.bbox + np.tile(shift, 2))
            out.append(new)
        return out

    def _select(self, image: np.ndarray, faces: list[Face], timings: dict[str, float],
                previous: Face | None = None, choose: bool = True) -> list[Face]:
        """`previous`: last frame's "the one" (live), kept while changeable (selection.keep_previous).
        `choose` False: every candidate for "the one", ranked (analyse)."""
        settings = self.settings
        faces = selection.large_enough(faces, settings.face_min_size)  # before embedding: small ones cost nothing
        if not faces:
            return []
        if self.references:
            t = time.perf_counter()
            faces = self.embedder.embed(image, faces)  # type: ignore[union-attr]
            timings["embed"] = _ms(t)
            if settings.face_map:
                faces = selection.match_reference(faces, self.references, settings.reference_distance)
                return selection.order_faces(faces, settings.face_selector_order)
            faces = selection.filter_by_reference(faces, self.references, settings.reference_distance)
        if not settings.one_face:
            return selection.select_faces(faces, settings.many_faces, settings.face_selector_order)
        candidates = selection.keep_previous(selection.ranked(faces, settings.face_selector_order), previous)
        if not choose or (self.need_landmarks and self.landmarker is not None):
            # Every candidate, best first: which one a processor can change is known once
            # FaceMesh has run (_first_fitted), which is a face once tracking confirmed it (track).
            return candidates
        return selection.first_changeable(candidates)

    def _first_fitted(self, image: np.ndarray, candidates: list[Face]) -> list[Face]:
        """The first usable candidate that FaceMesh fits (selection.changeable), fitted. None
        fits: the first candidate, as FaceMesh left it (the swapper's warning says why it is
        unchanged)."""
        chosen = selection.first_changeable(self._fit_first(image, candidates), need_fit=True)
        if chosen and not selection.usable(chosen[0]):  # not tried (too small)
            return self._mesh(image, chosen)
        return chosen

    def _fit_first(self, image: np.ndarray, candidates: list[Face]) -> list[Face]:
        """The candidates, each usable one FaceMesh tried as it left it: FaceMesh runs on the next
        only where one before it failed, so the usual frame pays for one fit."""
        tried = list(candidates)
        for i, face in enumerate(candidates):
            if selection.usable(face):
                tried[i] = self._mesh(image, [face])[0]
                if selection.changeable(tried[i], need_fit=True):
                    break
        return tried

    def _mesh(self, image: np.ndarray, faces: list[Face]) -> list[Face]:
        """FaceMesh on `faces` in a frame, each marked fit_tried: tracking takes its verdict."""
        return [f.with_(fit_tried=True) for f in self.landmarker.refine(image, faces)]  # type: ignore[union-attr]

    # ---- photos ---------------------------------------------------------------------------------
    def analyse_photo(self, image: np.ndarray) -> tuple[Face | None, int]:
        """(largest face with landmarks and, when an embedder is loaded, its embedding; number of
        faces found) for a source or reference photo. Confirmed by FaceMesh as a frame's faces
        are (a letterboxed table's glass was put in as the source face); a face cut by the edge
        is kept, as there: a tight headshot is a usual source photo."""
        found = _at_any_roll(self.detector).detect(image)
        faces = confirmed(image, found, self.landmarker, keep_cut=True) or detect_padded(
            self.detector, image, self.landmarker)
        best = selection.largest_face(faces)
        if best is None:
            return None, 0
        # Embed from the detector's keypoints, as targets are embedded in _select, so that a
        # reference photo and the same face in a frame give the same embedding.
        if self.embedder is not None:
            best = self.embedder.embed(image, [best])[0]
        if self.landmarker is not None:
            best = self.landmarker.refine(image, [best])[0]
        return best, len(faces)


def warm_face(image: np.ndarray) -> Face:
    """A face as a detector would report one, centred in `image` and half its shorter side
    wide: what FaceAnalyser.warm runs the landmarker and the embedder on."""
    h, w = image.shape[:2]
    side = max(1.0, min(h, w) / 2.0)
    x0, y0 = (w - side) / 2.0, (h - side) / 2.0
    kps = arcface_template(112) * np.float32(side / 112.0) + np.array([x0, y0], np.float32)
    return Face(bbox=np.array([x0, y0, x0 + side, y0 + side], np.float32), score=1.0, kps=kps)


def _at_any_roll(detector: Any) -> Any:
    """The embedded detector run at every quarter turn (faces/rolls.py); SCRFD as it is."""
    from livecam.faces.blazeface import BlazeFaceDetector
    from livecam.faces.rolls import AnyRoll

    return AnyRoll(detector) if isinstance(detector, BlazeFaceDetector) else detector


def detect_padded(detector: Detector, image: np.ndarray, confirm: Landmarker | None = None) -> list[Face]:
    """Faces found on a copy of the image with a black border, in the image's coordinates,
    where `confirm` (FaceMesh) sees a face too: on the border's black the detector took a
    whisky glass on a table for a face (group6.jpg's lower left, score 0.57), which was then
    swapped as a target and put in as a --source photo's face.
    Upright only (AnyRoll.detect_turns): a crop that tight is an aligned face, upright by
    construction, and on obama2.jpg's aligned 112 px crop a quarter turn scored 0.73 against
    the upright 0.71, with its eyes 11 px off."""
    pad = max(1, round(max(image.shape[:2]) * PAD_FRACTION))
    padded = cv2.copyMakeBorder(image, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=(0, 0, 0))
    h, w = image.shape[:2]
    faces = []
    turns = getattr(detector, "detect_turns", None)
    for face in (turns(padded, (0,), 0) if turns is not None else detector.detect(padded)):
        bbox = np.clip(face.bbox - pad, 0, [w, h, w, h])
        if bbox[2] > bbox[0] and bbox[3] > bbox[1]:  # a "face" found in the border alone is none
            faces.append(face.with_(bbox=bbox, kps=face.kps - pad))
    return faces if confirm is None else confirmed(image, faces, confirm)


def confirmed(image: np.ndarray, faces: list[Face], landmarker: Landmarker | None,
              keep_cut: bool = False) -> list[Face]:
    """The faces FaceMesh sees as faces too (its presence over the threshold), as the detector
    gave them (a photo is embedded from the detector's keypoints; the neural swapper aligns by
    them). A letterboxed picture of a table (group6.jpg's lower left with a black border) had
    its whisky glass found (0.57) and swapped as a face: FaceMesh gave it 0.002, and every face
    of the photos in shared/faces 1.000, the six of group6.jpg among them.
    `keep_cut`: a face whose box reaches the picture's edge is kept all the same: FaceMesh
    gave obama.jpg cut through the middle of the face 0.16, and the neural swapper swaps what
    shows of it (a face found on a padded copy reaches the edge by construction: not kept)."""
    if landmarker is None or not faces:
        return faces
    return [face for face, fitted in zip(faces, landmarker.refine(image, faces))
            if is_face(image, face, fitted, keep_cut)]


def is_face(image: np.ndarray, face: Face, fitted: Face, keep_cut: bool = False) -> bool:
    """confirmed's rule for one `face` as the detector gave it, `fitted` as FaceMesh left it."""
    h, w = image.shape[:2]
    x1, y1, x2, y2 = face.bbox
    cut = keep_cut and (x1 <= 1 or y1 <= 1 or x2 >= w - 1 or y2 >= h - 1)
    return fitted.landmarks is not None or cut


def pick_detector(choice: str, store: Any) -> str:
    """Catalog name of the detector for --detector CHOICE, the same in every command: SCRFD when
    asked for, or for `auto` when det_10g is already present (auto never downloads it); else the
    embedded BlazeFace (full range)."""
    if choice == "scrfd" or (choice == "auto" and store.is_present("det_10g")):
        return "det_10g"
    return BLAZEFACE


def _stamp(store: Any, names: list[str]) -> str:
    parts = []
    for name in names:
        try:
            st = store.file_path(name).stat()
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
        except (OSError, AttributeError):
            parts.append(name)
    return ";".join(parts)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0
