"""faces.selection: largest face, all faces, reference filtering and --map keys."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.faces.face import Face
from livecam.faces.face import MESH_LANDMARKS
from livecam.faces.selection import (MIN_EYE_DISTANCE, changeable, embedding_distances, filter_by_reference,
                                     first_changeable, large_enough, largest_face, match_reference, order_faces,
                                     select_faces)


def face_at(x: float, y: float, size: float, embedding: np.ndarray | None = None) -> Face:
    kps = np.array([[0.3, 0.4], [0.7, 0.4], [0.5, 0.6], [0.35, 0.8], [0.65, 0.8]]) * size + [x, y]
    return Face(bbox=[x, y, x + size, y + size], score=0.9, kps=kps, embedding=embedding)


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def person(seed: int) -> np.ndarray:
    return unit(np.random.default_rng(seed).standard_normal(512))


def near(base: np.ndarray, distance: float, seed: int) -> np.ndarray:
    """A unit vector at exactly `distance` (L2) from the unit vector `base`."""
    noise = np.random.default_rng(seed).standard_normal(512)
    ortho = unit(noise - noise.dot(base) * base)
    cos = 1.0 - distance**2 / 2.0
    return unit(cos * base + np.sqrt(1.0 - cos**2) * ortho)


def test_default_selects_the_largest_face_not_the_leftmost():
    left_small = face_at(0, 0, 40)
    big = face_at(300, 50, 120)
    right_mid = face_at(500, 50, 80)
    assert select_faces([left_small, big, right_mid], many=False) == [big]
    assert largest_face([left_small, big, right_mid]) is big


def test_many_faces_keeps_all_in_order_and_empty_stays_empty():
    faces = [face_at(0, 0, 40), face_at(300, 50, 120)]
    assert select_faces(faces, many=True) == faces
    assert select_faces([], many=False) == []
    assert select_faces([], many=True) == []


def test_distances_are_l2_between_normalised_embeddings():
    a = person(1)
    f = face_at(0, 0, 50, embedding=a)
    d = embedding_distances([f], [a * 3.0, -a, near(a, 0.7, 5)])  # references need not be normed
    np.testing.assert_allclose(d[0], [0.0, 2.0, 0.7], atol=1e-5)


def test_reference_keeps_only_faces_within_the_distance():
    ref = person(1)
    same = face_at(0, 0, 50, embedding=near(ref, 0.8, 2))
    stranger = face_at(100, 0, 90, embedding=near(ref, 1.35, 3))
    assert filter_by_reference([same, stranger], [ref], max_distance=1.0) == [same]
    assert filter_by_reference([same, stranger], [ref], max_distance=1.4) == [same, stranger]
    assert filter_by_reference([same, stranger], [ref], max_distance=0.5) == []


def test_map_sets_source_key_to_the_closest_reference_and_drops_strangers():
    alice, bob = person(10), person(11)
    f_bob = face_at(0, 0, 60, embedding=near(bob, 0.6, 1))
    f_alice = face_at(100, 0, 60, embedding=near(alice, 0.9, 2))
    f_stranger = face_at(200, 0, 60, embedding=person(12))
    out = match_reference([f_bob, f_alice, f_stranger], [alice, bob], max_distance=1.0)
    assert [f.source_key for f in out] == [1, 0]
    assert [f.bbox[0] for f in out] == [0.0, 100.0]
    # Everything else about the faces is unchanged.
    np.testing.assert_array_equal(out[0].kps, f_bob.kps)


def test_map_picks_the_closer_of_two_references_within_reach():
    alice = person(20)
    alice_again = near(alice, 0.5, 21)  # e.g. a second photo of the same person
    f = face_at(0, 0, 60, embedding=near(alice_again, 0.1, 22))
    assert [g.source_key for g in match_reference([f], [alice, alice_again], 1.0)] == [1]


def test_reference_matching_needs_embeddings():
    with pytest.raises(ValueError, match="embedding"):
        match_reference([face_at(0, 0, 50)], [person(1)], 1.0)
    assert match_reference([], [person(1)], 1.0) == []
    assert match_reference([face_at(0, 0, 50, embedding=person(1))], [], 1.0) == []


# -- --face-selector-order and --face-min-size ------------------------------------------------

def scored(x: float, y: float, size: float, score: float) -> Face:
    f = face_at(x, y, size)
    return f.with_(score=score)


# Every face big enough to change (32 px or more between the eyes)
ROW = [scored(600, 20, 120, 0.6), scored(0, 400, 200, 0.7), scored(1200, 200, 80, 0.95), scored(300, 100, 160, 0.5)]


@pytest.mark.parametrize("order,expected", [
    ("left-right", [1, 3, 0, 2]), ("right-left", [2, 0, 3, 1]), ("top-bottom", [0, 3, 2, 1]),
    ("bottom-top", [1, 2, 3, 0]), ("small-large", [2, 0, 3, 1]), ("large-small", [1, 3, 0, 2]),
    ("best-worst", [2, 1, 0, 3])])
def test_orders_sort_by_position_size_or_detector_score(order, expected):
    assert order_faces(ROW, order) == [ROW[i] for i in expected]
    # All of them with --many-faces, in that order; the first alone without.
    assert select_faces(ROW, many=True, order=order) == [ROW[i] for i in expected]
    assert select_faces(ROW, many=False, order=order) == [ROW[expected[0]]]


def test_positions_are_box_centres_and_ties_keep_the_detector_order():
    wide = face_at(0, 0, 200)  # left edge further left, centre at 100
    narrow = face_at(60, 0, 20)  # centre at 70
    assert order_faces([wide, narrow], "left-right") == [narrow, wide]
    a, b = face_at(0, 0, 50), face_at(200, 0, 50)
    assert order_faces([b, a], "large-small") == [b, a] and order_faces([a, b], "small-large") == [a, b]
    with pytest.raises(ValueError, match="unknown face order"):
        order_faces([a], "random")


def test_min_size_leaves_small_faces_alone_in_every_mode():
    small, edge, big = face_at(0, 0, 39.9), face_at(100, 0, 40), face_at(300, 0, 90)
    assert large_enough([small, edge, big], 40) == [edge, big]
    assert large_enough([small, big], 0) == [small, big]
    assert select_faces([small, edge, big], many=True, min_size=40) == [edge, big]
    assert select_faces([small], many=False, min_size=40) == []
    # The shorter side counts: a wide but short box is small.
    flat = Face(bbox=[0, 0, 200, 30], score=0.9, kps=face_at(0, 0, 30).kps)
    assert large_enough([flat], 40) == []
    # Without an order, "the one" among the large enough is still the largest, and --many-faces
    # keeps the detector's order.
    assert select_faces([big, small, edge], many=False, min_size=40) == [big]
    assert select_faces([big, small, edge], many=True, min_size=40) == [big, edge]


def test_the_one_face_is_the_first_by_order_that_can_be_changed():
    # A big face in profile (16 px between the eyes) was "the one" and left alone: nothing was
    # swapped although a smaller face beside it could have been.
    profile = face_at(0, 0, 200).with_(kps=face_at(0, 0, 40).kps + 80)
    assert profile.eye_distance < MIN_EYE_DISTANCE
    beside, far = face_at(300, 0, 100), face_at(500, 0, 40)  # 40 and 16 px between the eyes
    assert select_faces([profile, far, beside], many=False) == [beside]
    assert select_faces([profile, far, beside], many=False, order="left-right") == [beside]
    # None can be changed: the first by order all the same (its warning says it is too small)
    assert select_faces([far, profile], many=False) == [profile]
    # --many-faces keeps them all: each is left or swapped on its own
    assert select_faces([profile, beside], many=True) == [profile, beside]


def test_the_mesh_swapper_needs_the_face_fitted():
    big, small = face_at(0, 0, 200), face_at(300, 0, 100)
    mesh = np.zeros((MESH_LANDMARKS, 2), np.float32) + 350
    fitted = small.with_(landmarks=mesh)
    assert changeable(big) and not changeable(big, need_fit=True) and changeable(fitted, need_fit=True)
    assert not changeable(fitted.with_(landmarks=mesh * np.nan), need_fit=True)
    assert first_changeable([big, fitted], need_fit=True) == [fitted]
    assert first_changeable([big, small], need_fit=True) == [big]
    assert first_changeable([], need_fit=True) == []


def test_the_no_face_warning_names_the_minimum_size():
    from livecam.settings import AnalysisSettings

    assert AnalysisSettings().wanted_faces == "face"
    assert AnalysisSettings(face_min_size=120).wanted_faces == "face of at least 120 px (--face-min-size)"


def test_the_analyser_drops_small_faces_before_embedding_and_orders_map_faces():
    from tests.faces.test_analyser import IMAGE, MAP, axis, face_at as row_face, make

    faces = [row_face(0, 30), row_face(60, 50), row_face(110, 40)]  # embedding axes 0, 1, 2
    analyser = make(faces, embedder=True, reference_distance=0.5, face_min_size=35, face_map=MAP)
    analyser.set_references([axis(2), axis(0)])
    embedded: list[int] = []
    real = analyser.embedder.embed
    analyser.embedder.embed = lambda image, fs: embedded.append(len(fs)) or real(image, fs)  # type: ignore[method-assign]
    # The 30 px face (reference 1) is left alone and never embedded; the others keep their keys.
    out = analyser.analyse(IMAGE).faces
    assert embedded == [2] and [(int(f.bbox[0]), f.source_key) for f in out] == [(110, 0)]
    # --map faces come in the chosen order.
    both = make(faces, embedder=True, reference_distance=0.5, face_selector_order="right-left", face_map=MAP)
    both.set_references([axis(2), axis(0)])
    assert [int(f.bbox[0]) for f in both.analyse(IMAGE).faces] == [110, 0]
    both = make(faces, embedder=True, reference_distance=0.5, face_selector_order="left-right", face_map=MAP)
    both.set_references([axis(2), axis(0)])
    assert [int(f.bbox[0]) for f in both.analyse(IMAGE).faces] == [0, 110]
