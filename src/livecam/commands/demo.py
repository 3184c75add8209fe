"""`livecam demo`."""

from __future__ import annotations

from livecam.errors import NotAvailableError
from livecam.settings import DemoJob


def run_demo(job: DemoJob) -> None:
    raise NotAvailableError("`livecam demo` is not yet available in this build")
