"""One way to write an output file: through a hidden temporary file, renamed into place at the end.

    with AtomicOutput(path, force=force) as out:
        write_everything_to(out.temp)     # any writer: PyAV, cv2, open(), ...
    # committed here; on an exception the temporary file is removed instead

`AtomicOutput` owns everything around a written file, so no writer repeats it:
- the "exists and not --force" check, made when the output is opened;
- writing through a link at the output path (`write_target`), as cp and ffmpeg -y do: the
  file it leads to gets the result, the link stays a link;
- a short temporary name beside the file written (same folder, so the rename is atomic; short,
  so an output name near the file system's 255-byte limit still fits);
- removal of the temporary file on every exit path that does not commit;
- the final rename, which never replaces a file that was not there when the output was opened
  (or that --force did not cover): a file that appeared meanwhile is kept, the result is kept
  under a free name the error gives (exit 2), and so is the result when --force cannot replace the
  old file (exit 1: an OutputError);
- messages that name the user's path, never the temporary file.

Nothing here imports OpenCV or PyAV: models/ and faces/ use it too.
"""

from __future__ import annotations

import errno
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from livecam.errors import InputError, OutputError, OutputExistsError
from livecam.paths import why_missing

# errno values that mean "no more bytes fit": no partial result is worth keeping then.
DISK_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
FULL = "the disk is full (or over quota)"  # what ENOSPC and EDQUOT mean to a user
NO_NEW_FILES = "a kernel file system, which takes no new files"  # /proc, /sys/kernel: ENOENT to a new name
_MAX_SUFFIX = 16  # characters of the output's extension kept on the temporary name


class OutputConflictError(OutputError):
    """A file appeared at the output path while livecam was writing it; the result was kept
    under another name (`kept`). Exit 1, as when --force cannot replace the old file (the result
    kept the same way): the command was right when given, putting its output in place failed.
    (It was an OutputExistsError, exit 2, a usage error.)"""

    def __init__(self, message: str, *, kept: Path | None) -> None:
        super().__init__(message)
        self.kept = kept



def trailing_slash_problem(given: str) -> str | None:
    """Why an output file name given as `given` names a folder instead: its trailing slash, which
    Path drops (`out.jpg/` wrote the file out.jpg); None without one."""
    if not given.endswith(("/", os.sep)):
        return None
    return f"{given!r} ends in a slash, which means a folder; give the file name without it ({Path(given)})"

