"""Why an input path that does not resolve is not there, in words a user can act on."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def why_missing(path: Path, fix: str = "check the path") -> str:
    """What follows the name of a path that does not resolve, with its fix: `fix` after "does not
    exist", or what the name `ls` lists really is, a link to nothing or one in a loop of links
    (both were said "not to exist", or a loop "a link to NAME, which does not exist")."""
    if os.path.islink(path):
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "is a link in a loop of links (each leads to another); fix or remove the link"
            try:
                return f"is a link to {os.readlink(path)}, which does not exist; fix or remove the link"
            except OSError:
                pass
    return f"does not exist; {fix}"


def nearest_existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists: where a folder made for `path` would start."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def blocked_folder(path: Path) -> str | None:
    """Why folder `path` cannot be made (its nearest existing part is a file, not a folder), in
    words naming that file: mkdir says only "Not a directory" or "File exists"; None otherwise."""
    probe = nearest_existing(path)
    return None if probe.is_dir() else f"{probe} is a file, not a folder"
