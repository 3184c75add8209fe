"""The LivecamError family: every failure a user can cause or fix.

Each error carries a one-line, user-facing message (what was expected, what arrived, what to
do) and the exit code the CLI returns. Only cli.py prints them.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_MODEL = 3
EXIT_PROVIDER = 4
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell shows for git or cat cut short by `| head`


class LivecamError(Exception):
    """Base class: a message for the user and the process exit code."""

    exit_code: int = EXIT_FAILURE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(LivecamError):
    """Bad usage or input: a missing, unreadable or unsuitable file or option value."""

    exit_code = EXIT_USAGE


class NoFaceError(InputError):
    """An image that must contain a face has none."""


class OutputExistsError(InputError):
    """The output exists and --force was not given."""


class ModelError(LivecamError):
    """A model file is missing, invalid, of the wrong kind, or could not be downloaded."""

    exit_code = EXIT_MODEL


class DownloadError(ModelError):
    """A download failed (network, HTTP status, size or hash mismatch)."""


class LicenseNotAcceptedError(ModelError):
    """A model's licence needs --accept-license before it is downloaded."""


class ProviderError(LivecamError):
    """An execution provider is unavailable or fell back while creating a session."""

    exit_code = EXIT_PROVIDER


class ProviderStartError(ProviderError):
    """A provider that onnxruntime offers could not start (ORT fell back to another)."""

    def __init__(self, message: str, *, provider: str, cause: str, fix: str) -> None:
        super().__init__(message)
        self.provider, self.cause, self.fix = provider, cause, fix


class DeviceError(LivecamError):
    """A camera, virtual camera or window failed while in use. A camera or display that is not
    there when `run` starts is an InputError (exit 2): another --camera or --output fixes it."""

    exit_code = EXIT_FAILURE


class OutputError(LivecamError):
    """Writing an output failed (disk full, permission, encoder)."""

    exit_code = EXIT_FAILURE


class Interrupted(LivecamError):
    """Ctrl-C or SIGTERM."""

    exit_code = EXIT_INTERRUPTED