@dataclass(frozen=True)
class _Identity:
    """A file as it was seen: a new file at the same path differs (inode numbers are reused, so
    size and modification time count too). Taken of the file written (`write_target`), never of
    a link to it."""

    device: int
    inode: int
    size: int
    modified_ns: int

    @classmethod
    def of(cls, path: Path) -> _Identity | None:
        try:
            st = path.lstat()
        except OSError:
            return None
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def folder_of(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def write_target(path: Path, *, what: str = "") -> Path:
    """The file that writing `path` puts the result in: `path`, or where it is a link, the end of
    its chain of links, resolved once (os.path.realpath). An output is written through a link, as
    cp and ffmpeg -y do: the linked file gets the result and the link stays (the rename replaced
    the link with a file and left the linked file as it was). A dangling link is written through
    when the folder it points into exists, as cp does (the user made the link to say where the
    output goes); one into a missing folder, or in a loop of links (why_missing's words), is
    refused. Whether the linked file is an input is check_not_an_input's (os.path.samefile)."""
    if not os.path.islink(path):
        return path
    target = Path(os.path.realpath(path))
    if os.path.islink(target):  # realpath stops at a loop
        raise InputError(f"{what}{path} {why_missing(path)}")
    if not folder_of(target).is_dir():
        raise InputError(f"{what}{path} is a link into the folder {folder_of(target)}, which does not exist; "
                         f"create it or fix the link")
    return target


def check_new_output(path: Path, *, force: bool, what: str = "") -> None:
    """The cheap checks before any work: not a folder, a link that can be written through, and
    not an existing file without --force (a link counts as one, dangling or not).
    `what` prefixes the message with the option that named the path (e.g. '--output ')."""
    if path.is_dir():
        raise InputError(f"{what}{path} is a folder; give a file name such as {path / ('out' + (path.suffix or '.mp4'))}")
    write_target(path, what=what)
    if (path.exists() or path.is_symlink()) and not force:
        raise OutputExistsError(f"{what}{path} exists; add --force to overwrite it or choose another name")


def refusal(exc: OSError) -> str:
    """Why a folder that exists took no new file or folder, in os_error_message's words. A
    kernel's folder (/proc) answers ENOENT: it was "(No such file or directory)" there."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "it is on a read-only file system"
    if exc.errno == errno.ENOENT:
        return NO_NEW_FILES
    return exc.strerror or str(exc)


def os_error_message(path: Path, exc: OSError, smaller: str | None = None) -> str:
    """One line for an OSError met while writing `path`, naming `path` (not a temporary file).
    `smaller`: the option that makes the file smaller, for a size limit ("a lower --video-quality";
    None where the command has none: a `run` recording was told to use that option it lacks)."""
    folder = folder_of(path)
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"writing {path} failed: {FULL}; free some space or choose another folder"
    if code == errno.EFBIG:
        return (f"writing {path} failed: the file grew past the file size limit of this file system or "
                f"process (ulimit -f); choose another folder or {smaller or 'raise the limit'}")
    if code == errno.ENOENT and folder.is_dir():
        return f"cannot write {path}: {folder} is on {NO_NEW_FILES}; choose another output path"
    if code == errno.ENOENT:
        return f"writing {path} failed: the folder {folder} no longer exists; create it and run again"
    if code in (errno.EACCES, errno.EPERM):
        return f"cannot write {path} (permission denied); choose another output path"
    if code == errno.EROFS:
        return f"cannot write {path}: {folder} is on a read-only file system; choose another output path"
    if code == errno.ENAMETOOLONG:
        return f"cannot write {path}: the name is too long for this file system; choose a shorter one"
    return f"writing {path} failed ({exc.strerror or exc}); check free space and permissions"


def output_error(path: Path, exc: OSError, smaller: str | None = None) -> OutputError | InputError:
    """The LivecamError for an OSError while writing `path` (a missing folder is the user's input);
    `smaller` as for os_error_message."""
    if exc.errno == errno.ENOENT:
        return InputError(os_error_message(path, exc, smaller))
    return OutputError(os_error_message(path, exc, smaller))


def _link_no_clobber(src: Path, dst: Path) -> bool:
    """Rename src to dst unless dst exists, atomically where the file system allows hard links.
    Returns False when dst exists."""
    try:
        os.link(src, dst)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        # No hard links here (FAT, some network shares): check, then rename (a tiny window remains).
        if dst.exists() or dst.is_symlink():
            return False
        os.replace(src, dst)
        return True
    src.unlink()
    return True


@dataclass(frozen=True)
class OutputStart:
    """An output as checked when its run started, for a run that opens its AtomicOutput only at
    the end (a cluster run's join, maybe hours later): --force covers the file that was there
    then, and a file that appeared since is left alone (the result kept beside it), as for an
    output opened at the start. `check` makes one."""

    covered: _Identity | None  # the file --force allows replacing

    @classmethod
    def check(cls, path: Path, *, force: bool, what: str = "") -> OutputStart:
        check_new_output(path, force=force, what=what)
        return cls(_Identity.of(write_target(path, what=what)) if force else None)


class AtomicOutput:
    """A file written through `temp` and renamed onto `target` (`path`, or the file the link at
    `path` leads to) by `commit()` (or a clean exit); messages name `path`. `started`: the
    output was checked when the run started (OutputStart), so open() does not check it again."""

    def __init__(self, path: Path, *, force: bool = False, what: str = "", cache: bool = False,
                 shown: Path | None = None, started: OutputStart | None = None) -> None:
        self.path = Path(path)
        # the path messages name: a file rewritten while it is still another output's temporary
        # file (signing) is reported as that output, never by its hidden name
        self.shown = Path(shown) if shown is not None else self.path
        self.force = force or cache
        # cache: a file only livecam writes (a cache entry): whatever is at the path at the end is
        # replaced, since any copy will do and a set-aside copy would only litter the folder.
        self.cache = cache
        self.what = what
        self.committed = False
        self.target = write_target(self.path, what=what)
        suffix = self.target.suffix if len(self.target.suffix) <= _MAX_SUFFIX else ""
        # beside the file written, so the rename stays on its file system
        self.temp = folder_of(self.target) / f".livecam-{secrets.token_hex(4)}.part{suffix}"
        self._covered: _Identity | None = None  # the file --force allows replacing
        self._started = started

    def __enter__(self) -> AtomicOutput:
        self.open()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None and not self.committed:
            self.commit()
        else:
            self.discard()
        if isinstance(exc, OSError) and not isinstance(exc, (FileExistsError,)):
            raise output_error(self.shown, exc) from exc

    def open(self) -> None:
        """Check the path and reserve the temporary name (O_EXCL: never someone else's file)."""
        if self._started is not None:  # checked at the start; what appeared since is commit()'s
            self._covered = self._started.covered
        else:
            check_new_output(self.path, force=self.force, what=self.what)
            self._covered = _Identity.of(self.target) if self.force else None
        try:
            fd = os.open(self.temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except OSError as exc:
            raise output_error(self.shown, exc) from None
        os.close(fd)

    def write_bytes(self, data: bytes) -> None:
        """Write all of `data` to the temporary file and flush it to disk."""
        try:
            with open(self.temp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise output_error(self.shown, exc) from exc

    def commit(self) -> Path:
        """Rename the finished temporary file onto the output path; returns the path.

        Replaces only what was there when the output was opened and --force was given; a file
        that appeared since is left alone, and the result is kept beside it (OutputConflictError)."""
        if self.committed:
            return self.path
        try:
            current = _Identity.of(self.target)
            if current is not None and (self.cache or (self.force and current == self._covered)):
                self._replace()
            elif not _link_no_clobber(self.temp, self.target):
                kept = self._keep_aside()
                self.committed = True
                raise OutputConflictError(
                    f"{self.path} appeared while livecam was writing it and was left as it is; the result "
                    f"was kept as {kept}; rename one of them, or add --force to replace files that exist",
                    kept=kept)
        except OSError as exc:
            self.discard()
            raise output_error(self.shown, exc) from exc
        self.committed = True
        return self.path

    def _replace(self) -> None:
        """The --force rename onto the old output. When the old file cannot be replaced (it is
        immutable, another user's in a sticky folder such as /tmp, open in a player on Windows),
        the finished result is kept beside it: an hour's recording or video was deleted."""
        try:
            os.replace(self.temp, self.target)
        except OSError as exc:
            if exc.errno in DISK_FULL or self.cache:
                raise
            try:
                kept = self._keep_aside()
            except OSError:
                raise exc from None
            self.committed = True
            raise OutputError(f"cannot replace {self.shown} ({exc.strerror or exc}); the result was kept as "
                              f"{kept}") from exc

    def discard(self) -> None:
        """Remove the temporary file (nothing at the output path is touched)."""
        if not self.committed:
            try:
                self.temp.unlink()
            except OSError:
                pass

    def _keep_aside(self) -> Path:
        stem, suffix = self.target.stem, self.target.suffix
        for n in range(1, 1000):
            candidate = self.target.with_name(f"{stem}.livecam-{n}{suffix}")
            try:
                if _link_no_clobber(self.temp, candidate):
                    return candidate
            except OSError as exc:
                if exc.errno != errno.ENAMETOOLONG:
                    raise
                stem = "livecam-result"  # the output's own name is near the limit: a short one
        raise OutputError(f"{self.path} appeared while livecam was writing it, and no free name was found "
                          f"beside it for the result; the result was not kept")
