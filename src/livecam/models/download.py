"""HTTP downloads that survive cuts: NAME.part, Range resume, retries, size and SHA-256 checks.

Only the final, verified file is ever renamed into place (atomically); a file that fails its
checks is deleted and the error says so.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import logging
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from livecam.atomic import DISK_FULL
from livecam.console import is_terminal
from livecam.errors import DownloadError

log = logging.getLogger("livecam")

CHUNK = 1 << 20
LINE_INTERVAL_S = 10.0  # progress lines where stderr is no terminal
USER_AGENT = "livecam-model-download"


@dataclass(frozen=True)
class DownloadPolicy:
    """How hard to try. Tests shrink the delays."""

    attempts: int = 5  # per URL, counting the first
    backoff_s: float = 1.0  # doubled after each failed attempt
    max_backoff_s: float = 30.0
    timeout_s: float = 30.0  # per socket operation


class _Retry(Exception):
    """A transient failure: try the same URL again after a pause."""


class _NextUrl(Exception):
    """A permanent failure for this URL (404, wrong size): try the next mirror."""


class _Unreachable(_NextUrl):
    """No network (or DNS) for this URL: retrying cannot help, the next mirror is tried at once."""

    def __init__(self, host: str, why: str) -> None:
        super().__init__(f"cannot reach {host} ({why}); is this machine offline?")
        self.host, self.why = host, why


class Unreachable(DownloadError):
    """Every address of a file failed for want of a network (or DNS). `hosts` and `why` let the
    store say it once for all the sources of a model, with the fix it knows (models/store.py)."""

    def __init__(self, label: str, hosts: tuple[str, ...], why: str) -> None:
        super().__init__(f"could not download {label}: cannot reach {' or '.join(hosts)} ({why}); is this "
                         f"machine offline?")
        self.hosts, self.why = hosts, why


class ProxyRefused(DownloadError):
    """A download given up at the proxy's first refusal: every mirror (all https) goes through the
    same proxy, so no other is tried, nor the store's other source of the model."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def download(
    urls: tuple[str, ...] | list[str],
    dest: Path,
    *,
    size: int | None,
    sha256: str | None,
    label: str,
    progress: bool = True,
    policy: DownloadPolicy = DownloadPolicy(),
    unverified: bool = False,
    folder: str,
    elsewhere: str,
) -> Path:
    """Fetch the first URL that works into `dest` via `dest.part`; return dest.

    `folder` names dest's folder for a local write error (with where it came from) and `elsewhere`
    says how to use another one: the caller knows (store.models_root_named, other_models_root).
    Resumes a `.part` left by an earlier cut. A hash mismatch after a resumed transfer means the
    server's file changed between the cut and the resume: the part is dropped and fetched again
    from zero, once. Raises DownloadError with every URL's reason when none works, Unreachable when
    none could be reached for want of a network.
    """
    if not urls:
        raise DownloadError(f"no download address is known for {label}")
    part = part_path(dest)
    if part.is_dir():  # was "server ignored the resume request", then "Is a directory; free some disk space"
        raise DownloadError(f"{part} is a folder, where the partial download goes; move it away and run the "
                            f"download again")
    reasons: list[str] = []
    unreachable: list[_Unreachable] = []
    for url in urls:
        try:
            _fetch_verified(url, part, size=size, sha256=sha256, label=label, progress=progress,
                            policy=policy, unverified=unverified)
        except _NextUrl as exc:
            if isinstance(exc, _Unreachable):
                unreachable.append(exc)
            reason = str(exc) if _host(url) in str(exc) else f"{_host(url)}: {exc}"
            if reason not in reasons:  # mirrors on one host (or no network) fail alike: say it once
                reasons.append(reason)
            continue
        except OSError as exc:  # network errors are handled inside; this is the local disk
            # disk space is the fix only for a full disk (a file not ours, a read-only one, were told it too)
            fix = (f"free some disk space (the partial file resumes), or {elsewhere}" if exc.errno in DISK_FULL
                   else elsewhere)
            raise DownloadError(f"cannot write {part.name} in {folder}: {exc.strerror or exc}; {fix}") from exc
        os.replace(part, dest)
        return dest
    if len(unreachable) == len(urls):
        raise Unreachable(label, tuple(dict.fromkeys(u.host for u in unreachable)), unreachable[0].why)
    raise DownloadError(f"could not download {label}: " + "; ".join(reasons))


def _no_network(reason: object) -> bool:
    """A host name that does not resolve, or no route to any network: not a transient fault."""
    if isinstance(reason, socket.gaierror):
        return True
    return isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.ENETDOWN)


def _proxy_refusal(url: str, reason: object) -> str | None:
    """Why the proxy `url` goes through refused the connection, with the fix: retried 5 times per
    mirror, a proxy that is not running (a stale HTTPS_PROXY) took half a minute to say
    "connection refused" without naming the proxy. None when not refused or not proxied."""
    if not (isinstance(reason, OSError) and reason.errno == errno.ECONNREFUSED):
        return None
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy is None or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    variable = next((v for v in (f"{parts.scheme}_proxy", f"{parts.scheme.upper()}_PROXY") if os.environ.get(v)),
                    None)
    if variable is None:  # the system's settings (macOS, Windows)
        return f"the proxy {proxy} refused the connection; start it, or correct the system's proxy settings"
    return f"the proxy {proxy} ({variable}) refused the connection; start it, or correct or unset {variable}"


