"""wording.counted: the one way a message counts things."""

from __future__ import annotations

from livecam.wording import counted


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert counted(1, "frame") == "1 frame"
    assert [counted(n, "frame") for n in (0, 2, 11)] == ["0 frames", "2 frames", "11 frames"]
