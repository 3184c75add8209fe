"""What livecam writes to the terminal: one-line messages (counted: "1 frame", "2 frames"; agree: "is", "are"), the
log's format, and what becomes of stdout when it cannot be written. cli.py decides the exit codes; commands/ print through here too."""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import re
import sys
import traceback
from typing import Iterator, TextIO

import click

from livecam import native_stderr
from livecam.atomic import DISK_FULL

log = logging.getLogger("livecam")


class StdoutClosed(Exception):
    """stdout's reader went away (`livecam models list | head -1`). Not an OSError, so click (which
    would exit 1 for it, the code `livecam verify` gives an unmarked file) lets it through to
    LivecamGroup.main."""


class StdoutUnwritable(Exception):
    """stdout cannot be written: its disk is full (`livecam verify --json *.mp4 > report.json`: it
    was "internal error: OSError ... please report it", exit 1, which `verify` also gives an
    unmarked file), or the command was started without one (`>&-`: nothing printed, exit 0)."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.reason, self.fix = reason, fix


class ClosedStdout(io.TextIOBase):
    """sys.stdout for a process started without one: Python leaves it None, and click.echo then
    dropped every line (`livecam verify f >&-` printed nothing, exit 0). A write fails as one to
    the closed descriptor does (EBADF); a command that writes nothing there is unaffected."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")


@contextlib.contextmanager
def stdout_failures() -> Iterator[None]:
    """Turns EPIPE into StdoutClosed, and no space left into StdoutFull: every other file livecam
    writes (outputs, a --stats-json FIFO) has its own LivecamError, so one reaching the CLI is stdout's."""
    try:
        yield
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise StdoutUnwritable(exc.strerror or str(exc), "free some space where it goes or send it elsewhere") \
                from exc
        if exc.errno == errno.EBADF and isinstance(sys.stdout, ClosedStdout):
            raise StdoutUnwritable("it is closed", "send it to a file, or to /dev/null to drop it") from exc
        if exc.errno != errno.EPIPE:
            raise
        raise StdoutClosed() from exc


def stdout_to_devnull() -> None:
    """Point stdout at the null device, so Python's own flush at exit finds no broken pipe or full
    disk to complain about ("Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no stdout to point anywhere: nothing will flush to it
        pass


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def one_line(text: str) -> str:
    """`text` with its control characters escaped as Python writes them (a newline as \\n, an
    escape as \\x1b): a file name holding a newline split the one-line "wrote ..." and error
    messages over two lines; and valid UTF-8 (as_utf8: a name's byte 0xff as \\xff, which
    `verify`'s report wrote raw, and stderr as \\udcff). Every stderr message passes here
    (_say, OneLineFormatter), and `verify`'s report."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], as_utf8(text))


def as_utf8(text: str) -> str:
    """`text` as valid UTF-8: the bytes of a file name that are not UTF-8, which Python keeps as
    lone surrogates (0xff as \\udcff, what `verify --json` wrote, and no strict parser takes), as
    Python writes bytes: \\xff."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate no file name's byte became
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def is_terminal(stream: TextIO) -> bool:
    """Whether progress on `stream` is a bar (a terminal) or a line now and then (a log, a pipe, a
    CI job: a bar's carriage returns make one endless line there)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def counted(n: int, noun: str) -> str:
    """`n` and `noun`, plural unless `n` is 1 (a regular English plural: noun + s): a one-frame
    clip was "1 frames" in the summary, the interrupt and the no-face warning."""
    return f"{n} {agree(n, noun, noun + 's')}"


def agree(n: int, one: str, many: str) -> str:
    """`one` when `n` is 1, else `many` (0 included), as counted() decides: the words that agree
    with a count not written beside them ("the face is" / "the faces are", "it is" / "they are")."""
    return one if n == 1 else many


class OneLineFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:  # (a -v traceback after it keeps its lines)
        return one_line(super().formatMessage(record))


def say(line: str) -> None:
    """One line on stderr. A stderr that cannot take it (`2> log` on a full disk) must not change the
    command's exit code (a bad input's 2 became 1)."""
    try:
        click.echo(one_line(line), err=True)
    except OSError:
        pass


def print_cause_chain(exc: BaseException) -> None:
    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        click.echo(f"  caused by {type(cause).__name__}: {cause}", err=True)
        cause = cause.__cause__ or cause.__context__
    traceback.print_exception(exc)


def setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose else logging.INFO)
    handler = logging.StreamHandler(native_stderr.StderrNow())  # (not captured with fd 2)
    handler.setFormatter(OneLineFormatter("livecam: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False