def _fetch_verified(url: str, part: Path, *, size: int | None, sha256: str | None, label: str,
                    progress: bool, policy: DownloadPolicy, unverified: bool) -> None:
    restarted = False
    while True:
        resumed = _fetch_with_retries(url, part, size=size, label=label, progress=progress, policy=policy)
        got_size = part.stat().st_size
        if size is not None and got_size != size:
            part.unlink(missing_ok=True)
            raise _NextUrl(f"got {got_size} bytes, expected {size}; the partial file was deleted")
        if sha256 is None:
            return
        got = sha256_file(part)
        if got == sha256.lower():
            return
        if resumed and not restarted:
            log.warning("%s: SHA-256 mismatch after resuming (the file changed on the server?); "
                        "downloading it again from the start", label)
            part.unlink(missing_ok=True)
            restarted = True
            continue
        if unverified:
            log.warning("warning: %s: SHA-256 %s differs from the catalog's %s; kept because of "
                        "--unverified-models", label, got, sha256)
            return
        part.unlink(missing_ok=True)
        raise _NextUrl(f"SHA-256 mismatch (expected {sha256}, got {got}); the downloaded file was deleted")


def _fetch_with_retries(url: str, part: Path, *, size: int | None, label: str, progress: bool,
                        policy: DownloadPolicy) -> bool:
    """True when the file was (partly) assembled from a resumed transfer."""
    delay = policy.backoff_s
    last = ""
    resumed = part.exists() and part.stat().st_size > 0
    for attempt in range(1, policy.attempts + 1):
        try:
            _fetch_once(url, part, size=size, label=label, progress=progress, policy=policy)
            return resumed
        except _Retry as exc:
            resumed = resumed or (part.exists() and part.stat().st_size > 0)
            last = str(exc)
            if attempt == policy.attempts:
                break
            log.info("%s: %s; retrying in %.1f s (attempt %d of %d)", label, last, delay, attempt + 1,
                     policy.attempts)
            time.sleep(delay)
            delay = min(delay * 2, policy.max_backoff_s)
    raise _NextUrl(f"gave up after {policy.attempts} attempts ({last})")


_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _fetch_once(url: str, part: Path, *, size: int | None, label: str, progress: bool,
                policy: DownloadPolicy) -> None:
    start = part.stat().st_size if part.exists() else 0
    if size is not None and start >= size:
        if start == size:
            return  # a complete part from an earlier run: the caller verifies it
        part.unlink()  # longer than the file can be: start again
        start = 0
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    if start:
        request.add_header("Range", f"bytes={start}-")
    try:
        response = urllib.request.urlopen(request, timeout=policy.timeout_s)  # noqa: S310 - https/http only
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start:  # our part does not fit the server's file: start again
            part.unlink(missing_ok=True)
            raise _Retry("server refused to resume; starting again") from exc
        if exc.code in (408, 429) or exc.code >= 500:
            raise _Retry(f"HTTP {exc.code}") from exc
        raise _NextUrl(f"HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        refused = _proxy_refusal(url, reason)
        if refused is not None:
            raise ProxyRefused(f"could not download {label}: {refused}") from exc
        if _no_network(reason):
            # Retrying cannot help a machine without a network (or DNS): next mirror at once,
            # instead of half a minute of back-off per address before the same error.
            why = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
            raise _Unreachable(_host(url), why) from exc
        raise _Retry(f"connection failed: {reason}") from exc

    with response:
        status = response.status
        if status == 206:
            match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if not match or int(match.group(1)) != start:
                part.unlink(missing_ok=True)
                raise _Retry("server resumed at the wrong offset; starting again")
            total = None if match.group(3) == "*" else int(match.group(3))
            mode: Literal["ab", "wb"] = "ab"
        elif status == 200:
            if start:
                log.info("%s: server ignored the resume request; starting again from zero", label)
            start = 0
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            mode = "wb"
        else:
            raise _NextUrl(f"unexpected HTTP status {status}")
        if size is not None and total is not None and total != size:
            part.unlink(missing_ok=True)
            raise _NextUrl(f"server offers {total} bytes, the catalog expects {size}")
        part.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(part, mode) as out:
                _copy(response, out, start=start, total=total or size, label=label, progress=progress)
                out.flush()
                os.fsync(out.fileno())
        except _NextUrl:  # not this file: nothing of it is worth resuming
            part.unlink(missing_ok=True)
            raise


def _copy(response: BinaryIO, out: BinaryIO, *, start: int, total: int | None, label: str,
          progress: bool) -> None:
    from tqdm import tqdm

    bar_shown = progress and is_terminal(sys.stderr)
    next_line = time.monotonic()  # elsewhere a line now and then (the first at once)
    # What has arrived, up to CHUNK: read(CHUNK) waits for a whole MiB, and a stall (timeout) or
    # Ctrl-C during that wait dropped what it had received, which the resume then fetched again.
    read = getattr(response, "read1", response.read)
    with tqdm(total=total, initial=start, unit="B", unit_scale=True, unit_divisor=1024, desc=label,
              disable=not bar_shown, file=sys.stderr, leave=False, dynamic_ncols=True) as bar:
        while True:
            try:
                block = read(CHUNK)
            except (OSError, ValueError, http.client.HTTPException) as exc:  # a cut mid-body; what arrived is kept for resume
                raise _Retry(f"connection lost at {out.tell()} bytes") from exc
            if not block:
                break
            if total is not None and out.tell() + len(block) > total:  # no length given: never past the size
                raise _NextUrl(f"the server sent more than the {total} bytes expected; the partial file was deleted")
            out.write(block)
            bar.update(len(block))
            if progress and not bar_shown and time.monotonic() >= next_line:
                next_line = time.monotonic() + LINE_INTERVAL_S
                got = out.tell() / 1e6
                log.info("%s: downloading, %s", label, f"{got:.1f} of {total / 1e6:.1f} MB ({100 * out.tell() / total:.0f}%)"
                         if total else f"{got:.1f} MB")
    if total is not None and out.tell() < total:
        raise _Retry(f"connection closed at {out.tell()} of {total} bytes")


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url

