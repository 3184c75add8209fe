"""FaceAnalyser: selection, reference/map matching, landmarks on demand, detect-every-N, and the
real embedded detector + FaceMesh on real photos."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from livecam.faces.analyser import FaceAnalyser, ModelNames, pick_detector
from livecam.faces.face import Face
from livecam.settings import AnalysisSettings

IMAGE = np.zeros((100, 200, 3), np.uint8)
MAP = ((Path("source.jpg"), Path("reference.jpg")), (Path("source2.jpg"), Path("reference2.jpg")))  # --map


def face_at(x: float, size: float = 40.0) -> Face:
    kps = np.array([[x + 0.3 * size, 30], [x + 0.7 * size, 30], [x + 0.5 * size, 45],
                    [x + 0.35 * size, 55], [x + 0.65 * size, 55]], np.float32)
    return Face(bbox=np.array([x, 10, x + size, 10 + size]), score=0.9, kps=kps)


class FakeDetector:
    def __init__(self, faces: list[Face]) -> None:
        self.faces = faces
        self.calls = 0
        self.det_size = 640

    def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
        self.calls += 1
        return list(self.faces)

    def set_det_size(self, size: int) -> None:
        self.det_size = size


class FakeMesh:
    """A face that sits at x = 20 + shift whatever box it is asked about (it moves)."""

    def __init__(self) -> None:
        self.calls = 0
        self.shift = 0.0

    def refine(self, image: np.ndarray, faces: list[Face]) -> list[Face]:
        self.calls += 1
        out = []
        for f in faces:
            lm = np.tile([20.0 + self.shift, 10.0], (468, 1))
            out.append(f.with_(landmarks=lm))
        return out


class FakeEmbedder:
    """Embedding = unit vector along the axis given by the face's x position / 50."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, image: np.ndarray, faces: list[Face]) -> list[Face]:
        self.calls += 1
        return [f.with_(embedding=axis(int(f.bbox[0]) // 50)) for f in faces]


def axis(i: int) -> np.ndarray:
    v = np.zeros(512, np.float32)
    v[i] = 1.0
    return v


def make(faces: list[Face], *, need_landmarks: bool = False, embedder: bool = False, **settings: object) -> FaceAnalyser:
    return FaceAnalyser(FakeDetector(faces), AnalysisSettings(**settings), names=ModelNames("fake"),
                        landmarker=FakeMesh(), embedder=FakeEmbedder() if embedder else None,
                        need_landmarks=need_landmarks)


def test_largest_face_by_default_all_with_many() -> None:
    faces = [face_at(0, 30), face_at(60, 50), face_at(130, 40)]
    assert [f.bbox[0] for f in make(faces).analyse(IMAGE).faces] == [60]
    assert len(make(faces, many_faces=True).analyse(IMAGE).faces) == 3
    assert make([]).analyse(IMAGE).faces == []


def test_the_analysis_says_how_many_faces_detection_found_before_selection() -> None:
    # what `livecam image` counts the faces it left from ("N other faces ... left as they were")
    faces = [face_at(0, 30), face_at(60, 50), face_at(130, 40)]
    one = make(faces).analyse(IMAGE)
    assert len(one.faces) == 1 and one.found == 3
    assert make(faces, many_faces=True).analyse(IMAGE).found == 3
    assert make([]).analyse(IMAGE).found == 0


def test_landmarks_only_when_needed() -> None:
    faces = [face_at(0, 30), face_at(60, 50)]
    plain = make(faces)
    assert plain.analyse(IMAGE).faces[0].landmarks is None
    assert plain.landmarker.calls == 0
    meshed = make(faces, need_landmarks=True)
    out = meshed.analyse(IMAGE).faces
    assert len(out) == 1 and out[0].landmarks is not None and meshed.landmarker.calls == 1


def test_reference_mode_keeps_only_that_person() -> None:
    faces = [face_at(0, 30), face_at(60, 50), face_at(110, 40)]  # axes 0, 1, 2
    analyser = make(faces, embedder=True, many_faces=True, reference_distance=0.5)
    analyser.set_references([axis(2)])
    out = analyser.analyse(IMAGE).faces
    assert [int(f.bbox[0]) for f in out] == [110]  # not the largest: the reference person
    assert analyser.embedder.calls == 1  # one batched call for all faces


def test_map_mode_sets_source_keys() -> None:
    faces = [face_at(0, 30), face_at(60, 50), face_at(110, 40)]
    analyser = make(faces, embedder=True, reference_distance=0.5, face_map=MAP)
    analyser.set_references([axis(2), axis(0)])
    out = analyser.analyse(IMAGE).faces
    assert {int(f.bbox[0]): f.source_key for f in out} == {110: 0, 0: 1}


def test_references_need_an_embedder() -> None:
    with pytest.raises(ValueError):
        make([face_at(0)]).set_references([axis(0)])


def test_detect_every_n_carries_and_refits_faces() -> None:
    analyser = make([face_at(20)], need_landmarks=True)
    analyser.set_detect_every(3)
    results = []
    for i in range(7):
        analyser.landmarker.shift = float(i)
        timings: dict[str, float] = {}
        results.append(analyser.analyse(IMAGE, timestamp=i / 30, track=True, timings=timings).faces)
        assert {"detect", "landmarks"} <= set(timings)
    assert analyser.detector.calls == 3  # frames 0, 3 and 6
    assert analyser.landmarker.calls == 7  # every frame re-fitted
    # Carried frames follow the landmarks: the box moved with them.
    assert results[2][0].landmarks[0, 0] == pytest.approx(22.0)
    assert results[2][0].bbox[0] == pytest.approx(22.0)
    assert results[3][0].bbox[0] == pytest.approx(20.0)  # a fresh detection
    # Without tracking nothing is carried, whatever detect_every says.
    analyser.detector.calls = 0
    for _ in range(3):
        analyser.analyse(IMAGE, track=False)
    assert analyser.detector.calls == 3
    empty = make([], need_landmarks=True)
    empty.set_detect_every(3)
    for _ in range(3):
        assert empty.analyse(IMAGE, track=True).faces == []
    # nobody to carry: detect on every frame (twice: a small image is retried with a border)
    assert empty.detector.calls == 6
    analyser.set_detect_every(1)
    analyser.detector.calls = 0
    for _ in range(3):
        analyser.analyse(IMAGE, track=True)
    assert analyser.detector.calls == 3


class CountedRuns:
    """A model session that counts its runs (the real work a frame costs)."""

    def __init__(self, session: object) -> None:
        self.session = session
        self.runs = 0

    def run(self, *args: object, **kwargs: object) -> object:
        self.runs += 1
        return self.session.run(*args, **kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.session, name)


@pytest.mark.parametrize("need_landmarks", [False, True])
def test_sparse_detection_saves_says_whether_detecting_every_2nd_frame_runs_fewer_models(
        tmp_path: Path, faces_dir: Path, need_landmarks: bool) -> None:
    # The governor's "detect every 2nd frame" re-fits carried faces with FaceMesh: with the
    # embedded BlazeFace and no processor that needs landmarks that is one model run for one
    # (the same 192 px input), so the step saved nothing; with landmarks it saves the detection.
    from livecam.media.images import read_image

    photo = read_image(faces_dir / "obama.jpg")
    runs = {}
    for every in (1, 2):
        analyser = _real_analyser(tmp_path, live=True, need_landmarks=need_landmarks)
        detector, mesh = CountedRuns(analyser.detector.session), CountedRuns(analyser.landmarker.session)  # type: ignore[attr-defined, union-attr]
        analyser.detector.session, analyser.landmarker.session = detector, mesh  # type: ignore[attr-defined, union-attr]
        analyser.set_detect_every(every)
        for i in range(6):
            assert len(analyser.analyse(photo, timestamp=i / 30, track=True).faces) == 1
        runs[every] = detector.runs + mesh.runs
        assert detector.runs == 6 // every
    assert analyser.det_size is None  # BlazeFace
    assert analyser.sparse_detection_saves is (runs[2] < runs[1]), runs
    assert analyser.sparse_detection_saves is need_landmarks


def test_det_size_knob_reaches_the_detector() -> None:
    analyser = make([face_at(0)])
    analyser.set_det_size(320)
    assert analyser.detector.det_size == 320 and analyser.det_size == 320
    assert "@320" in analyser.describe()


class FakeStore:
    def __init__(self, present: set[str]) -> None:
        self.present = present

    def is_present(self, name: str) -> bool:
        return name in self.present


def test_pick_detector_means_the_same_in_every_command() -> None:
    # live mode used BlazeFace short range whatever --detector said
    assert pick_detector("auto", FakeStore({"det_10g"})) == "det_10g"
    assert pick_detector("auto", FakeStore(set())) == "blazeface_full_range"
    assert pick_detector("scrfd", FakeStore(set())) == "det_10g"
    assert pick_detector("blazeface", FakeStore({"det_10g"})) == "blazeface_full_range"


def _real_analyser(tmp_path: Path, live: bool = False, need_landmarks: bool = True,
                   **settings: object) -> FaceAnalyser:
    from livecam.models.store import ModelStore
    from livecam.runtime.providers import resolve_providers
    from livecam.settings import RuntimeSettings

    store = ModelStore(RuntimeSettings(models_dir=tmp_path / "models", offline=True), progress=False)
    return FaceAnalyser.create(AnalysisSettings(**settings), store, resolve_providers(["cpu"]),
                               need_landmarks=need_landmarks, need_embedding=False, live=live, intra_op_threads=1)


def test_embedded_models_on_real_photos(tmp_path: Path, faces_dir: Path) -> None:
    from livecam.media.images import read_image

    analyser = _real_analyser(tmp_path, many_faces=True)
    assert analyser.names.detector == "blazeface_full_range"
    obama = analyser.analyse(read_image(faces_dir / "obama.jpg")).faces
    assert len(obama) == 1 and obama[0].landmarks is not None and obama[0].landmarks.shape == (468, 2)
    x1, y1, x2, y2 = obama[0].bbox
    assert np.all((obama[0].kps >= (x1, y1)) & (obama[0].kps <= (x2, y2)))
    group = analyser.analyse(read_image(faces_dir / "group6.jpg")).faces
    assert len(group) == 6
    face, count = analyser.analyse_photo(read_image(faces_dir / "group6.jpg"))
    assert count == 6 and face is not None and face.area == max(f.area for f in group)


@pytest.mark.parametrize("name,count", [("obama.jpg", 1), ("obama2.jpg", 1), ("biden.jpg", 1),
                                        ("astronaut.png", 1), ("group6.jpg", 6)])
def test_a_picture_keeps_every_real_face_that_facemesh_confirms(tmp_path: Path, faces_dir: Path,
                                                                 name: str, count: int) -> None:
    # Pictures confirm each detection with FaceMesh (a letterboxed glass was swapped as a face):
    # no real face may be lost to it.
    from livecam.faces.analyser import confirmed
    from livecam.media.images import read_image
    from livecam.models.store import ModelStore
    from livecam.runtime.providers import resolve_providers
    from livecam.settings import RuntimeSettings

    store = ModelStore(RuntimeSettings(models_dir=tmp_path / "models", offline=True), progress=False)
    analyser = FaceAnalyser.create(AnalysisSettings(many_faces=True), store, resolve_providers(["cpu"]),
                                   need_landmarks=False, need_embedding=False, live=False, still=True)
    image = read_image(faces_dir / name)
    assert analyser.confirm
    detected = analyser.detector.detect(image)
    assert len(confirmed(image, detected, analyser.landmarker)) == len(detected) == count
    assert len(analyser.analyse(image).faces) == count


def test_live_analyser_finds_photo_faces_with_the_full_range_model(tmp_path: Path, faces_dir: Path) -> None:
    from livecam.media.images import read_image

    analyser = _real_analyser(tmp_path, live=True)
    group = read_image(faces_dir / "group6.jpg")
    face, count = analyser.analyse_photo(group)  # a wide shot: small faces
    assert count == 6 and face is not None and face.landmarks is not None


def test_live_finds_the_faces_video_finds_on_the_same_frames(tmp_path: Path, faces_dir: Path) -> None:
    # A still clip of the group photo at 1280x720 (faces 95-135 px wide): `livecam run` found no
    # face at all (short range), `livecam video` all six.
    from livecam.media.images import read_image

    group = read_image(faces_dir / "group6.jpg")
    top = (group.shape[0] - 720) // 2
    frame = np.ascontiguousarray(group[top:top + 720, :1280])
    assert frame.shape == (720, 1280, 3)
    files = _real_analyser(tmp_path, live=False, many_faces=True)
    live = _real_analyser(tmp_path, live=True, many_faces=True, detect_every=2)
    assert len(files.analyse(frame.copy()).faces) == 6
    for i in range(4):  # detected frames and carried ones alike
        faces = live.analyse(frame.copy(), timestamp=i / 30, track=True).faces
        assert len(faces) == 6, i
        assert len({f.track_id for f in faces}) == 6


def _aligned_crop(faces_dir: Path, tmp_path: Path, name: str, size: int = 112) -> np.ndarray:
    """The face of a photo warped onto the ArcFace template, as face datasets ship them."""
    from livecam.faces import align
    from livecam.media.images import read_image

    photo = read_image(faces_dir / name)
    (face,) = _real_analyser(tmp_path).analyse(photo).faces
    return align.warp_crop(photo, align.align_matrix(face.kps, align.arcface_template(size)), size)


def test_a_tightly_cropped_face_is_found_as_photo_and_as_target(tmp_path: Path, faces_dir: Path) -> None:
    # An aligned 112x112 crop was "no face found" both as --source and as the target.
    from livecam.faces import align

    crop = _aligned_crop(faces_dir, tmp_path, "obama2.jpg")
    analyser = _real_analyser(tmp_path)
    face, count = analyser.analyse_photo(crop)
    assert count == 1 and face is not None and face.landmarks is not None
    (target,) = analyser.analyse(crop).faces
    # found on the padded copy, reported in the crop's own pixels: the eyes near the template's
    template = align.arcface_template(112)
    for found in (face, target):
        assert np.all(np.linalg.norm(found.kps[:2] - template[:2], axis=1) < 8), found.kps
        assert np.all(found.bbox >= 0) and np.all(found.bbox <= 112)


def test_the_padded_retry_maps_faces_back_and_drops_border_ones() -> None:
    from livecam.faces.analyser import detect_padded

    class OnPadded:
        def __init__(self) -> None:
            self.shapes: list[tuple[int, ...]] = []

        def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
            self.shapes.append(image.shape)
            inside = face_at(60.0).with_(bbox=np.array([60.0, 60, 100, 100]))
            border = Face(bbox=np.array([0, 0, 20, 20]), score=0.9, kps=np.zeros((5, 2)))
            return [inside, border]

    detector = OnPadded()
    faces = detect_padded(detector, np.zeros((80, 100, 3), np.uint8))
    assert detector.shapes == [(180, 200, 3)]  # 50 px (half the longer side) on every side
    (face,) = faces  # the one found in the border alone is dropped
    assert face.bbox.tolist() == [10.0, 10.0, 50.0, 50.0]
    assert np.allclose(face.kps, face_at(60.0).kps - 50)


def test_a_frame_without_a_face_is_retried_padded_only_when_small() -> None:
    detector = FakeDetector([])
    analyser = FaceAnalyser(detector, AnalysisSettings(), names=ModelNames("fake"))
    analyser.analyse(np.zeros((112, 112, 3), np.uint8))
    assert detector.calls == 2
    analyser.analyse(np.zeros((720, 1280, 3), np.uint8))  # a video frame pays for one detection
    assert detector.calls == 3


class RejectingMesh(FakeMesh):
    """FaceMesh on a glass: no face there (landmarks left unset)."""

    def refine(self, image: np.ndarray, faces: list[Face]) -> list[Face]:
        self.calls += 1
        return list(faces)


@pytest.mark.parametrize("need_landmarks", [False, True])
@pytest.mark.parametrize("is_face", [True, False], ids=["face", "glass"])
def test_tracked_frames_confirm_each_track_once_reusing_the_landmarks(need_landmarks: bool, is_face: bool) -> None:
    # A video or live run confirms a face with FaceMesh when its track starts, not every frame
    # (a run per face per frame), and not a second time where FaceMesh ran for the landmarks.
    from livecam.faces.tracking import FaceTracker

    mesh = FakeMesh() if is_face else RejectingMesh()
    analyser = FaceAnalyser(FakeDetector([face_at(60, 50)]), AnalysisSettings(), names=ModelNames("fake"),
                            landmarker=mesh, need_landmarks=need_landmarks, tracker=FaceTracker(0.5))
    found = [analyser.analyse(IMAGE, timestamp=i / 30, track=True).faces for i in range(10)]
    assert [len(faces) for faces in found] == [1 if is_face else 0] * 10
    assert mesh.calls == (10 if need_landmarks and is_face else 1)  # a rejected glass is not fitted again
    files = [analyser.track(analyser.analyse(IMAGE).faces, 1 + i / 30, IMAGE) for i in range(10)]  # a video file's order step
    assert [len(faces) for faces in files] == [1 if is_face else 0] * 10


class GlassMesh(FakeMesh):
    """FaceMesh that sees a face only in boxes starting left of x 100 (the glass is right of it)."""

    def refine(self, image: np.ndarray, faces: list[Face]) -> list[Face]:
        self.calls += 1
        return [f.with_(landmarks=np.tile([f.bbox[0] + 5.0, 20.0], (468, 1))) if f.bbox[0] < 100 else f
                for f in faces]


def test_a_rejected_glass_larger_than_the_face_does_not_hide_it_in_live_frames() -> None:
    # Without --many-faces the glass, the largest, was "the one" every frame: rejected, nothing swapped.
    from livecam.faces.tracking import FaceTracker

    face, glass = face_at(20, 40), face_at(120, 60)
    mesh = GlassMesh()
    analyser = FaceAnalyser(FakeDetector([face, glass]), AnalysisSettings(), names=ModelNames("fake"),
                            landmarker=mesh, tracker=FaceTracker(0.0))
    found = [analyser.analyse(IMAGE, timestamp=i / 30, track=True).faces for i in range(8)]
    assert [[float(f.bbox[0]) for f in faces] for faces in found] == [[]] + [[20.0]] * 7
    assert mesh.calls == 2  # each track confirmed once


def test_live_keeps_the_one_face_while_it_stays_changeable() -> None:
    # The largest face at the 24 px limit (23 and 25 px between the eyes by turns) flipped the swap
    # between it and the face beside it every frame.
    def hovering(i: int) -> Face:
        eyes = 25.0 if i % 2 == 0 else 23.0
        kps = np.array([[60, 30], [60 + eyes, 30], [72, 45], [62, 55], [80, 55]], np.float32)
        return Face(bbox=np.array([50, 5, 130, 85]), score=0.9, kps=kps)

    other = face_at(0, 62)  # smaller box, 24.8 px between the eyes
    detector = FakeDetector([])
    analyser = FaceAnalyser(detector, AnalysisSettings(), names=ModelNames("fake"), landmarker=FakeMesh())
    chosen = []
    for i in range(6):
        detector.faces = [hovering(i), other]
        chosen.append([float(f.bbox[0]) for f in analyser.analyse(IMAGE, timestamp=i / 30, track=True).faces])
    assert chosen == [[50.0], [0.0], [0.0], [0.0], [0.0], [0.0]]


def test_video_keeps_the_one_face_and_fits_it_where_the_worker_fitted_the_other() -> None:
    # A video's workers fit the first-ranked face only; when last frame's face ranks second,
    # the ordered step fits it, or the fitted one beside it would take the swap every other frame.
    from livecam.faces.tracking import FaceTracker

    detector, mesh = FakeDetector([]), FakeMesh()
    analyser = FaceAnalyser(detector, AnalysisSettings(), names=ModelNames("fake"), landmarker=mesh,
                            need_landmarks=True, tracker=FaceTracker(0.5))
    chosen = []
    for i in range(6):
        detector.faces = [face_at(0, 60 + i % 2), face_at(100, 61 - i % 2)]  # the larger by turns
        (face,) = analyser.track(analyser.analyse(IMAGE, choose=False).faces, i / 30, IMAGE)
        assert face.landmarks is not None
        chosen.append(face.track_id)
    assert chosen == [chosen[0]] * 6


def test_video_runs_facemesh_at_most_once_per_face_per_frame_across_worker_processes() -> None:
    # A video's worker fits candidates (in another process: its faces come pickled) and the ordered
    # step confirms new tracks and fits last frame's face: a face the worker ran FaceMesh on, fitted
    # or not (the glass), is not run again there.
    import pickle
    from collections import Counter

    from livecam.faces.tracking import FaceTracker

    class CountingMesh(GlassMesh):
        def __init__(self) -> None:
            super().__init__()
            self.meshed: Counter[float] = Counter()  # FaceMesh runs per face (its box's x) this frame

        def refine(self, image: np.ndarray, faces: list[Face]) -> list[Face]:
            self.meshed.update(float(f.bbox[0]) for f in faces)
            return super().refine(image, faces)

    detector, mesh = FakeDetector([]), CountingMesh()
    analyser = FaceAnalyser(detector, AnalysisSettings(), names=ModelNames("fake"), landmarker=mesh,
                            need_landmarks=True, tracker=FaceTracker(0.5))
    runs = []
    for i in range(20):  # past tracking's RECHECK_EVERY: the rejected glass is checked again
        # the glass ranks first; the two faces are the larger by turns, so the kept one ranks third
        detector.faces = [face_at(130, 66), face_at(0, 60 + i % 2), face_at(62, 61 - i % 2)]
        mesh.meshed.clear()
        candidates = pickle.loads(pickle.dumps(analyser.analyse(IMAGE, choose=False).faces))
        (face,) = analyser.track(candidates, i / 30, IMAGE)
        assert face.landmarks is not None and face.bbox[0] < 100
        runs.append(dict(mesh.meshed))
    assert runs[0] == {130.0: 1, 0.0: 1, 62.0: 1}  # each face a verdict, the glass's from the worker
    assert all(max(counts.values()) == 1 for counts in runs)


def test_video_with_map_keeps_and_fits_every_mapped_face() -> None:
    # --map swaps each reference person's face: the ordered step chooses no "one" (the settings'
    # one_face, which also sizes a cluster segment's warm-up), and each face is fitted.
    from livecam.faces.tracking import FaceTracker

    mesh = FakeMesh()
    analyser = FaceAnalyser(FakeDetector([face_at(0, 30), face_at(60, 50), face_at(110, 40)]),
                            AnalysisSettings(face_map=MAP, reference_distance=0.5), names=ModelNames("fake"),
                            landmarker=mesh, embedder=FakeEmbedder(), need_landmarks=True,
                            tracker=FaceTracker(0.5))
    analyser.set_references([axis(2), axis(0)])
    for i in range(3):
        faces = analyser.track(analyser.analyse(IMAGE, choose=False).faces, i / 30, IMAGE)
        assert {int(f.bbox[0]): f.source_key for f in faces} == {0: 1, 110: 0}
        assert all(f.landmarks is not None for f in faces)
