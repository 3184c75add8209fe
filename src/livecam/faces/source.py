"""SourceIdentity: the face to put on every target, analysed once.

analyse_source() reads each photo of one person (any format read_image accepts), takes the
largest face of each, and averages their normalised embeddings. The per-photo analysis (box,
keypoints, landmarks, embedding) is cached by file content and the models that produced it: in
memory for the process, and on disk in the user cache folder so that a second run skips it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from livecam.atomic import AtomicOutput
from livecam.errors import InputError, LivecamError, NoFaceError
from livecam.faces.arcface import normalise
from livecam.faces.face import Face
from livecam.paths import why_missing

if TYPE_CHECKING:
    from livecam.settings import AnalysisSettings

log = logging.getLogger("livecam")

# Photos whose embeddings are farther apart than this are taken to show different people.
# Same person across photos: typically under about 1.1; strangers: 1.25-1.41 (sqrt 2).
MAX_SAME_PERSON_DISTANCE = 1.2
# A source face smaller than this (px between the eyes) is blown up on most targets: the user is
# warned that the swap will look blurred (the processors skip targets under 24 px).
SMALL_SOURCE_EYE_DISTANCE = 32.0
# A source face turned further than this (Face.yaw) shows one side foreshortened or hidden: the
# user is warned that part of the swapped face will be stretched or stay the target's.
TURNED_SOURCE_YAW = 0.7
_CACHE_VERSION = "3"  # 2: the number of faces in the photo is kept too; 3: faces confirmed by FaceMesh


@dataclass(frozen=True)
class SourceIdentity:
    paths: tuple[Path, ...]  # the photos it was built from
    image: np.ndarray  # BGR uint8 photo the face below lives in (the first photo)
    face: Face  # largest face of that photo, with landmarks when FaceMesh ran
    embedding: np.ndarray | None  # mean of the photos' normed ArcFace embeddings, re-normed

    @property
    def name(self) -> str:
        return ", ".join(p.name for p in self.paths)


@dataclass
class SourceCache:
    """Per-photo analysis results (the face used and how many faces the photo holds) by
    content key; `folder` None keeps them in memory only."""

    folder: Path | None = None
    _memory: dict[str, tuple[Face, int]] = field(default_factory=dict)

    def get(self, key: str) -> tuple[Face, int] | None:
        entry = self._memory.get(key)
        if entry is None and self.folder is not None:
            entry = _load_face(self.folder / f"{key}.npz")
            if entry is not None:
                self._memory[key] = entry
        return entry

    def put(self, key: str, face: Face, count: int = 1) -> None:
        self._memory[key] = (face, count)
        if self.folder is not None:
            _save_face(self.folder / f"{key}.npz", face, count)


def analyse_source(paths: Sequence[Path | str], analyser: Any, *, cache: SourceCache | None = None,
                   need_landmarks: bool = False,
                   max_distance: float = MAX_SAME_PERSON_DISTANCE, role: str = "source") -> SourceIdentity:
    """One identity from photos of one person.

    NoFaceError names a photo without a face (or, with `need_landmarks`, one whose face the
    landmark model cannot fit); InputError names a photo of someone else than the first.
    `role` ("source" or "reference") names the photos in messages."""
    from livecam.media.images import flatten, read_image

    if not paths:
        raise InputError("no source photo given; pass --source PHOTO")
    images: list[np.ndarray] = []
    faces: list[Face] = []
    for raw_path in paths:
        path = Path(raw_path)
        image = read_image(path, face_photo=role)
        bgr = flatten(image)
        face, count = _analyse_one(path, bgr, analyser, cache, role)
        if need_landmarks and face.landmarks is None:
            raise NoFaceError(f"the face in {role} photo {path} could not be fitted with landmarks "
                              f"(turned away or cut off?); use a clear, frontal photo")
        # Said only once the photo is usable, so an error stays the one line printed; on every
        # run, cached or not.
        if count > 1:
            log.info("%s photo %s has %d faces; using the largest", role, path, count)
        if role == "source" and face.eye_distance < SMALL_SOURCE_EYE_DISTANCE:
            log.warning("warning: the face in source photo %s is small (%.0f px between the eyes), "
                        "so the swapped face will look blurred; use a photo with at least %.0f px "
                        "between the eyes", path, face.eye_distance, SMALL_SOURCE_EYE_DISTANCE)
        if role == "source" and abs(face.yaw) > TURNED_SOURCE_YAW:
            log.warning("warning: the face in source photo %s is turned to the side, so part of "
                        "the swapped face will look stretched or stay the target's own; use a "
                        "frontal photo", path)
        images.append(bgr)
        faces.append(face)
    embeddings = [f.embedding for f in faces if f.embedding is not None]
    mean = None
    if len(embeddings) == len(faces):
        stacked = normalise(np.stack(embeddings))
        _check_same_person([Path(p) for p in paths], stacked, max_distance, role)
        mean = normalise(stacked.mean(axis=0, keepdims=True))[0]
    return SourceIdentity(paths=tuple(Path(p) for p in paths), image=images[0], face=faces[0], embedding=mean)


def check_photo_options(analysis: AnalysisSettings) -> None:
    """The --reference and --map photos are files, checked before any model is opened (so a
    mistyped path is the error, not a model it would need)."""
    named = [("--reference", p) for p in analysis.reference]
    named += [("--map", p) for pair in analysis.face_map for p in pair]
    for option, raw in named:
        path = Path(raw)
        if not path.is_file():
            if path.is_dir():
                what = "is a folder, not a photo; check the path"
            elif path.exists():  # a FIFO or a device was said "not to exist"
                what = "is not a regular file; give a photo file"
            else:
                what = why_missing(path)
            raise InputError(f"{option} photo {path} {what}")


def _analyse_one(path: Path, bgr: np.ndarray, analyser: Any, cache: SourceCache | None,
                 role: str) -> tuple[Face, int]:
    """The photo's largest face and how many faces it holds, from the cache when it has them."""
    key = cache_key(path, analyser) if cache is not None else None
    entry = cache.get(key) if cache is not None and key is not None else None
    if entry is None:
        found, count = analyser.analyse_photo(bgr)
        if found is None:
            raise NoFaceError(f"no face found in {role} photo {path}; use a photo where one face is "
                              f"clearly visible (frontal, well lit, not cut off by the edge)")
        entry = (found, count)
        if cache is not None and key is not None:
            cache.put(key, found, count)
    return entry


