"""Start timecodes: read from an input (a MOV's tmcd track), conformed to the output's rate."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from livecam.media.timecode import conform, start_timecode
from livecam.media.video_reader import VideoReader
from tests.videos import make_clip

NTSC = Fraction(30000, 1001)


@pytest.mark.parametrize("timecode, source, target, expected", [
    ("01:00:00:00", Fraction(25), Fraction(25), "01:00:00:00"),
    ("00:59:59;29", NTSC, NTSC, "00:59:59;29"),  # drop-frame as it is
    ("00:59:59;29", NTSC, Fraction(30), "00:59:59;29"),  # both count 30 a second
    ("10:00:00:12", Fraction(25), Fraction(50), "10:00:00:24"),
    ("10:00:00:24", Fraction(50), Fraction(25), "10:00:00:12"),
    ("01:00:00;20", NTSC, Fraction(60000, 1001), "01:00:00;40"),  # still drop-frame
    ("01:00:00;20", NTSC, Fraction(25), "01:00:00:16"),  # no drop-frame at 25
    ("01:00:00:00", Fraction(25), Fraction(1, 10), None),  # no whole frame a second
    ("", Fraction(25), Fraction(25), None),
    ("01:70:00:00", Fraction(25), Fraction(25), None),
    (None, Fraction(25), Fraction(25), None),
])
def test_a_timecode_is_conformed_to_the_outputs_rate(timecode: str | None, source: Fraction, target: Fraction,
                                                     expected: str | None) -> None:
    assert conform(timecode, source, target) == expected


def test_a_damaged_tag_is_no_timecode() -> None:
    assert start_timecode(" 01:02:03:04 ") == "01:02:03:04"
    assert start_timecode("1:02:03:04") is None and start_timecode("yesterday") is None


def test_the_reader_finds_a_movs_timecode_and_names_its_track(tmp_path: Path) -> None:
    """The tmcd track was counted as '1 data stream' the output leaves out."""
    clip = make_clip(tmp_path / "in.mov", frames=5, size=(64, 48), timecode="01:00:00:00")
    with VideoReader(clip) as reader:
        assert reader.info.timecode == "01:00:00:00"
        assert reader.info.other_streams == ("timecode",)
    with VideoReader(make_clip(tmp_path / "plain.mov", frames=5, size=(64, 48))) as reader:
        assert reader.info.timecode is None and reader.info.other_streams == ()
