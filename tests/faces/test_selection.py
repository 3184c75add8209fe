"""faces.selection: largest face, all faces, reference filtering and --map keys."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.faces.face import Face
from livecam.faces.selection import (embedding_distances, filter_by_reference, largest_face, match_reference,
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
