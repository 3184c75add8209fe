"""faces.tracking: stable ids through crossings and gaps, One-Euro smoothing, prediction."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.faces.face import Face
from livecam.faces.tracking import RECHECK_EVERY, FaceTracker, OneEuroFilter, params_for_strength

FPS = 30.0
KPS_UNIT = np.array([[0.3, 0.4], [0.7, 0.4], [0.5, 0.6], [0.35, 0.8], [0.65, 0.8]])


def face_at(x: float, y: float, size: float, landmarks: np.ndarray | None = None) -> Face:
    return Face(bbox=[x, y, x + size, y + size], score=0.9, kps=KPS_UNIT * size + [x, y], landmarks=landmarks)


def crossing_clip(step: int = 9, frames: int = 60, hidden: range = range(0)) -> list[list[tuple[str, Face]]]:
    """Two faces walking past each other (A left to right in front and larger, B right to left),
    overlapping in the middle, `step` px per frame; B is not detected in the `hidden` frames
    (occluded by A). From about 15 px per frame on, matching on last frame's boxes swaps or
    loses the ids; the tracker must predict where each face went."""
    clip = []
    for i in range(frames):
        a = face_at(40 + step * i, 100, 110)
        b = face_at(40 + step * (frames - 1 - i), 115, 90)
        dets = [("A", a)] + ([] if i in hidden else [("B", b)])
        if i % 2:  # detectors give no stable order
            dets.reverse()
        clip.append(dets)
    return clip


def run_clip(tracker: FaceTracker, clip: list[list[tuple[str, Face]]]) -> dict[str, set[int]]:
    ids: dict[str, set[int]] = {"A": set(), "B": set()}
    for i, dets in enumerate(clip):
        out = tracker.update([f for _, f in dets], i / FPS)
        assert len(out) == len(dets)
        for (name, _), face in zip(dets, out):
            assert face.track_id is not None
            ids[name].add(face.track_id)
    return ids


@pytest.mark.parametrize("smoothing", [0.0, 0.5])
@pytest.mark.parametrize(("step", "frames"), [(9, 60), (25, 24)])
def test_two_faces_crossing_keep_their_ids(smoothing, step, frames):
    ids = run_clip(FaceTracker(smoothing), crossing_clip(step, frames))
    assert len(ids["A"]) == 1 and len(ids["B"]) == 1
    assert ids["A"] != ids["B"]


def test_a_face_hidden_while_crossing_comes_back_with_its_id():
    clip = crossing_clip(15, 40, hidden=range(18, 22))  # B hidden behind A for 4 frames mid-crossing
    ids = run_clip(FaceTracker(0.5, max_missed=5), clip)
    assert len(ids["A"]) == 1 and len(ids["B"]) == 1 and ids["A"] != ids["B"]


def test_tracks_expire_after_max_missed_updates():
    tracker = FaceTracker(0.0, max_missed=3)
    f = face_at(100, 100, 80)
    first = tracker.update([f], 0.0)[0].track_id
    for i in range(1, 4):  # missed 3 times: still alive
        assert tracker.update([], i / FPS) == []
    assert tracker.update([f], 4 / FPS)[0].track_id == first
    for i in range(5, 9):  # missed 4 times: gone
        tracker.update([], i / FPS)
    assert tracker.update([f], 9 / FPS)[0].track_id != first


def test_far_apart_faces_get_distinct_ids_and_new_faces_new_ids():
    tracker = FaceTracker(0.5)
    out = tracker.update([face_at(0, 0, 80), face_at(300, 0, 80)], 0.0)
    assert len({f.track_id for f in out}) == 2
    out2 = tracker.update([face_at(2, 0, 80), face_at(300, 1, 80), face_at(600, 0, 80)], 1 / FPS)
    assert [f.track_id for f in out2[:2]] == [f.track_id for f in out]
    assert out2[2].track_id not in {f.track_id for f in out}


def test_time_going_backwards_starts_over():
    tracker = FaceTracker(0.5)
    a = tracker.update([face_at(0, 0, 80)], 5.0)[0].track_id
    assert tracker.update([face_at(0, 0, 80)], 1.0)[0].track_id != a


def jitter_ratio(smoothing: float, with_landmarks: bool = False) -> tuple[float, float]:
    """Std of the keypoints (and landmarks) of a still face with detector-like noise, raw over
    tracked, measured after a one-second warm-up."""
    rng = np.random.default_rng(7)
    tracker = FaceTracker(smoothing)
    lm_base = rng.uniform(100, 180, (468, 2))
    raw_k, out_k, raw_l, out_l = [], [], [], []
    for i in range(150):
        f = face_at(100, 100, 100)  # eyes 40 px apart
        kps = f.kps + rng.normal(0, 1.0, f.kps.shape)
        lm = lm_base + rng.normal(0, 1.0, lm_base.shape) if with_landmarks else None
        noisy = f.with_(kps=kps, landmarks=lm)
        out = tracker.update([noisy], i / FPS)[0]
        if i >= 30:
            raw_k.append(kps)
            out_k.append(out.kps)
            if with_landmarks:
                raw_l.append(lm)
                out_l.append(out.landmarks)
    k = np.std(raw_k, axis=0).mean() / np.std(out_k, axis=0).mean()
    lmr = np.std(raw_l, axis=0).mean() / np.std(out_l, axis=0).mean() if with_landmarks else 0.0
    return float(k), float(lmr)


def test_smoothing_reduces_keypoint_jitter_of_a_still_face_at_least_3x():
    ratio, lm_ratio = jitter_ratio(0.5, with_landmarks=True)
    assert ratio >= 3.0
    assert lm_ratio >= 3.0
    assert jitter_ratio(1.0)[0] > ratio  # stronger setting, smoother


def test_smoothing_off_passes_points_through_unchanged():
    tracker = FaceTracker(0.0)
    rng = np.random.default_rng(0)
    for i in range(10):
        f = face_at(100, 100, 100)
        f = f.with_(kps=f.kps + rng.normal(0, 1, (5, 2)))
        out = tracker.update([f], i / FPS)[0]
        np.testing.assert_array_equal(out.kps, f.kps)
        np.testing.assert_array_equal(out.bbox, f.bbox)


def test_smoothed_moving_face_follows_with_little_lag():
    tracker = FaceTracker(0.5)
    for i in range(90):  # 150 px/s to the right: across a 640 px frame in about 4 s
        truth = face_at(50 + 5 * i, 100, 100)
        out = tracker.update([truth], i / FPS)[0]
    lag = float(np.abs(out.kps - truth.kps).max())
    assert lag < 0.1 * truth.eye_distance  # under 4 px at 40 px between the eyes


def test_landmarks_that_disappear_are_not_invented():
    tracker = FaceTracker(0.5)
    lm = np.full((468, 2), 150.0)
    assert tracker.update([face_at(100, 100, 100, landmarks=lm)], 0.0)[0].landmarks is not None
    assert tracker.update([face_at(100, 100, 100)], 1 / FPS)[0].landmarks is None


def test_predict_moves_faces_along_their_velocity_without_changing_state():
    tracker = FaceTracker(0.0)
    for i in range(5):  # 6 px per frame = 180 px/s to the right
        last = tracker.update([face_at(100 + 6 * i, 50, 80)], i / FPS)[0]
    ahead = tracker.predict(6 / FPS)  # two frames later
    assert len(ahead) == 1 and ahead[0].track_id == last.track_id
    np.testing.assert_allclose(ahead[0].kps - last.kps, [[12.0, 0.0]] * 5, atol=0.05)
    np.testing.assert_allclose(ahead[0].bbox - last.bbox, [12.0, 0.0, 12.0, 0.0], atol=0.05)
    held = tracker.predict(6 / FPS, extrapolate=False)
    np.testing.assert_array_equal(held[0].kps, last.kps)
    # The real detection two frames later still matches the same track.
    assert tracker.update([face_at(100 + 6 * 6, 50, 80)], 6 / FPS)[0].track_id == last.track_id


def test_predict_leaves_out_faces_that_were_not_seen_last_time():
    tracker = FaceTracker(0.5)
    tracker.update([face_at(0, 0, 80), face_at(300, 0, 80)], 0.0)
    tracker.update([face_at(0, 0, 80)], 1 / FPS)
    assert len(tracker.predict(2 / FPS)) == 1


def test_one_euro_filter_converges_to_a_constant_signal():
    filt = OneEuroFilter(params_for_strength(0.5))
    p = np.array([[10.0, 20.0]])
    filt(p * 0, 0.0, 40.0)
    for _ in range(200):
        out = filt(p, 1 / FPS, 40.0)
    np.testing.assert_allclose(out, p, atol=1e-3)


def test_smoothing_strength_is_validated():
    assert params_for_strength(0.0) is None
    with pytest.raises(ValueError):
        FaceTracker(1.5)


class CountingConfirm:
    """A FaceMesh stand-in: a face whose box starts left of x 300 is a face, the rest are not
    (a glass); counts the faces it was asked about."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, faces: list[Face]) -> list[bool]:
        self.asked += len(faces)
        return [float(f.bbox[0]) < 300 for f in faces]


