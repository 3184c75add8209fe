"""`livecam image`."""

from __future__ import annotations

from livecam.errors import NotAvailableError
from livecam.settings import ImageJob


def run_image(job: ImageJob) -> None:
    raise NotAvailableError("`livecam image` is not yet available in this build")
