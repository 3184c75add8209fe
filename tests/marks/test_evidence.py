"""evidence.WatermarkFinding: what `livecam verify` says of the watermark it looked for."""

from __future__ import annotations

from livecam.marks.evidence import WatermarkFinding


def test_an_unmarked_image_is_not_called_a_frame() -> None:
    # an image was "not found (the image; closest frame 16 of 32 bits off)": it has one frame
    assert WatermarkFinding(frames_read=1, best_errors=16).describe() == "not found (the image; 16 of 32 bits off)"


def test_an_unmarked_video_names_its_closest_frame() -> None:
    assert WatermarkFinding(frames_read=40, best_errors=9).describe() == \
        "not found (marked in 0 of 40 frames read; closest frame 9 of 32 bits off)"


def test_an_unmarked_video_says_what_it_counts() -> None:
    # "not found (1 of 40 frames read; ...)" read as one frame read, and did not say a marked
    # frame was found but too few of them
    assert WatermarkFinding(frames_read=40, frames_marked=1, best_errors=2).describe() == \
        "not found (marked in 1 of 40 frames read, 2 needed; closest frame 2 of 32 bits off)"
