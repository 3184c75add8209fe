"""A backstop behind the memory plan (budget.py): with --max-memory, once the file pipeline is
warm, the address space may grow by the budget and no more (RLIMIT_AS, Linux). The models, thread
stacks, allocator arenas and codec buffers reserve far more address space than they use, so the
cap is that warm size plus the budget; the plan keeps a run's real growth (the encoder's frame
pool filling up included) under the budget, so only a runaway (a leak, a buffer that keeps
growing) reaches it, and fails with MemoryError instead of swapping the machine to a halt."""

from __future__ import annotations

import logging

from livecam.machine import address_space_bytes

log = logging.getLogger("livecam")


class AddressSpaceCap:
    def __init__(self, max_memory_gb: float | None) -> None:
        self._budget = int(max_memory_gb * (1 << 30)) if max_memory_gb else None
        self._saved: tuple[int, int] | None = None

    def apply(self) -> None:
        try:
            import resource
        except ImportError:  # Windows
            return
        now = address_space_bytes()
        if self._budget is None or now is None or not hasattr(resource, "RLIMIT_AS") or self._saved is not None:
            return
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = now + self._budget
        for limit in (soft, hard):
            if limit != resource.RLIM_INFINITY:
                cap = min(cap, limit)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        except (ValueError, OSError):
            return
        self._saved = (soft, hard)
        log.debug("address space capped at %.2f GB", cap / (1 << 30))

    def restore(self) -> None:
        if self._saved is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, self._saved)
            self._saved = None
