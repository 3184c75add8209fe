"""paths.py: what a path that does not resolve really is."""

from __future__ import annotations

from pathlib import Path

from livecam.paths import why_missing


def test_a_plain_missing_path_gets_the_callers_fix(tmp_path: Path) -> None:
    assert why_missing(tmp_path / "none.mp4") == "does not exist; check the path"
    assert why_missing(tmp_path / "none.mp4", "give a video file") == "does not exist; give a video file"


def test_a_loop_of_links_is_not_called_a_link_to_a_missing_file(tmp_path: Path) -> None:
    # a folder batch said "a.mp4 is a link to b.mp4, which does not exist" of a loop, b.mp4 being there
    (tmp_path / "a.mp4").symlink_to("b.mp4")
    (tmp_path / "b.mp4").symlink_to("a.mp4")
    assert why_missing(tmp_path / "a.mp4").startswith("is a link in a loop of links")
    (tmp_path / "c.mp4").symlink_to("gone.mp4")
    assert why_missing(tmp_path / "c.mp4") == "is a link to gone.mp4, which does not exist; fix or remove the link"
