"""Many video files in one run (a folder in, a folder out): what became of each file.

Local batch runs and cluster runs (livecam.cluster) both report one FileOutcome per planned file,
so the summary and the exit code are decided in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from livecam.errors import LivecamError
from livecam.settings import VideoJob


@dataclass(frozen=True)
class FileOutcome:
    job: VideoJob
    frames: int = 0  # frames written
    error: LivecamError | None = None  # None: the output was written (or skipped)
    skipped: bool = False  # --skip-existing found the output already there

    @property
    def failed(self) -> bool:
        return self.error is not None
