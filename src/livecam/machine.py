"""What this machine and process have: memory resident now, RAM still available, cores.

Read from /proc on Linux (no dependency); elsewhere from psutil when it is installed, else
unknown (None)."""

from __future__ import annotations

import os


def cores() -> int:
    return os.cpu_count() or 1


def encoder_threads() -> int:
    """x264's frame threads for a file output: one per core, at most 16 (each costs memory:
    pipeline/budget.ENCODER_PER_THREAD)."""
    return min(16, cores())


def resident_bytes() -> int:
    """This process's resident memory now (0 where it cannot be read)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return 0
    return int(psutil.Process().memory_info().rss)


def available_bytes() -> int | None:
    """RAM the machine can give without swapping: MemAvailable of /proc/meminfo (Linux), else
    psutil.virtual_memory().available; None when neither answers."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def address_space_bytes() -> int | None:
    """This process's virtual size now (Linux; None elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
