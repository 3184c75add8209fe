"""The command line as read before click (variadic options)."""

from __future__ import annotations

from livecam.cli_usage import expand_variadic


def test_variadic_options_take_only_their_own_choices() -> None:
    argv = ["video", "--frame-processor", "face_swapper", "face_enhancer", "in.mp4", "out.mp4",
            "--execution-provider", "cuda", "cpu"]
    assert expand_variadic(argv) == [
        "video", "--frame-processor", "face_swapper", "--frame-processor", "face_enhancer",
        "in.mp4", "out.mp4", "--execution-provider", "cuda", "--execution-provider", "cpu"]
