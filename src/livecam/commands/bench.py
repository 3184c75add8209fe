"""`livecam bench`."""

from __future__ import annotations

from livecam.errors import NotAvailableError
from livecam.settings import BenchJob


def run_bench(job: BenchJob) -> None:
    raise NotAvailableError("`livecam bench` is not yet available in this build")
