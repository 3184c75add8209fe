"""The model store: find a model, download it when allowed, verify it once, check its kind.

Files live in one folder (`ModelStore.root`); the embedded defaults live in the package. A
verified file is remembered (size, mtime, digest) in `.verified.json` beside the models so that
startup does not re-hash hundreds of MB. Downloads of one file (or one archive) are serialised
across processes with a file lock: one process downloads, the others wait and use its result.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import shlex
import shutil
import sys
import threading
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Mapping

from livecam.atomic import AtomicOutput
from livecam.errors import DownloadError, InputError, LicenseNotAcceptedError, ModelError
from livecam.models import catalog as catalog_module
from livecam.models.catalog import ArchiveSpec, ModelSpec, TensorSpec, download_command, livecam_command, repair
from livecam.models.download import (DownloadPolicy, ProxyRefused, Unreachable, download, part_path,
                                     sha256_file)
from livecam.models.onnx_wire import framing_problem
from livecam.runtime.providers import import_onnxruntime
from livecam.settings import RuntimeSettings
from livecam.console import counted
from livecam.paths import blocked_folder, nearest_existing, why_missing

log = logging.getLogger("livecam")

MEMO_NAME = ".verified.json"
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # src/livecam

# States reported by `state()` / `verify()`.
VERIFIED, PRESENT, UNPINNED, MISSING, CORRUPT = "verified", "present", "unpinned", "missing", "corrupt"


def checkout_root() -> Path | None:
    """The source checkout livecam runs from, if any: pyproject.toml naming livecam above src/."""
    candidate = PACKAGE_DIR.parent.parent
    pyproject = candidate / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    return candidate if 'name = "livecam"' in text else None


def models_root(settings: RuntimeSettings) -> Path:
    """--models-dir, else models/ of the checkout, else the user data folder."""
    if settings.models_dir is not None:
        return Path(settings.models_dir).expanduser()
    checkout = checkout_root()
    if checkout is not None:
        return checkout / "models"
    from platformdirs import user_data_dir

    return Path(user_data_dir("livecam")) / "models"


def models_root_named(settings: RuntimeSettings) -> str:
    """The models folder and where it came from, for a message: a user who set LIVECAM_MODELS_DIR
    was told to "pass --models-dir", an option never typed."""
    where = "the default" if settings.models_dir is None else settings.models_dir_from
    return f"the models folder {models_root(settings)} ({where})"


def copy_into(spec: ModelSpec, folder: str | Path, models_dir: Path | None = None) -> str:
    """How to put a model that cannot be downloaded now into `folder` (given as `models_dir`:
    catalog.livecam_command): copy its file there, or convert the checkpoint it comes from (an
    enhancer's message said only "copy gfpgan_1.4.onnx", to a user holding GFPGANv1.4.pth)."""
    command = livecam_command(f"models convert {shlex.quote(spec.converted_from or '')}", models_dir)
    convert = f", or make it from {spec.converted_from} with `{command}`" if spec.converted_from else ""
    return f"copy {spec.file_name} into {folder}{convert}"


def other_models_root(settings: RuntimeSettings) -> str:
    """How to use another models folder, given where this one came from."""
    if settings.models_dir is None:
        return "pass --models-dir (or set LIVECAM_MODELS_DIR) to use another one"
    if settings.models_dir_from == "LIVECAM_MODELS_DIR":
        return "set LIVECAM_MODELS_DIR to another folder"
    return "give --models-dir another folder"


def tty_confirm(spec: ModelSpec) -> bool:
    """Ask on the terminal whether the user accepts a model's licence (never without a TTY)."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    import click

    return click.confirm(f"{spec.name} is licensed: {spec.licence} ({spec.licence_url}). Accept and download?",
                         default=False, err=True)


@dataclass(frozen=True)
class TensorInfo:
    """One input or output as ONNX Runtime reports it (a NodeArg's name, shape and type)."""

    name: str
    shape: list[Any] | None
    type: str


@dataclass(frozen=True)
class ModelDescription:
    """A model file's inputs and outputs as ONNX Runtime reports them (ModelStore.describe):
    stands in for a session wherever only those are read, holding no weights anywhere."""

    path: Path
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]

    def get_inputs(self) -> list[TensorInfo]:
        return list(self.inputs)

    def get_outputs(self) -> list[TensorInfo]:
        return list(self.outputs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.path.name}: a model description cannot run; open a session")


@dataclass(frozen=True)
class ModelState:
    name: str
    state: str  # verified | present | unpinned | missing | corrupt
    path: Path
    detail: str = ""


class ModelStore:
    """Resolves catalog names to verified files, downloading on first use when allowed."""

    def __init__(
        self,
        settings: RuntimeSettings,
        progress: bool = True,
        *,
        catalog: Mapping[str, ModelSpec] | None = None,
        bundled_dir: Path | None = None,
        policy: DownloadPolicy | None = None,
        confirm: Callable[[ModelSpec], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.progress = progress and not settings.quiet
        # Looked up at construction (not import) so tests can swap the module's catalog.
        self.catalog: Mapping[str, ModelSpec] = catalog if catalog is not None else catalog_module.CATALOG
        self.bundled_dir = bundled_dir if bundled_dir is not None else catalog_module.DEFAULT_DIR
        self.policy = policy or DownloadPolicy()
        self.confirm = confirm if confirm is not None else (tty_confirm if self.progress else None)
        self.root = models_root(settings)
        # describe()'s results per file: a run's K lanes read a model's inputs and outputs once
        self._descriptions: dict[Path, ModelDescription | None] = {}
        self._describing = threading.Lock()
        # files already warned about under --unverified-models: path() runs more than once per model
        # (an fp16 enhancer's checks, K lanes), and each said the same warning again
        self._warned: set[Path] = set()
        self._warning = threading.Lock()

    # ---- lookup -------------------------------------------------------------------------
    def spec(self, name: str) -> ModelSpec:
        spec = self.catalog.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, list(self.catalog), n=1, cutoff=0.6)
            guess = f"did you mean {close[0]}? " if close else ""  # `models download inswapper`
            raise InputError(f"unknown model {name!r}; {guess}known models: {', '.join(self.catalog)}")
        return spec

    def names(self) -> list[str]:
        return list(self.catalog)

    def file_path(self, name: str) -> Path:
        """Where the model's file is or would be."""
        spec = self.spec(name)
        return (self.bundled_dir if spec.bundled else self.root) / spec.file_name

    def is_present(self, name: str) -> bool:
        """A usable-looking file is here: what doctor and `models list` do not call missing or
        corrupt (a zeroed unpinned file counted as present, so auto chose it and failed later)."""
        path = self.file_path(name)
        if self.settings.unverified_models:  # "use it anyway": any file, whatever its size or bytes
            return path.is_file()
        return self._cheap_problem(self.spec(name), path) is None

    def can_provide(self, name: str) -> bool:
        """Present, or downloadable right now without asking anyone anything; not when a damaged
        file is in its place: path() does not replace a file the user has (nor does this), so
        online `auto` chose the model and the run failed where it falls back offline."""
        if self.is_present(name):
            return True
        if self.damage(name):
            return False
        spec = self.spec(name)
        return (spec.downloadable and not self.settings.offline
                and (not spec.needs_acceptance or self.settings.accept_license))

    def damage(self, name: str) -> str:
        """Why the file in the models folder for `name` cannot be used, by its size or an unpinned
        file's framing (a truncated, zeroed or wrong file): one clause naming the file and the repair; '' when there is no
        such file or its size is right."""
        spec = self.spec(name)
        state = self._cheap_problem(spec, self.file_path(name))
        if state is None or state.state == MISSING:
            return ""
        return (f"{state.path} is corrupt ({state.detail}); {self.fix_hint(spec, state.path)}"
                + ("" if spec.bundled else f" (`{self.command('models verify')}` checks every model)"))

    # ---- the main entry point ---------------------------------------------------------------
    def path(self, name: str) -> Path:
        """The verified file for `name`, downloaded first when it is missing and that is allowed."""
        spec = self.spec(name)
        dest = self.file_path(name)
        if spec.bundled:
            if not dest.is_file():
                raise ModelError(f"embedded model {spec.file_name} is missing from the livecam package "
                                 f"({dest.parent}); reinstall livecam")
            self._check_file(spec, dest, rehash=True)
            return dest
        if dest.is_file():
            self._check_file(spec, dest)
            return dest
        self._ensure_downloadable(spec)
        with self._download_lock(spec):
            if not dest.is_file():  # another process may have fetched it while we waited
                self._fetch(spec)
            if not dest.is_file():
                raise DownloadError(f"downloading {spec.name} did not produce {dest}")
            self._check_file(spec, dest)
        return dest

    def precision_path(self, name: str, precision: str = "fp32") -> Path:
        """path(), or for "fp16" its fp16 copy: converted once and checked against it (models/fp16.py)."""
        path = self.path(name)
        if precision != "fp16":
            return path
        from livecam.models.fp16 import converted

        return converted(self, name, path)

    def digest(self, path: Path) -> str:
        """The SHA-256 of a file in the models folder, from the verification memo when it is current."""
        got = self._memo_lookup(path)
        if got is None:
            got = sha256_file(path)
            self._memo_record(path, got)
        return got

    def open_session(self, name: str, providers: Any, intra_op_threads: int = 0, front: Any = None,
                     precision: str = "fp32") -> Any:
        """path() + the shared session + the signature check, all before any frame is processed.

        `front` (runtime/graphs.Front): a second session of the checked file with that Front's
        graphs joined around it, or None when the join fails (the caller keeps the plain path; said at
        debug level). `precision` "fp16": the file's checked fp16 copy (precision_path)."""
        from livecam.runtime.sessions import get_session, provider_hint

        path = self.precision_path(name, precision)
        tuned = providers.tuned(self._tuning(name, providers, precision))
        try:
            session = get_session(path, tuned, intra_op_threads)
        except ModelError as exc:
            cause = exc.__cause__
            reason = str(cause).splitlines()[0][:160] if cause is not None and str(cause) else "unreadable"
            # Off the CPU the provider may be what cannot load it: both facts, in one line.
            on, maybe = ("", "") if tuned.primary == "cpu" else (f" on {tuned.primary}",
                                                                  f"{provider_hint(tuned.primary)}; otherwise ")
            raise ModelError(f"model file {path} cannot be loaded as {name}{on} ({reason}); "
                             f"{maybe}{self.fix_hint(self.spec(name), precision=precision)}") from exc
        self.check_signature(name, session, path, precision)
        if front is None:
            return session
        return self._open_front(name, providers, intra_op_threads, front, session, precision)

    def open_joined(self, name: str, providers: Any, intra_op_threads: int,
                    front: Callable[[Any], Any] | None, precision: str = "fp32") -> tuple[Any, Any]:
        """(model, joined) for a processor that runs the model with a Front joined around it
        where it can (a GPU lane: runtime/lanes.uses_device_fronts). `front` builds that
        runtime/graphs.Front from the model's inputs and outputs; None: (the plain session, None).

        With a front, `model` is the file's description (describe(): inputs, outputs, the
        signature checked), so that the weights sit on the device once, in the joined session;
        only where the join fails (said at debug level), or the CPU cannot read the description,
        is the plain session opened, and with a failed join returned with None."""
        if front is None:
            return self.open_session(name, providers, intra_op_threads, precision=precision), None
        model = self.describe(name, precision)
        if model is None:
            model = self.open_session(name, providers, intra_op_threads, precision=precision)
        joined = self._open_front(name, providers, intra_op_threads, front(model), model, precision)
        if joined is None and isinstance(model, ModelDescription):
            model = self.open_session(name, providers, intra_op_threads, precision=precision)
        return model, joined

    def describe(self, name: str, precision: str = "fp32") -> ModelDescription | None:
        """The inputs and outputs of `name`'s checked file (precision_path) as ONNX Runtime
        reports them, its signature checked: read once per file from a CPU session, unoptimised,
        that is dropped at once. None when the CPU cannot load the file (an fp16 kernel it lacks):
        the caller opens the session it needs instead."""
        path = self.precision_path(name, precision)
        with self._describing:
            if path not in self._descriptions:
                self._descriptions[path] = _description(path)
            described = self._descriptions[path]
        if described is not None:
            self.check_signature(name, described, path, precision)
        return described

    def _tuning(self, name: str, providers: Any, precision: str, inputs: Any = None, frames: tuple[str, ...] = (),
                values: Any = ()) -> Any:
        """model_tuning for `name`'s sessions: on the catalog's inputs, or on `inputs` (a joined
        model's, with its `frames` and shape `values`: providers.profile_for)."""
        from livecam.runtime.providers import model_tuning

        # fp16 weights: the enhancers' checked copies, or a catalog file published in fp16
        nhwc = self.settings.nhwc_fp16 and (precision == "fp16" or name.endswith("_fp16"))
        shapes = inputs if inputs is not None else [(t.name, t.shape) for t in self.spec(name).inputs]
        return model_tuning(shapes, providers, cuda_graphs=self.settings.cuda_graphs, frames=frames, nhwc=nhwc,
                            values=values)

    def _open_front(self, name: str, providers: Any, intra_op_threads: int, front: Any, model: Any,
                    precision: str) -> Any:
        """The checked file with `front`'s graphs joined around it, or None when the join fails."""
        from livecam.runtime.graphs import PRE, joined_inputs
        from livecam.runtime.sessions import get_session

        try:
            # Tuned on the joined model's own inputs: the plain tuning's TensorRT profile names
            # the model input the join hides, and its CUDA graph rule must see the front's dims.
            # The model's other inputs as ONNX Runtime reads them from the file (the catalog
            # leaves GFPGAN's input unnamed and lists a dynamic-batch export's batch as 1).
            joined = joined_inputs(front, [(i.name, _dims(i.shape)) for i in model.get_inputs()])
            frames = (PRE + front.frame_input,) if front.frame_input else ()
            values = tuple((PRE + value_input, ranges) for value_input, ranges in front.shape_values)
            tuning = self._tuning(name, providers, precision, joined, frames, values)
            return get_session(self.precision_path(name, precision), providers.tuned(tuning), intra_op_threads, front)
        except Exception as exc:  # noqa: BLE001 - the plain session does the same work
            log.debug("%s with %s in front: %s; the numpy path is used", name, front.name, exc)
            return None

    # ---- checks -----------------------------------------------------------------------------
    def check_signature(self, name: str, session: Any, path: Path | None = None, precision: str = "fp32") -> None:
        """ModelError when the session's inputs/outputs are not those the catalog describes.
        `path`, `precision`: the file the session is of (by default the model's own), for the message."""
        spec = self.spec(name)
        problem = signature_problem(spec, session.get_inputs(), session.get_outputs())
        if problem:
            raise ModelError(f"{path or self.file_path(name)} does not look like model {name} ({problem}); "
                             f"{self.fix_hint(spec, precision=precision)}")

    def state(self, name: str) -> ModelState:
        """Cheap state for listings: uses the verification memo, hashes only small embedded files."""
        spec = self.spec(name)
        path = self.file_path(name)
        early = self._cheap_problem(spec, path)
        if early is not None:
            return early
        if spec.sha256 is None:
            return ModelState(name, UNPINNED, path, spec.pin_note or "no published SHA-256")
        if spec.bundled:
            got = sha256_file(path)
            ok = got == spec.sha256
            return ModelState(name, VERIFIED if ok else CORRUPT, path, "" if ok else "SHA-256 mismatch")
        memo = self._memo_lookup(path)
        if memo is None:
            return ModelState(name, PRESENT, path, "not verified yet")
        ok = memo == spec.sha256
        return ModelState(name, VERIFIED if ok else CORRUPT, path, "" if ok else "SHA-256 mismatch")

    @classmethod
    def _cheap_problem(cls, spec: ModelSpec, path: Path, hint: str = "") -> ModelState | None:
        """MISSING or CORRUPT without hashing or loading anything: by size, and a file with no
        digest to compare by its framing too (a cut or zeroed file; a memory-mapped walk,
        milliseconds). None when neither finds a fault."""
        early = cls._absent_or_wrong_size(spec, path, hint)
        if early is not None or spec.sha256 is not None:
            return early
        problem = framing_problem(path)
        return ModelState(spec.name, CORRUPT, path, problem) if problem else None

    @staticmethod
    def _absent_or_wrong_size(spec: ModelSpec, path: Path, hint: str = "") -> ModelState | None:
        """MISSING or CORRUPT (by size) without hashing anything; None when the size is right."""
        if path.is_dir():  # the repair (fix_hint: move it away) is added where it is shown
            return ModelState(spec.name, CORRUPT, path, "a folder, not the model file")
        if path.exists() and not path.is_file():  # a FIFO, a socket, a device: it was "missing"
            return ModelState(spec.name, CORRUPT, path, "not a regular file")
        if not path.is_file():
            return ModelState(spec.name, MISSING, path)
        size = path.stat().st_size
        if spec.size is not None and size != spec.size:
            return ModelState(spec.name, CORRUPT, path, f"{size} bytes, expected {spec.size}{hint}")
        return None

    def verify(self, name: str) -> ModelState:
        """Full re-hash (ignores the memo); unpinned files get their signature checked instead."""
        spec = self.spec(name)
        path = self.file_path(name)
        early = self._cheap_problem(spec, path, ", truncated or not this model")
        if early is not None:  # state()'s words for what it sees too, before loading anything
            fixed = replace(early, detail=f"{early.detail}; {self.fix_hint(spec, path)}")
            return early if early.state == MISSING else fixed
        if spec.sha256 is None:
            problem = self._load_problem(spec, path)
            if problem:
                return ModelState(name, CORRUPT, path, f"{problem}; {self.fix_hint(spec)}")
            return ModelState(name, UNPINNED, path, spec.pin_note or "no published SHA-256; signature checked")
        got = sha256_file(path)
        if not spec.bundled:
            self._memo_record(path, got)
        if got != spec.sha256:
            return ModelState(name, CORRUPT, path, f"SHA-256 {got[:12]}... differs from the catalog's "
                                                   f"{spec.sha256[:12]}...; {self.fix_hint(spec)}")
        return ModelState(name, VERIFIED, path)

    def load_problem(self, name: str, path: Path) -> str:
        """'' when `path` loads on the CPU and has the tensors of catalog model `name`."""
        return self._load_problem(self.spec(name), path)

    def _load_problem(self, spec: ModelSpec, path: Path) -> str:
        """Open the file on the CPU and compare its tensors with the catalog (unpinned files)."""
        try:
            session = _cpu_session(path)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own types for bad files
            first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            return f"not a loadable ONNX model: {first}"
        return signature_problem(spec, session.get_inputs(), session.get_outputs())

    def _check_file(self, spec: ModelSpec, path: Path, rehash: bool = False) -> None:
        """Size and SHA-256 of a present file (memo first); ModelError, or a warning when unverified."""
        size = path.stat().st_size
        problem = ""
        if spec.size is not None and size != spec.size:
            problem = f"it has {size} bytes, expected {spec.size} (truncated or not this model)"
        elif spec.sha256 is not None:
            got = None if rehash else self._memo_lookup(path)
            if got is None:
                got = sha256_file(path)
                if not spec.bundled:
                    self._memo_record(path, got)
            if got != spec.sha256:
                problem = f"its SHA-256 {got[:12]}... differs from the catalog's {spec.sha256[:12]}..."
        if not problem:
            return
        if self.settings.unverified_models:
            with self._warning:
                first = path not in self._warned
                self._warned.add(path)
            if first:
                log.warning("warning: %s: %s; used anyway because of --unverified-models", path, problem)
            return
        raise ModelError(f"model file {path} is invalid: {problem}; {self.fix_hint(spec)}")

    def fix_hint(self, spec: ModelSpec, path: Path | None = None, precision: str = "fp32") -> str:
        """catalog.repair for model `spec` (a folder at `path`: moved away first; precision
        "fp16": its fp16 copy, converted again)."""
        return repair(spec.name, catalog={spec.name: spec}, folder=path is not None and path.is_dir(),
                      precision=precision, models_dir=self.settings.typed_models_dir)

    def command(self, words: str) -> str:
        """`livecam WORDS` on this models folder (catalog.livecam_command)."""
        return livecam_command(words, self.settings.typed_models_dir)

    def download_command(self, *names: str, every: bool = False) -> str:
        """catalog.download_command of these models into this models folder."""
        return download_command(*names, catalog=self.catalog, every=every, models_dir=self.settings.typed_models_dir)

    # ---- downloading ------------------------------------------------------------------------
    def _ensure_downloadable(self, spec: ModelSpec) -> None:
        where = self.root / spec.file_name
        if where.is_dir():  # the download would fail on the rename, after fetching it all
            raise ModelError(f"{where} is a folder, where model {spec.name}'s file goes; "
                             f"{self.fix_hint(spec, where)}")
        if where.exists() and not where.is_file():  # a FIFO: "is missing" while `ls` shows it
            raise ModelError(f"{where} is not a regular file, where model {spec.name}'s file goes; "
                             f"{self.fix_hint(spec, where)}")
        if not spec.downloadable:
            raise ModelError(f"model {spec.name} is missing ({where}) and cannot be downloaded; "
                             f"{copy_into(spec, self.root, self.settings.typed_models_dir)}")
        if self.settings.offline:
            raise ModelError(f"model {spec.name} is missing ({where}) and offline mode forbids downloading it; "
                             f"run `{self.download_command(spec.name)}` while online, "
                             f"or {copy_into(spec, self.root, self.settings.typed_models_dir)}")
        if spec.needs_acceptance and not self.settings.accept_license:
            if self.confirm is None or not self.confirm(spec):
                raise LicenseNotAcceptedError(
                    f"model {spec.name} is licensed \"{spec.licence}\" ({spec.licence_url}); to accept it "
                    # livecam's own option: after the command it was "No such option"
                    f"and download, rerun with --accept-license before the command (`livecam --accept-license "
                    f"COMMAND ...`) or run `{self.download_command(spec.name)}`")

    def _download_lock(self, spec: ModelSpec) -> Any:
        from filelock import FileLock, Timeout

        unit = spec.archive.file_name if spec.archive else spec.file_name
        if self.root.is_symlink() and not self.root.exists():  # mkdir said "File exists"
            raise ModelError(f"{models_root_named(self.settings)} {why_missing(self.root)}")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = blocked_folder(self.root) or exc.strerror
            raise ModelError(f"cannot create {models_root_named(self.settings)}: {reason}; "
                             f"{other_models_root(self.settings)}") from exc
        path = self.root / f".{unit}.lock"
        try:  # the lock is the first file written there: an unwritable folder shows here
            if _TidyLock.usable():
                tidy = _TidyLock(path)
                if not tidy.acquire(blocking=False):
                    log.info("waiting for another livecam process that is downloading %s", unit)
                    tidy.acquire()
                return tidy
            lock = FileLock(str(path))  # Windows: filelock removes its file on release there
            try:
                lock.acquire(timeout=0.2)
            except Timeout:
                log.info("waiting for another livecam process that is downloading %s", unit)
                lock.acquire()
            return _Held(lock)
        except OSError as exc:
            raise ModelError(f"cannot write in {models_root_named(self.settings)}: {exc.strerror or exc}; make "
                             f"it writable, or {other_models_root(self.settings)}") from exc

    def _fetch(self, spec: ModelSpec) -> None:
        self._check_free_space(spec)
        errors: list[DownloadError] = []
        if spec.archive is not None:
            try:
                self._fetch_archive(spec.archive)
                return
            except ProxyRefused:  # the direct mirrors are behind the same proxy
                raise
            except DownloadError as exc:
                errors.append(exc)
        if spec.urls:
            dest = self.root / spec.file_name
            try:
                download(spec.urls, dest, size=spec.size, sha256=spec.sha256, label=spec.file_name,
                         progress=self.progress, policy=self.policy, unverified=self.settings.unverified_models,
                         folder=models_root_named(self.settings), elsewhere=other_models_root(self.settings))
            except DownloadError as exc:
                errors.append(exc)
            else:
                if spec.sha256 is not None:
                    self._memo_record(dest, sha256_file(dest))
                return
        failure = self._fetch_failed(spec, errors)
        if failure is errors[-1]:
            raise failure
        raise failure from errors[-1]

    def _fetch_failed(self, spec: ModelSpec, errors: list[DownloadError]) -> DownloadError:
        """One error for every source of `spec` that failed; without a network, once, with the fix
        (it said "is this machine offline?" once per source, and nothing to do about it)."""
        offline = [exc for exc in errors if isinstance(exc, Unreachable)]
        if len(offline) == len(errors):
            hosts = " or ".join(dict.fromkeys(host for exc in offline for host in exc.hosts))
            return DownloadError(f"could not download {spec.file_name}: cannot reach {hosts} ({offline[0].why}); "
                                 f"connect this machine to the network (or set HTTPS_PROXY to your proxy), or "
                                 f"{copy_into(spec, models_root_named(self.settings), self.settings.typed_models_dir)}")
        if len(errors) == 1:
            return errors[0]
        return DownloadError("; ".join(exc.message for exc in errors))

    def _check_free_space(self, spec: ModelSpec) -> None:
        """Refuse early, rather than fill the disk and fail at 90 %. What partial files (download.
        part_path) already hold is not needed again: a resume after freeing some space was refused
        for want of room for the whole file."""
        units = [(spec.file_name, spec.size or 0)] + ([(spec.archive.file_name, spec.archive.size)]
                                                      if spec.archive else [])
        need = sum(max(0, size - _size_of(part_path(self.root / file_name))) for file_name, size in units)
        free = free_bytes(self.root)
        if free is not None and need and free < need:
            raise DownloadError(f"not enough free disk space for {spec.name} in {models_root_named(self.settings)}: "
                                f"{need / 1e6:.0f} MB needed, {free / 1e6:.0f} MB free; free some space, "
                                f"or {other_models_root(self.settings)}")

    def _fetch_archive(self, archive: ArchiveSpec) -> None:
        """Download the zip, take only the catalogued members still missing, delete the zip."""
        zip_path = self.root / archive.file_name
        if zip_path.is_file():  # left by a run killed while extracting, or copied in: download() checks it as a part
            os.replace(zip_path, part_path(zip_path))
        download(archive.urls, zip_path, size=archive.size, sha256=archive.sha256, label=archive.file_name,
                 progress=self.progress, policy=self.policy, unverified=self.settings.unverified_models,
                 folder=models_root_named(self.settings), elsewhere=other_models_root(self.settings))
        members = {spec.file_name: spec for spec in self.catalog.values()
                   if spec.archive == archive and spec.file_name in archive.members}
        try:
            extract_members(zip_path, self.root, members, self._memo_record)
        finally:
            zip_path.unlink(missing_ok=True)

    # ---- the verification memo --------------------------------------------------------------
    def _memo_lookup(self, path: Path) -> str | None:
        entry = _read_memo(self.root).get(path.name)
        if not isinstance(entry, dict):
            return None
        st = path.stat()
        if entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
            digest = entry.get("sha256")
            return digest if isinstance(digest, str) else None
        return None

    def _memo_record(self, path: Path, digest: str) -> None:
        from filelock import FileLock

        lock_path = self.root / (MEMO_NAME + ".lock")
        try:
            with _TidyLock(lock_path) if _TidyLock.usable() else FileLock(str(lock_path), timeout=30):
                memo = _read_memo(self.root)
                st = path.stat()
                memo[path.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
                # the lock is held: replacing the memo read above is intended
                with AtomicOutput(self.root / MEMO_NAME, cache=True) as out:
                    out.write_bytes(json.dumps(memo, indent=1, sort_keys=True).encode("utf-8"))
        except Exception as exc:  # noqa: BLE001 - the memo is an optimisation only
            log.debug("could not record verification of %s: %s", path, exc)


class _TidyLock:
    """An exclusive lock on a file that is not left behind (filelock keeps a zero-byte .lock
    on POSIX, seen after every download, failed or not): the holder deletes the file before it
    unlocks, and a waiter that then holds a lock on a deleted file opens the path again, so two
    holders never overlap."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @staticmethod
    def usable() -> bool:
        """POSIX (fcntl's flock); elsewhere filelock, which removes its file itself."""
        import importlib.util

        return importlib.util.find_spec("fcntl") is not None

    def acquire(self, blocking: bool = True) -> bool:
        import fcntl

        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                return False
            except BaseException:
                os.close(fd)
                raise
            try:
                current = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                current = False
            if current:
                self._fd = fd
                return True
            os.close(fd)  # the previous holder removed it: lock the path anew

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self._fd)  # closing the descriptor releases the lock
        self._fd = None

    def __enter__(self) -> None:
        if self._fd is None:
            self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Held:
    """Context manager around an already acquired FileLock."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _read_memo(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / MEMO_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def extract_members(zip_path: Path, root: Path, members: Mapping[str, ModelSpec],
                    record: Callable[[Path, str], None] | None = None) -> list[Path]:
    """Extract the named members (matched by base name) into root, each checked by its spec.

    Output paths are always root/<catalog file name>, never taken from the archive; a matching
    member whose path is absolute or climbs out ('..') is refused all the same.
    """
    written: list[Path] = []
    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DownloadError(f"{zip_path.name} is not a readable zip archive ({exc}); "
                            f"it was deleted, run the download again") from exc
    with zf:
        found: dict[str, zipfile.ZipInfo] = {}
        for info in zf.infolist():
            raw = info.filename.replace("\\", "/")
            member = PurePosixPath(raw)
            if member.name not in members or info.is_dir():
                continue
            if member.is_absolute() or ".." in member.parts or ":" in raw:
                raise DownloadError(f"{zip_path.name}: refusing member {info.filename!r} "
                                    f"(its path leaves the models folder)")
            found.setdefault(member.name, info)
        for file_name, spec in members.items():
            dest = root / file_name
            if dest.is_file():
                continue
            entry = found.get(file_name)
            if entry is None:
                raise DownloadError(f"{zip_path.name} does not contain {file_name}")
            if spec.size is not None and entry.file_size != spec.size:
                raise DownloadError(f"{zip_path.name}: {file_name} has {entry.file_size} bytes, "
                                    f"expected {spec.size}")
            limit = spec.size if spec.size is not None else entry.file_size
            with AtomicOutput(dest) as atomic:
                with zf.open(entry) as src, open(atomic.temp, "wb") as out:
                    copied = _copy_limited(src, out, limit)
                    out.flush()
                    os.fsync(out.fileno())
                digest = sha256_file(atomic.temp)
                if copied != limit or (spec.sha256 is not None and digest != spec.sha256):
                    raise DownloadError(f"{zip_path.name}: {file_name} failed its size/SHA-256 check; "
                                        f"nothing was kept")
            if record is not None and spec.sha256 is not None:
                record(dest, digest)
            written.append(dest)
    return written


def _copy_limited(src: Any, out: Any, limit: int) -> int:
    """Copy at most limit + 1 bytes (so an overlong member is noticed, never written in full)."""
    copied = 0
    while copied <= limit:
        block = src.read(min(1 << 20, limit + 1 - copied))
        if not block:
            break
        out.write(block)
        copied += len(block)
    return copied


def signature_problem(spec: ModelSpec, inputs: list[Any], outputs: list[Any]) -> str:
    """'' when the ORT inputs/outputs fit the spec, else what differs, in a few words."""
    if len(inputs) != len(spec.inputs):
        return (f"expected {counted(len(spec.inputs), 'input')} ({'; '.join(t.describe() for t in spec.inputs)}), "
                f"found {len(inputs)} ({'; '.join(_describe_arg(a) for a in inputs)})")
    for i, want in enumerate(spec.inputs):
        arg = _by_name(inputs, want.name) if want.name else inputs[i]
        if arg is None or not _fits(want, arg):
            return f"expected input {want.describe()}, found {'; '.join(_describe_arg(a) for a in inputs)}"
    if len(outputs) != len(spec.outputs) and not (spec.extra_outputs and len(outputs) > len(spec.outputs)):
        return f"expected {counted(len(spec.outputs), 'output')}, found {len(outputs)}"
    unused = list(outputs)
    for want in spec.outputs:
        match = next((a for a in unused if (want.name is None or a.name == want.name) and _fits(want, a)), None)
        if match is None:
            return f"no output like {want.describe()} (found {'; '.join(_describe_arg(a) for a in outputs)})"
        unused.remove(match)
    return ""


def _by_name(args: list[Any], name: str) -> Any:
    return next((a for a in args if a.name == name), None)


def _fits(want: TensorSpec, arg: Any) -> bool:
    if arg.type not in want.dtypes:
        return False
    if want.shape is None:
        return True
    shape = list(arg.shape or [])
    if len(shape) != len(want.shape):
        return False
    # A dynamic dimension in the file (a string or None) fits any expected size.
    return all(w is None or not isinstance(a, int) or a == w for w, a in zip(want.shape, shape))


def _describe_arg(arg: Any) -> str:
    shape = "[" + ",".join(str(d) if isinstance(d, int) else "?" for d in (arg.shape or [])) + "]"
    return f"{arg.name} {shape} {str(arg.type).removeprefix('tensor(').removesuffix(')')}"


def _size_of(path: Path) -> int:
    """A file's size; 0 when there is none (or it cannot be read)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def free_bytes(path: Path) -> int | None:
    """Free disk space where `path` is (or would be created)."""
    try:
        return shutil.disk_usage(nearest_existing(path)).free
    except OSError:
        return None


def _cpu_session(path: Path) -> Any:
    """An unoptimised CPU session of `path`, for reading its inputs and outputs (never run)."""
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def _description(path: Path) -> ModelDescription | None:
    """ModelStore.describe's reading of one file; None when the CPU cannot load it."""
    try:
        session = _cpu_session(path)
    except Exception as exc:  # noqa: BLE001 - ORT raises its own types; the caller opens a session instead
        log.debug("%s cannot be described on the CPU: %s", path.name, str(exc).splitlines()[0][:200] if str(exc) else exc)
        return None

    def infos(args: Any) -> tuple[TensorInfo, ...]:
        return tuple(TensorInfo(a.name, None if a.shape is None else list(a.shape), a.type) for a in args)

    return ModelDescription(path, infos(session.get_inputs()), infos(session.get_outputs()))


def _dims(shape: Any) -> tuple[int | None, ...] | None:
    """An ONNX Runtime input shape (numbers, names of symbolic dims, None) as the catalog writes
    shapes: a number where the dim is fixed, else None; None when the rank is unknown."""
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) and d > 0 else None for d in shape)
