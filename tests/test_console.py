"""console: how messages count things and keep to one line."""

from __future__ import annotations

import os

from livecam.console import agree, as_utf8, counted, one_line


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert counted(1, "frame") == "1 frame"
    assert [counted(n, "frame") for n in (0, 2, 11)] == ["0 frames", "2 frames", "11 frames"]


def test_the_words_that_agree_with_a_count_follow_counted() -> None:
    # "the face is too small", "the faces are too small": one rule for 1, 0 and many, as counted's
    assert [agree(n, "is", "are") for n in (1, 0, 2, 11)] == ["is", "are", "are", "are"]
    assert [f"the {agree(n, 'face', 'faces')} {agree(n, 'is', 'are')}" for n in (1, 3)] == [
        "the face is", "the faces are"]


def test_control_characters_are_escaped_as_python_writes_them() -> None:
    assert one_line("a\nb\x1b[31mc\td") == "a\\nb\\x1b[31mc\\td"
    assert one_line("plain é ü") == "plain é ü"  # printable text, accents included, stays


def test_bytes_of_a_name_that_are_not_utf8_are_written_as_python_writes_bytes() -> None:
    name = os.fsdecode(b"bad\xffname \xc3\xa9.jpg")  # 0xff is not UTF-8; the \xc3\xa9 of "é" is
    assert as_utf8(name) == "bad\\xffname é.jpg"
    assert as_utf8("plain é") == "plain é" and as_utf8("\ud800") == "\\ud800"  # any lone surrogate: valid text


def test_a_line_for_the_terminal_is_valid_utf8_whatever_bytes_a_name_holds() -> None:
    # `verify`'s report wrote the byte 0xff raw (not UTF-8), and stderr as the surrogate \udcff
    line = one_line(os.fsdecode(b"bad\xff\nname.mp4: error"))
    assert line == "bad\\xff\\nname.mp4: error"
    line.encode("utf-8")  # strict: no lone surrogate left
