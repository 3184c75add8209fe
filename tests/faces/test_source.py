"""analyse_source: formats, no-face and mixed-identity errors, embedding averaging, caching."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.errors import EXIT_USAGE, InputError, NoFaceError
from livecam.faces.face import Face
from livecam.faces.source import MAX_SAME_PERSON_DISTANCE, SourceCache, analyse_source


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


class FakeAnalyser:
    """Reads the 'person' from the photo's top-left pixel (blue channel): 0 means no face;
    people are far-apart directions, photos of one person differ a little."""

    cache_tag = "fake-v1"

    def __init__(self) -> None:
        self.calls = 0
        self.seen: list[np.ndarray] = []

    def analyse_photo(self, image: np.ndarray) -> tuple[Face | None, int]:
        self.calls += 1
        self.seen.append(image)
        value = int(image[0, 0, 0])
        if value == 0:
            return None, 0
        person, variant = divmod(value, 10)
        emb = np.zeros(512, np.float32)
        emb[person] = 1.0
        emb[100 + variant] = 0.3  # same person, another photo
        kps = np.array([[10, 10], [20, 10], [15, 15], [11, 20], [19, 20]], np.float32)
        face = Face(bbox=np.array([5, 5, 25, 25]), score=0.9, kps=kps,
                    landmarks=np.full((468, 2), 15, np.float32), embedding=unit(emb))
        return face, 1


def photo(path: Path, value: int, *, channels: int = 3) -> Path:
    img = np.full((40, 40, channels), 128, np.uint8)
    img[0, 0, 0] = value
    if channels == 4:
        img[..., 3] = 255
    cv2.imwrite(str(path), img if channels != 1 else img[..., 0])
    return path


def test_single_photo(tmp_path: Path) -> None:
    analyser = FakeAnalyser()
    identity = analyse_source([photo(tmp_path / "a.png", 11)], analyser)
    assert identity.paths == (tmp_path / "a.png",)
    assert identity.image.shape == (40, 40, 3) and identity.face.landmarks is not None
    assert identity.embedding is not None and np.linalg.norm(identity.embedding) == pytest.approx(1.0)


def test_rgba_and_grayscale_photos(tmp_path: Path) -> None:
    analyser = FakeAnalyser()
    rgba = tmp_path / "rgba.png"
    img = np.full((40, 40, 4), 128, np.uint8)
    img[..., 0] = 11
    img[..., 3] = 255
    img[30:, 30:, 3] = 0  # a transparent corner
    cv2.imwrite(str(rgba), img)
    gray = tmp_path / "gray.png"
    cv2.imwrite(str(gray), np.full((40, 40), 12, np.uint8))
    identity = analyse_source([rgba, gray], analyser)
    assert all(seen.shape == (40, 40, 3) for seen in analyser.seen)  # BGR, alpha flattened
    assert identity.image.shape == (40, 40, 3)
    assert identity.face.kps.shape == (5, 2)


def test_no_face_names_the_file(tmp_path: Path) -> None:
    good = photo(tmp_path / "good.png", 11)
    empty = photo(tmp_path / "empty.png", 0)
    with pytest.raises(NoFaceError, match=r"no face found in source photo .*empty\.png") as info:
        analyse_source([good, empty], FakeAnalyser())
    assert info.value.exit_code == EXIT_USAGE
    # a tight crop is no face too (when even the padded retry fails): "not too small" misled
    assert "too small" not in str(info.value) and "cut off" in str(info.value)


def test_missing_landmarks_when_needed(tmp_path: Path) -> None:
    class NoMesh(FakeAnalyser):
        def analyse_photo(self, image: np.ndarray) -> tuple[Face | None, int]:
            face, n = super().analyse_photo(image)
            return (face.with_(landmarks=None) if face else None), n

    path = photo(tmp_path / "side.png", 11)
    assert analyse_source([path], NoMesh()).face.landmarks is None
    with pytest.raises(NoFaceError, match="side.png"):
        analyse_source([path], NoMesh(), need_landmarks=True)


def test_photos_of_one_person_are_averaged(tmp_path: Path) -> None:
    paths = [photo(tmp_path / f"p{i}.png", 21 + i) for i in range(3)]
    identity = analyse_source(paths, FakeAnalyser())
    assert identity.embedding[2] > 0.9 and np.linalg.norm(identity.embedding) == pytest.approx(1.0)
    assert identity.embedding[101] == pytest.approx(identity.embedding[103], abs=1e-6)  # a real mean
    assert identity.paths == tuple(paths)


def test_different_people_are_refused_naming_the_odd_photo(tmp_path: Path) -> None:
    same = [photo(tmp_path / f"anna{i}.png", 31 + i) for i in range(2)]
    other = photo(tmp_path / "bob.png", 41)
    with pytest.raises(InputError, match=r"bob\.png seems to show a different person"):
        analyse_source([same[0], other, same[1]], FakeAnalyser())
    with pytest.raises(InputError, match=r"bob\.png"):
        analyse_source([same[0], other], FakeAnalyser())


def test_threshold_is_between_same_and_different_people() -> None:
    # Distances between normed embeddings: cos 0.4 (same person, another photo) and 0.2 (strangers).
    same = np.sqrt(2 - 2 * 0.4)
    strangers = np.sqrt(2 - 2 * 0.2)
    assert same < MAX_SAME_PERSON_DISTANCE < strangers


def test_in_memory_and_disk_cache(tmp_path: Path) -> None:
    path = photo(tmp_path / "a.png", 11)
    analyser = FakeAnalyser()
    cache = SourceCache(tmp_path / "cache")
    first = analyse_source([path], analyser, cache=cache)
    analyse_source([path], analyser, cache=cache)
    assert analyser.calls == 1
    # A new process: a fresh cache object on the same folder reads the disk entry.
    again = analyse_source([path], analyser, cache=SourceCache(tmp_path / "cache"))
    assert analyser.calls == 1
    assert np.array_equal(again.embedding, first.embedding)
    assert np.array_equal(again.face.landmarks, first.face.landmarks)
    # Other models, or other bytes, are analysed again.
    other_models = FakeAnalyser()
    other_models.cache_tag = "fake-v2"
    analyse_source([path], other_models, cache=cache)
    assert other_models.calls == 1
    photo(path, 12)
    analyse_source([path], analyser, cache=cache)
    assert analyser.calls == 2


def test_damaged_cache_entry_is_ignored(tmp_path: Path) -> None:
    from livecam.faces.source import cache_key

    path = photo(tmp_path / "a.png", 11)
    analyser = FakeAnalyser()
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / f"{cache_key(path, analyser)}.npz").write_bytes(b"garbage")
    analyse_source([path], analyser, cache=SourceCache(folder))
    assert analyser.calls == 1


def test_real_models_on_rgba_and_grayscale(tmp_path: Path, faces_dir: Path) -> None:
    from livecam.faces.analyser import FaceAnalyser
    from livecam.models.store import ModelStore
    from livecam.runtime.providers import resolve_providers
    from livecam.settings import AnalysisSettings, RuntimeSettings

    store = ModelStore(RuntimeSettings(models_dir=tmp_path / "models", offline=True), progress=False)
    analyser = FaceAnalyser.create(AnalysisSettings(), store, resolve_providers(["cpu"]), need_landmarks=True,
                                   need_embedding=False, live=False, intra_op_threads=1)
    img = cv2.imread(str(faces_dir / "obama.jpg"))
    img = cv2.resize(img, (img.shape[1] // 2, img.shape[0] // 2))
    rgba = np.dstack([img, np.full(img.shape[:2], 255, np.uint8)])
    rgba[: img.shape[0] // 8, :, 3] = 0
    cv2.imwrite(str(tmp_path / "rgba.png"), rgba)
    cv2.imwrite(str(tmp_path / "gray.jpg"), cv2.cvtColor(img, cv2.COLOR_BGR2GRAY))
    for name in ("rgba.png", "gray.jpg"):
        identity = analyse_source([tmp_path / name], analyser, need_landmarks=True)
        assert identity.face.landmarks.shape == (468, 2)
        assert identity.embedding is None  # no ArcFace loaded
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((200, 200, 3), 90, np.uint8))
    with pytest.raises(NoFaceError, match="blank.png"):
        analyse_source([blank], analyser)


def test_several_faces_in_a_photo_are_reported_on_every_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Crowd(FakeAnalyser):
        def analyse_photo(self, image: np.ndarray) -> tuple[Face | None, int]:
            return super().analyse_photo(image)[0], 3

    path = photo(tmp_path / "crowd.png", 11)
    analyser = Crowd()
    for cache in (SourceCache(tmp_path / "cache"), SourceCache(tmp_path / "cache")):  # the second reads the disk
        caplog.clear()
        with caplog.at_level("INFO", logger="livecam"):
            analyse_source([path], analyser, cache=cache)
        assert "crowd.png has 3 faces; using the largest" in caplog.text
    assert analyser.calls == 1


def test_messages_name_the_photos_role(tmp_path: Path) -> None:
    with pytest.raises(NoFaceError, match="no face found in reference photo .*blank.png"):
        analyse_source([photo(tmp_path / "blank.png", 0)], FakeAnalyser(), role="reference")


def test_a_turned_source_face_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A profile source (group6.jpg's largest face is one) gives a half-swapped, smeared face:
    # the user is told why. The nose tip over an eye is a yaw of 1; frontal is 0.
    class Turned(FakeAnalyser):
        def __init__(self, nose_x: float) -> None:
            super().__init__()
            self.nose_x = nose_x

        def analyse_photo(self, image: np.ndarray) -> tuple[Face | None, int]:
            face, count = super().analyse_photo(image)
            assert face is not None
            kps = face.kps.copy()
            kps[2, 0] = self.nose_x
            return face.with_(kps=kps), count

    path = photo(tmp_path / "side.png", 11)
    for nose_x, warned in ((15.0, False), (17.0, False), (19.0, True), (10.5, True)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="livecam"):
            analyse_source([path], Turned(nose_x))
        assert ("side.png is turned to the side" in caplog.text) is warned, nose_x


def test_real_photos_a_profile_source_is_reported_and_a_frontal_one_is_not(
        tmp_path: Path, faces_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    from livecam.faces.analyser import FaceAnalyser
    from livecam.models.store import ModelStore
    from livecam.runtime.providers import resolve_providers
    from livecam.settings import AnalysisSettings, RuntimeSettings

    store = ModelStore(RuntimeSettings(models_dir=tmp_path / "models", offline=True), progress=False)
    analyser = FaceAnalyser.create(AnalysisSettings(), store, resolve_providers(["cpu"]), need_landmarks=True,
                                   need_embedding=False, live=False, intra_op_threads=1)
    for name, warned in (("group6.jpg", True), ("obama.jpg", False), ("obama2.jpg", False),
                         ("biden.jpg", False), ("astronaut.png", False)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="livecam"):
            identity = analyse_source([faces_dir / name], analyser, need_landmarks=True)
        assert ("is turned to the side" in caplog.text) is warned, (name, identity.face.yaw)


def test_a_reference_or_map_photo_that_is_a_link_to_nothing_or_a_fifo_is_named_as_such(tmp_path: Path) -> None:
    # both were "--map photo X does not exist; check the path" while `ls` listed X
    import os

    from livecam.faces.source import check_photo_options
    from livecam.settings import AnalysisSettings

    (tmp_path / "ref.jpg").symlink_to(tmp_path / "moved.jpg")
    with pytest.raises(InputError, match=r"--reference photo .*ref\.jpg is a link to .*moved\.jpg, which does not "
                                         r"exist; fix or remove the link$"):
        check_photo_options(AnalysisSettings(reference=(tmp_path / "ref.jpg",)))
    os.mkfifo(tmp_path / "pipe.jpg")
    with pytest.raises(InputError, match=r"--map photo .*pipe\.jpg is not a regular file; give a photo file$"):
        check_photo_options(AnalysisSettings(face_map=((tmp_path / "pipe.jpg", tmp_path / "pipe.jpg"),)))


def test_a_face_cached_before_the_padded_retry_was_confirmed_is_not_used(tmp_path: Path, faces_dir: Path) -> None:
    # The table of group6.jpg's lower left (a glass, no face) was cached with the glass as its
    # face; the fixed analyser finds none, but the cached entry, under the same key, was used.
    from livecam.faces.source import cache_key
    from tests.faces.test_analyser import _real_analyser

    table = tmp_path / "table.png"
    cv2.imwrite(str(table), cv2.imread(str(faces_dir / "group6.jpg"))[600:, :400])
    analyser = _real_analyser(tmp_path, need_landmarks=False)
    earlier = type("Earlier", (), {"cache_tag": analyser.cache_tag.removesuffix("|confirmed")})()
    cache = SourceCache(tmp_path / "cache")
    glass = Face(bbox=np.array([175.0, 28, 329, 182]), score=0.57,
                 kps=np.array([[224.0, 71], [288, 75], [250, 95], [221, 132], [274, 135]]))
    cache.put(cache_key(table, earlier), glass)
    with pytest.raises(NoFaceError, match="no face found in source photo"):
        analyse_source([table], analyser, cache=SourceCache(tmp_path / "cache"))
