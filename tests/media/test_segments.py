"""The segment plan: one demux pass, cuts at exact frame times, moved to a near keyframe, and
warm-ups that start decoding at a keyframe."""

from __future__ import annotations

from pathlib import Path

import pytest

from livecam.errors import InputError
from livecam.media.segments import index_packets, plan_segments
from tests.pipeline.test_segments import make_coded_clip


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a keyframe every 45 frames (1.5 s at 30 fps), B-frames
    return make_coded_clip(tmp_path_factory.mktemp("plan") / "in.mp4", codec="libx264", frames=150,
                           options={"preset": "ultrafast", "bf": "2", "g": "45", "x264-params": "scenecut=0"},
                           audio_codec=None)


def test_the_index_has_every_frame_and_its_keyframes(clip: Path) -> None:
    index = index_packets(clip)
    assert len(index.pts) == 150
    keys = [index.frame_pts.index(p) for p, k in zip(index.pts, index.keyframe) if k]
    assert keys == [0, 45, 90, 135]
    assert index.seconds(index.frame_pts[30]) == pytest.approx(1.0)


def test_cuts_move_to_a_near_keyframe_and_cover_every_frame_once(clip: Path) -> None:
    segments = plan_segments(index_packets(clip), segment_seconds=2.0, overlap_seconds=0.5)
    # targets 2.0 s (frame 60): the keyframe at 1.5 s is within min(2, 2/4) s; then 3.5 s -> 3.0 s
    assert [(s.first, s.end) for s in segments] == [(0, 45), (45, 90), (90, 150)]
    assert segments[0].warm == 0 and segments[0].seek_pts is None
    index = index_packets(clip)
    for s in segments[1:]:
        assert s.warm == s.first - 15  # 0.5 s of warm-up at 30 fps
        # decoding starts at the last keyframe at or before the warm-up's first frame (None: the start)
        key = s.first - 45
        assert s.seek_pts == (index.frame_pts[key] if key else None)
        assert s.role(s.warm_time) == "warm" and s.role(s.first_time) == "write"
    assert segments[-1].end_time is None


def test_no_keyframe_near_a_cut_keeps_the_exact_time(clip: Path) -> None:
    segments = plan_segments(index_packets(clip), segment_seconds=1.0, overlap_seconds=0.0)
    assert [s.first for s in segments] == [0, 30, 60, 90, 120]


def test_a_segment_length_of_zero_is_refused(clip: Path) -> None:
    with pytest.raises(InputError, match="--segment-seconds"):
        plan_segments(index_packets(clip), segment_seconds=0.0, overlap_seconds=1.0)