def test_a_track_is_confirmed_once_and_a_rejected_one_is_never_returned():
    # Confirming every frame costs a FaceMesh run per face per frame: once per track is enough.
    tracker, confirm = FaceTracker(smoothing=0.5), CountingConfirm()
    for i in range(30):
        face, glass = face_at(100 + i, 100, 100), face_at(400, 100, 90)
        out = tracker.update([glass, face], i / FPS, confirm)
        assert len(out) == 1 and out[0].bbox[0] < 300
    assert confirm.asked == 2 + 29 // RECHECK_EVERY  # the glass checked again now and then
    assert [f.bbox[0] < 300 for f in tracker.predict(30 / FPS)] == [True]


def test_update_marked_puts_none_where_the_track_is_not_a_face():
    tracker = FaceTracker(smoothing=0.0)
    marked = tracker.update_marked([face_at(400, 100, 90), face_at(100, 100, 100)], 0.0, CountingConfirm())
    assert marked[0] is None and marked[1] is not None and marked[1].track_id is not None


def test_a_rejected_track_is_checked_again_now_and_then_and_becomes_a_face_once_it_passes():
    # A face turned away (or half in view) as its track started was skipped for the whole track
    # by the neural swapper, which needs no landmarks of its own.
    tracker, verdicts = FaceTracker(smoothing=0.0), iter([False, True])
    outs = [tracker.update([face_at(100, 100, 100)], i / FPS, lambda faces: [next(verdicts) for _ in faces])
            for i in range(RECHECK_EVERY + 2)]
    assert [len(out) for out in outs] == [0] * RECHECK_EVERY + [1, 1]


