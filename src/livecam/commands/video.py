"""`livecam video`."""

from __future__ import annotations

from livecam.errors import NotAvailableError
from livecam.settings import VideoJob


def run_video(job: VideoJob) -> None:
    raise NotAvailableError("`livecam video` is not yet available in this build")
