"""`livecam live`."""

from __future__ import annotations

from livecam.errors import NotAvailableError
from livecam.settings import LiveJob


def run_live(job: LiveJob) -> None:
    raise NotAvailableError("`livecam live` is not yet available in this build")