def _check_same_person(paths: list[Path], embeddings: np.ndarray, max_distance: float, role: str) -> None:
    """Each photo against the mean of the others; the farthest beyond the limit is named."""
    n = len(embeddings)
    if n < 2:
        return
    total = embeddings.sum(axis=0)
    worst, worst_d = -1, 0.0
    for i in range(n):
        others = normalise(((total - embeddings[i]) / (n - 1))[None])[0]
        d = float(np.linalg.norm(embeddings[i] - others))
        if d > max_distance and d >= worst_d - 1e-6:
            worst, worst_d = i, d
    if worst >= 0:
        # With two photos either could be the odd one; name the later one.
        raise InputError(f"{role} photo {paths[worst]} seems to show a different person than the other "
                         f"{role} photos (embedding distance {worst_d:.2f} > {max_distance:.2f}); "
                         f"give photos of one person only")


def cache_key(path: Path, analyser: Any) -> str:
    """sha256 of the file's bytes and of the models (names and file stamps) that analyse it."""
    digest = hashlib.sha256()
    digest.update(_CACHE_VERSION.encode())
    digest.update(repr(getattr(analyser, "cache_tag", type(analyser).__name__)).encode())
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _save_face(path: Path, face: Face, count: int) -> None:
    """Best effort: a cache that cannot be written only costs time."""
    arrays: dict[str, np.ndarray] = {"bbox": face.bbox, "kps": face.kps,
                                     "score": np.asarray(face.score, dtype=np.float32),
                                     "count": np.asarray(count, dtype=np.int64)}
    if face.landmarks is not None:
        arrays["landmarks"] = face.landmarks
    if face.embedding is not None:
        arrays["embedding"] = face.embedding
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a cache entry: another run may have cached the same photo meanwhile; either copy will do
        with AtomicOutput(path, cache=True) as out, open(out.temp, "wb") as fh:
            np.savez(fh, allow_pickle=False, **arrays)
    except (OSError, LivecamError) as exc:
        log.debug("could not write the source cache %s: %s", path, exc)


def _load_face(path: Path) -> tuple[Face, int] | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            face = Face(bbox=data["bbox"], score=float(data["score"]), kps=data["kps"],
                        landmarks=data["landmarks"] if "landmarks" in data else None,
                        embedding=data["embedding"] if "embedding" in data else None)
            return face, int(data["count"]) if "count" in data else 1
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - a damaged cache entry is ignored and rewritten
        log.debug("ignoring the damaged source cache entry %s: %s", path, exc)
        return None
