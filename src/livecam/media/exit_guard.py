"""ExitGuard: a thread that takes over when a C library ends the process under Python's feet.

Qt's X11 platform (opencv-python's window) calls the C library's exit(1) from the thread that
drives the window as soon as it finds its display connection broken (the X server stopped, an
ssh forwarding gone): no exception reaches Python, no `finally` runs, the process just ends.
The guard registers two C exit handlers (plain libc functions, so they are harmless at any
exit, even after Python has shut down): the first to run wakes the guard's thread, the second
holds the exiting thread until the guard lets it go. The guard's thread then runs `on_exit`
(the caller's cleanup) while the exiting thread waits; if `on_exit` returns, the exit goes on.

A normal end of Python (or close()) opens the gate first, so the handlers then pass at once.
Linux and the BSDs only (where Qt draws through X11); elsewhere the guard does nothing.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import sys
import threading
from typing import Callable

# cli.py reports an error raised on a thread of this name, and only there: the guard's, and the
# live pipeline's rescue of an output loop stuck in a call after a stop signal (pipeline/live.py)
THREAD_NAME = "livecam-exit-guard"
SEM_T_BYTES = 64  # sizeof(sem_t) is 32 on 64-bit glibc, 16 on musl; a generous block for either


class ExitGuard:
    def __init__(self, on_exit: Callable[[], None], name: str = THREAD_NAME) -> None:
        self._on_exit = on_exit
        self._closed = False
        self._libc = _libc()
        if self._libc is None:
            return
        libc = self._libc
        # Never freed: the C exit handlers use them up to the process's last instant.
        self._gate, self._alarm = libc.calloc(1, SEM_T_BYTES), libc.calloc(1, SEM_T_BYTES)
        libc.sem_init(self._gate, 0, 0)
        libc.sem_init(self._alarm, 0, 0)
        # Exit handlers run last-registered first: sem_post(alarm), then sem_wait(gate).
        register = getattr(libc, "__cxa_atexit")  # (getattr: a dunder name in a class is mangled)
        register(_address(libc, "sem_wait"), self._gate, None)
        register(_address(libc, "sem_post"), self._alarm, None)
        atexit.register(self._open_gate)  # Python's own end: the C handlers must not wait
        threading.Thread(target=self._watch, name=name, daemon=True).start()

    def close(self) -> None:
        """Stop guarding: the thread ends, a later exit() goes through at once."""
        if self._libc is None or self._closed:
            return
        self._closed = True
        atexit.unregister(self._open_gate)
        self._open_gate()
        self._libc.sem_post(self._alarm)

    def _open_gate(self) -> None:
        assert self._libc is not None
        self._libc.sem_post(self._gate)

    def _watch(self) -> None:
        assert self._libc is not None
        # without the GIL (ctypes): only exit() or close() wakes it; a signal landing on this
        # thread interrupts the wait (EINTR), which is not an exit
        while self._libc.sem_wait(self._alarm) != 0 and ctypes.get_errno() == errno.EINTR:
            pass
        if self._closed:
            return
        self._closed = True
        try:
            self._on_exit()
        finally:  # on_exit returned (or raised): the exit it interrupted goes on
            self._open_gate()


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith(("linux", "freebsd")):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("calloc", "sem_init", "sem_post", "sem_wait", "__cxa_atexit"):
            getattr(libc, name)
    except (OSError, AttributeError):
        return None
    libc.calloc.restype = ctypes.c_void_p
    libc.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    libc.sem_init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint]
    libc.sem_post.argtypes = [ctypes.c_void_p]
    libc.sem_wait.argtypes = [ctypes.c_void_p]
    getattr(libc, "__cxa_atexit").argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return libc


def _address(libc: ctypes.CDLL, name: str) -> int | None:
    return ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
