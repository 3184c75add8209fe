"""`livecam video --cluster`: the segments of many videos on a Ray cluster. The only module that
imports Ray (lazily: livecam runs without it).

    driver: plan every job (pipeline.segments.plan_job: one demux pass each, no decoding)
        -> one queue of all segments, largest files first
        -> a pool of `Worker` actors, one segment each at a time, results kept in segment order
        -> each file joined (pipeline.segments.write_joined) as soon as all its parts are back
        -> one pipeline.batch.FileOutcome per job, in the jobs' order
    worker (a Ray actor; num_gpus=1 on GPU clusters): says its livecam, Ray and Python versions
        (the driver refuses a mismatch), builds the engine once per processing settings, runs
        pipeline.segments.run_segment on the input path where its node reads the same file there
        (shared storage, or an equal copy: size and mtime as on the driver), else on a chunk.

Shipping the input (ClusterSettings.ship_input): `auto` sends the path; a worker whose node does
not read that file answers ChunkWanted, and from then on the driver cuts each of that file's
segments for that worker into a chunk (pipeline.segments.cut_segment: the segment's packets
stream-copied, no decoding, with their exact timestamps) sent as bytes through Ray's object
store. `chunks` always sends chunks; `path` never (such a worker fails the file). The face
photos always travel (ShippedPhotos: their bytes, read once here; a worker never opens the
driver's photo paths).

Failures: a worker process that dies is restarted by Ray and its segment retried
(max_restarts, max_task_retries); an error of livecam's own (a corrupt segment, a refused model)
comes back as a value, is not retried, and fails only its file, naming file and segment.
A worker's warnings come back with its result and the driver says each distinct one once
(a segment's once per file, named by the file in a folder run).
Ctrl-C kills the workers and writes nothing (with --keep-partial, each file's leading finished
segments). Progress: workers set their segment's count of frames written on a small board
actor; the driver sums the board, so a retried segment is not counted twice.
Addresses: `local` starts Ray in this process (RAY_ADDRESS ignored), `auto` joins RAY_ADDRESS
or the cluster running on this machine, `ray://HOST:PORT` a remote one (Ray Client), HOST:PORT
a cluster's GCS directly. RAY_ADDRESS is read only for `auto`, so a stray variable never sends
a private video elsewhere.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import socket
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from livecam import __version__
from livecam.errors import InputError, Interrupted, LivecamError
from livecam.native_stderr import dropping
from livecam.media.chunks import Chunk
from livecam.pipeline.batch import FileOutcome, as_error, naming
from livecam.pipeline.contracts import FileEngine
from livecam.pipeline.file import say_unchanged
from livecam.pipeline.progress import Progress
from livecam.pipeline.signals import kept_stop_handlers
from livecam.pipeline.segments import (SegmentPlan, SegmentResult, cut_segment, joined_stats, plan_job,
                                       readable_here, run_segment, write_joined)
from livecam.settings import ClusterSettings, ProcessingSettings, VideoJob
from livecam.console import agree, counted

log = logging.getLogger("livecam")

MAX_RESTARTS = 3  # a worker process that dies (OOM killer, lost node) comes back this often
MAX_TASK_RETRIES = 3  # ... and its segment is run again
START_TIMEOUT_S = 600  # for all workers to start (a node pulling models or a GPU being freed)
REPORT_EVERY_S = 0.5  # how often a worker sets its progress count, and the driver reads them
INSTALL_HINT = "pip install 'livecam[ray]' (on every node: 'livecam[cuda,ray]')"
# a line of Ray's C++ logging: "[2026-12-01 19:35:16,253 E 8340 8506] task_manager.cc:1545: ..."
_RAY_CORE_LINE = re.compile(rb"^\[\d{4}-\d\d-\d\d [\d:,]+ [A-Z] \d+ \d+\] \S+:\d+: .*\n?", re.MULTILINE)

EngineFactory = Callable[[VideoJob], FileEngine]


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise InputError(f"--cluster needs Ray, which is not installed: {INSTALL_HINT}") from exc
    return ray


def versions() -> dict[str, str]:
    """What must be equal on the driver and every worker."""
    import ray

    return {"livecam": __version__, "ray": ray.__version__, "python": platform.python_version().rsplit(".", 1)[0]}


def build_engine(job: VideoJob) -> FileEngine:
    """The real engine, as `livecam video` builds it (models load here, once per worker)."""
    from livecam.pipeline.engine import Engine

    return Engine.create(job.processing, live=False, progress=False)


def _photos_swapped(settings: ProcessingSettings, copies: Mapping[Path, Path]) -> ProcessingSettings:
    """settings with each photo in `copies` replaced by its copy (the others as they are)."""
    def swap(path: Path) -> Path:
        return copies.get(Path(path), path)

    analysis = replace(settings.analysis, reference=tuple(map(swap, settings.analysis.reference)),
                       face_map=tuple((swap(s), swap(r)) for s, r in settings.analysis.face_map))
    return replace(settings, sources=tuple(map(swap, settings.sources)), analysis=analysis)


@dataclass(frozen=True)
class ShippedPhotos:
    """The jobs' face photos, read once on the driver before any segment is sent: a worker's
    node may not hold them at the driver's paths (or hold other files there, another face)."""

    photos: tuple[tuple[Path, bytes], ...] = ()  # (the path as the user gave it, its bytes)

    @classmethod
    def read(cls, jobs: Sequence[VideoJob]) -> "ShippedPhotos":
        """Every photo file of the jobs, once each. One that is not a readable file stays a
        path: the worker's engine then refuses it as Engine.create here would."""
        photos = []
        for path in dict.fromkeys(p for job in jobs for _, p in job.processing.named_photos()):
            try:
                photos.append((path, path.read_bytes()))
            except OSError:
                continue
        return cls(tuple(photos))

    @contextmanager
    def placed(self, job: VideoJob) -> Iterator[tuple[VideoJob, Callable[[str], str]]]:
        """job with its photos' paths swapped for copies in a private temporary folder (removed
        afterwards: the engine reads them only as it is built), and a function that gives a
        message back the user's paths in place of the copies'."""
        with tempfile.TemporaryDirectory(prefix="livecam-photos-") as folder:
            copies: dict[Path, Path] = {}
            for number, (path, data) in enumerate(self.photos):
                copy = Path(folder) / str(number) / path.name  # the name kept: its suffix, messages naming it
                copy.parent.mkdir()
                copy.write_bytes(data)
                copies[path] = copy

            def restore(message: str) -> str:
                for path, copy in copies.items():
                    message = message.replace(str(copy), str(path))
                return message

            yield replace(job, processing=_photos_swapped(job.processing, copies)), restore


@dataclass(frozen=True)
class SegmentFailure:
    """A segment that failed with livecam's own error: not retried; fails its file."""

    message: str
    exit_code: int


@dataclass(frozen=True)
class ChunkWanted:
    """A worker's answer when its node does not read the input at the driver's path."""

    node: str


def version_mismatch(want: dict[str, str], described: dict[str, str]) -> str | None:
    """The one-line refusal when a worker's versions (`described`, with its node) differ from
    the driver's (`want`); None when they are equal."""
    diff = ", ".join(f"{k} {described.get(k)} (here {want[k]})" for k in want if described.get(k) != want[k])
    if not diff:
        return None
    return f"the cluster's node {described.get('node', '?')} runs {diff}; install the same versions on every " \
           f"node ({INSTALL_HINT})"


@dataclass(frozen=True)
class _Task:
    file: int  # index into the driver's jobs
    plan: SegmentPlan
    number: int  # segment number


class Board:
    """Frames written per (file, segment), set by workers (a Ray actor on the driver's node)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, int], int] = {}

    def set(self, key: tuple[int, int], count: int) -> None:
        self._counts[key] = count

    def total(self) -> int:
        return sum(self._counts.values())


class _Said(logging.Handler):
    """The warnings livecam logs in this process while a task runs, as lines: the engine's as it
    is built (of no one file) apart from the segment's (a worker runs one task at a time: every
    thread's are its task's)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.engine: list[str] = []
        self.segment: list[str] = []
        self.building = False

    def emit(self, record: logging.LogRecord) -> None:
        (self.engine if self.building else self.segment).append(record.getMessage())


class Worker:
    """One segment at a time with an engine built once (per processing settings)."""

    def __init__(self, factory: EngineFactory, board: str, photos: ShippedPhotos) -> None:
        import ray

        self._factory = factory
        self._photos = photos
        # found by name: an actor handle among the arguments would keep them in the object
        # store, which Ray warns about (on the terminal) for actors it restarts
        self._board = ray.get_actor(board)
        self._engine: FileEngine | None = None
        self._key: Any = None
        self._marker: Any = None

    def describe(self) -> dict[str, str]:
        return {**versions(), "node": platform.node(), "pid": str(os.getpid())}

    def run(self, task: _Task, chunk: Chunk | None = None, may_ask: bool = True,
            ) -> tuple[SegmentResult | SegmentFailure | ChunkWanted, tuple[str, ...], tuple[str, ...],
                       tuple[str, ...]]:
        """The segment from `chunk`, or else from the input path; a node that does not read the
        driver's file there answers ChunkWanted (may_ask) or fails the segment. With it, the
        engine's model names and the warnings logged here meanwhile, the engine's and the
        segment's (a worker's log is not shown: the driver says them, each once)."""
        said = _Said()
        log.addHandler(said)
        try:
            result, names = self._run(task, chunk, may_ask, said)
        finally:
            log.removeHandler(said)
        return result, names, tuple(said.engine), tuple(said.segment)

    def _run(self, task: _Task, chunk: Chunk | None, may_ask: bool, said: _Said,
             ) -> tuple[SegmentResult | SegmentFailure | ChunkWanted, tuple[str, ...]]:
        plan, segment = task.plan, task.plan.segments[task.number]
        name = plan.name(segment)
        if chunk is None and not readable_here(plan):  # the driver's file is not on this node
            if may_ask:
                return ChunkWanted(node=platform.node()), ()
            return SegmentFailure(f"{name}: node {platform.node()} cannot read {plan.job.input} (or has another "
                                  "file there); put the input on storage every node mounts at the same path, "
                                  "or use --ship-input auto", 2), ()
        try:
            engine = self._engine_for(plan.job, said)
            last = [0.0]

            def report(done: int) -> None:
                now = time.monotonic()
                if now - last[0] >= REPORT_EVERY_S:
                    last[0] = now
                    self._board.set.remote((task.file, task.number), done)

            result: SegmentResult | SegmentFailure = run_segment(plan.job, segment, engine, name=name,
                                                                 watermark=self._marker, report=report,
                                                                 chunk=chunk)
            if isinstance(result, SegmentResult):
                # The final count is set before the result is returned: the driver's last read
                # of the board, after the last result, must not overtake it (calls to an actor
                # from different callers are not ordered).
                import ray

                ray.get(self._board.set.remote((task.file, task.number), result.stats.frames))
        except LivecamError as exc:  # named once: run_segment's own checks name the segment already
            named = exc.message if exc.message.startswith(f"{name}: ") else f"{name}: {exc.message}"
            result = SegmentFailure(message=named, exit_code=exc.exit_code)
        names = tuple(self._engine.model_names.values()) if self._engine is not None else ()
        return result, names

    def _engine_for(self, job: VideoJob, said: _Said) -> FileEngine:
        key = (job.processing, job.watermark)
        if self._engine is None or key != self._key:
            said.building = True  # its warnings are of no one file
            try:
                with self._photos.placed(job) as (local, restore):  # built from the driver's photos
                    try:
                        self._engine = self._factory(local)
                    except LivecamError as exc:  # it names the photo the user gave, not the copy
                        exc.message = restore(exc.message)
                        exc.args = (exc.message,)
                        raise
                    finally:
                        said.engine[:] = [restore(line) for line in said.engine]
                self._marker = None
                if job.watermark:
                    from livecam.marks.watermark import open_watermarker

                    self._marker = open_watermarker(job.processing.runtime, self._engine.providers,
                                                    job.processing.runtime.execution_threads)
            finally:
                said.building = False
            self._key = key
        return self._engine


# --------------------------------------------------------------------------- connecting


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A TCP connection to HOST:PORT (or ray://HOST:PORT) first: Ray itself retries an address
    that does not answer for minutes, printing lines of its own meanwhile."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except ValueError:
        raise InputError(f"--cluster {address!r}: expected local, auto, ray://HOST:PORT or HOST:PORT") from None
    except OSError as exc:
        raise InputError(f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); check the address "
                         "and that the cluster is up (`ray status` on its head node)") from exc


@contextmanager
def connected(address: str, *, cpus: int | None = None) -> Iterator[Any]:
    """ray, initialised for `address` (see the module docstring) and shut down afterwards."""
    if address == "local" and "ray" not in sys.modules:
        # Ray 2.60 turns token authentication on for clusters it starts, with a warning unless
        # the mode is said; it reads the mode once, on import (so only before it). A node that
        # joins a `ray start` cluster needs the same mode (README).
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    ray = _ray()
    if address not in ("local", "auto"):
        check_reachable(address)
    saved = os.environ.pop("RAY_ADDRESS", None) if address != "auto" else None
    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING, "configure_logging": True,
                              "include_dashboard": False}
    try:
        with kept_stop_handlers():  # Ray's core takes SIGTERM over (a stack dump and abort)
            if address == "local":  # a new Ray, always: without an address Ray joins the last `ray start`'s
                ray.init(address="local", num_cpus=cpus, **kwargs)
            else:
                if address.startswith("ray://"):  # Ray Client takes fewer options
                    kwargs = {"logging_level": logging.WARNING, "log_to_driver": False}
                ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if address == "auto" and not os.environ.get("RAY_ADDRESS"):
            text = "no Ray cluster runs on this machine and RAY_ADDRESS is not set"
        hint = ("start one with `ray start --head` or use --cluster local" if address == "auto"
                else "check the address and that the cluster is up (`ray status` on its head node)")
        if "auth" in text.lower():  # Ray 2.60's token authentication: the same mode and token everywhere
            hint = ("give this machine the cluster's token (`ray get-auth-token` on its head node, then "
                    "RAY_AUTH_MODE=token RAY_AUTH_TOKEN=...) or start the cluster with RAY_AUTH_MODE=disabled")
        raise InputError(f"cannot connect to the Ray cluster at {address!r} ({text}); {hint}") from exc
    finally:
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved
    try:
        yield ray
    except BaseException:
        # Interrupted or failed with tasks in flight: Ray's C++ core writes lines of its own to
        # fd 2 while they die ("Failed to push error to driver"); livecam's one line says it.
        with dropping(_RAY_CORE_LINE):
            ray.shutdown()
        raise
    ray.shutdown()


def default_workers(ray: Any, threads: int) -> int:
    """One worker per GPU; without GPUs, one per `threads` cores of the cluster."""
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if gpus:
        return gpus
    return max(1, int(resources.get("CPU", 1)) // max(1, threads))


# --------------------------------------------------------------------------- the driver


def run_on_cluster(jobs: Sequence[VideoJob], cluster: ClusterSettings, progress: Progress | None = None, *,
                   engine_factory: EngineFactory = build_engine,
                   sign_for: Callable[[VideoJob, tuple[str, ...]], Callable[[Path], None] | None] | None = None,
                   folder: bool = False) -> list[FileOutcome]:
    """Every job (encoders resolved, outputs checked) on the cluster; one FileOutcome per job, in
    order. A file that cannot be planned or whose segment fails gets its error; the others go
    on. Raises InputError when the cluster cannot be reached or its versions differ, Interrupted
    on Ctrl-C (after killing the workers; --keep-partial files keep their leading segments).
    `progress` (None: one made here unless the jobs are quiet) is advanced to the frames written
    so far over all jobs; `sign_for(job, model_names)` gives the C2PA signer of an output. A
    joined file's warning (nothing changed in it: file.say_unchanged) starts with its name when
    the jobs are a `folder` run's, as run_batch's do (and so do the notes on what an output
    leaves out, said as each file is planned)."""
    outcomes: dict[int, FileOutcome] = {}
    plans: dict[int, SegmentPlan] = {}
    photos = ShippedPhotos.read(jobs)
    for i, job in enumerate(jobs):
        try:
            with naming(job.input.name) if folder else nullcontext():  # its notes name the file
                plans[i] = plan_job(job, cluster.segment_seconds, cluster.overlap_seconds)
        except LivecamError as exc:
            outcomes[i] = FileOutcome(job=job, error=exc)
    if plans:
        threads = max(job.processing.runtime.execution_threads for job in jobs)
        own_bar = progress is None and not all(job.processing.runtime.quiet for job in jobs)
        if own_bar:
            total = sum(p.frames for p in plans.values())
            progress = Progress(total, label=jobs[0].output.name if len(jobs) == 1 else "videos")
        try:
            with connected(cluster.address, cpus=os.cpu_count() if cluster.address == "local" else None) as ray:
                _Driver(ray, plans, cluster, threads, engine_factory, sign_for, progress, folder,
                        photos).run(outcomes)
        finally:
            if own_bar and progress is not None:
                progress.close()
    return [outcomes[i] for i in range(len(jobs))]


class _Driver:
    def __init__(self, ray: Any, plans: dict[int, SegmentPlan], cluster: ClusterSettings, threads: int,
                 factory: EngineFactory,
                 sign_for: Callable[[VideoJob, tuple[str, ...]], Callable[[Path], None] | None] | None,
                 progress: Progress | None, folder: bool, photos: ShippedPhotos) -> None:
        self.ray = ray
        self.plans = plans
        self.cluster = cluster
        self.threads = threads
        self.factory = factory
        self.sign_for = sign_for
        self.progress = progress
        self.folder = folder
        self.photos = photos
        self.parts: dict[int, dict[int, SegmentResult]] = {i: {} for i in plans}
        self.models: dict[int, tuple[str, ...]] = {}
        self.chunked: set[tuple[int, int]] = set()  # (worker, file): that worker gets the file in chunks
        self.said: set[tuple[int | None, str]] = set()  # the workers' warnings said so far: (file or None, line)
        self.photos_ref: Any = None  # the shipped photos in Ray's object store (_workers)

    def _workers(self, board: str) -> list[Any]:
        ray = self.ray
        resources = ray.cluster_resources()
        gpus = 1 if resources.get("GPU", 0) else 0
        count = self.cluster.workers or default_workers(ray, self.threads)
        # CPU workers: a share of a CPU each so that any --workers fits, spread over the nodes
        cpus = 0.0 if gpus else min(1.0, float(resources.get("CPU", 1)) / count)
        actor = ray.remote(num_gpus=gpus, num_cpus=cpus, scheduling_strategy="SPREAD",
                           max_restarts=MAX_RESTARTS, max_task_retries=MAX_TASK_RETRIES)(Worker)
        # One copy in the object store for every worker, held here for the whole run: a restarted
        # worker's constructor reads it again (a reference dropped after the start let Ray delete
        # it, and the restart failed).
        self.photos_ref = ray.put(self.photos)
        workers = [actor.remote(self.factory, board, self.photos_ref) for _ in range(count)]
        want = versions()
        try:
            described_all = ray.get([w.describe.remote() for w in workers], timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise InputError(f"{count} cluster workers did not all start within {START_TIMEOUT_S} s: the cluster "
                             "has fewer free GPUs or CPUs than --workers asks, or its nodes cannot import "
                             f"livecam ({INSTALL_HINT})") from None
        for described in described_all:
            refusal = version_mismatch(want, described)
            if refusal is not None:
                for w in workers:
                    ray.kill(w, no_restart=True)
                raise InputError(refusal)
        nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
        log.info("cluster: %s on %s", counted(count, "worker"), counted(nodes, "node"))
        return workers

    def run(self, outcomes: dict[int, FileOutcome]) -> None:
        ray = self.ray
        name = f"livecam-progress-{uuid.uuid4().hex}"
        board = ray.remote(num_cpus=0)(Board).options(name=name).remote()
        workers = self._workers(name)
        # largest files first (the long pole starts early), each file's segments in order
        order = sorted(self.plans, key=lambda i: -self.plans[i].stamp[0])  # the size as planned: a file may go
        queue = [_Task(i, self.plans[i], s.number) for i in order for s in self.plans[i].segments]
        running: dict[Any, tuple[int, _Task]] = {}
        idle = list(range(len(workers)))
        try:
            while queue or running:
                while idle and queue:
                    task = queue.pop(0)
                    if task.file in outcomes:  # its file already failed
                        continue
                    worker = idle.pop()
                    try:
                        ref = self._send(workers[worker], worker, task)
                    except LivecamError as exc:  # the chunk could not be cut
                        outcomes.setdefault(task.file, FileOutcome(job=task.plan.job, error=exc))
                        idle.append(worker)
                        continue
                    running[ref] = (worker, task)
                if not running:
                    break
                done, _ = ray.wait(list(running), num_returns=1, timeout=REPORT_EVERY_S)
                self._advance(board)
                for ref in done:
                    worker, task = running.pop(ref)
                    alive = self._collect(ref, task, outcomes)
                    if alive is None:  # that worker's node does not read the file: again, in chunks
                        self.chunked.add((worker, task.file))
                        queue.insert(0, task)
                    if alive is not False:
                        idle.append(worker)
                if not idle and not running and queue:  # every worker is gone for good
                    for task in queue:
                        outcomes.setdefault(task.file, FileOutcome(job=task.plan.job, error=LivecamError(
                            f"{task.plan.job.input.name}: no cluster worker is left (they died more than "
                            f"{MAX_RESTARTS} times each); see the Ray logs on the nodes")))
                    queue.clear()
            self._advance(board)
        except KeyboardInterrupt:
            # The workers stop with this driver's connection (ray.shutdown in connected()): they
            # are its actors. ray.kill here would make Ray say on the terminal that it retries.
            kept = self._keep_partial(outcomes)
            raise Interrupted(self._interrupted(outcomes, kept)) from None

    def _interrupted(self, outcomes: dict[int, FileOutcome], kept: list[Path]) -> str:
        """The one line for Ctrl-C: the partial videos kept and, in a folder run, the files
        written before it (they stay, as a local folder run's do)."""
        said = ["interrupted"]
        if self.folder:
            jobs = set(self.plans) | set(outcomes)  # each job was planned or failed its plan
            written = sum(not o.failed for o in outcomes.values())
            folder = next(iter(self.plans.values())).job.output.parent
            said.append(f"{written} of {counted(len(jobs), 'file')} {agree(written, 'was', 'were')} written to "
                        f"{folder} before it")
        if kept:
            said.append(f"partial videos kept: {', '.join(str(p) for p in kept)}")
        elif not self.folder:
            said.append("no output written")
        return "; ".join(said)

    def _send(self, worker: Any, number: int, task: _Task) -> Any:
        """Start `task` on `worker` (number `number`) with the path or a chunk (ship_input)."""
        mode = self.cluster.ship_input
        chunk = None
        if mode == "chunks" or (mode == "auto" and (number, task.file) in self.chunked):
            chunk = cut_segment(task.plan, task.plan.segments[task.number])
        return worker.run.remote(task, chunk, mode == "auto")

    def _advance(self, board: Any) -> None:
        if self.progress is not None:
            done = self.ray.get(board.total.remote())
            if done > self.progress.done:
                self.progress.advance(done - self.progress.done)

    def _collect(self, ref: Any, task: _Task, outcomes: dict[int, FileOutcome]) -> bool | None:
        """Take in one finished task; False when its worker is gone for good, None when it
        wants the segment as a chunk."""
        plan = task.plan
        name = plan.name(plan.segments[task.number])
        try:
            result, models, engine_said, segment_said = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:  # the worker died past its retries, or a bug
            log.debug("%s failed on the cluster: %s", name, exc)  # with -v: the worker's traceback
            cause = getattr(exc, "cause", None)  # a RayTaskError's: what the worker's code raised
            if isinstance(cause, Exception) and not isinstance(cause, self.ray.exceptions.RayError):
                error = as_error(cause)  # as a folder run on this machine words it
                error = LivecamError(f"{name}: {error.message}", exit_code=error.exit_code)
            else:
                text = str(exc).strip().splitlines()
                error = LivecamError(f"{name}: the cluster worker failed ({text[-1] if text else type(exc).__name__})")
            outcomes.setdefault(task.file, FileOutcome(job=plan.job, error=error))
            return not isinstance(exc, self.ray.exceptions.RayActorError)
        # each once: the engine's (every worker builds one) as a folder run here says its engine's,
        # a segment's per file, named in a folder run as run_batch names a file's
        for file, lines in ((None, engine_said), (task.file, segment_said)):
            for line in lines:
                if (file, line) not in self.said:
                    self.said.add((file, line))
                    with naming(plan.job.input.name) if self.folder and file is not None else nullcontext():
                        log.warning("%s", line)
        if isinstance(result, ChunkWanted):
            log.info("cluster: node %s does not read %s; sending it the segments' packets", result.node,
                     plan.job.input)
            return None
        if isinstance(result, SegmentFailure):
            outcomes.setdefault(task.file, FileOutcome(job=plan.job, error=LivecamError(
                result.message, exit_code=result.exit_code)))
            return True
        if task.file in outcomes:
            return True
        self.models[task.file] = models
        parts = self.parts[task.file]
        parts[task.number] = result
        if len(parts) == len(plan.segments):
            outcomes[task.file] = self._join(task.file, plan)
        return True

    def _join(self, file: int, plan: SegmentPlan) -> FileOutcome:
        results = [self.parts[file][n] for n in range(len(plan.segments))]
        self.parts[file] = {}  # the parts' bytes are not needed any more
        sign = self.sign_for(plan.job, self.models.get(file, ())) if self.sign_for is not None else None
        try:
            audio, tracks = write_joined(plan, results, sign=sign)
        except LivecamError as exc:
            return FileOutcome(job=plan.job, error=exc)
        stats = joined_stats(results)
        with naming(plan.job.input.name) if self.folder else nullcontext():
            say_unchanged(stats, plan.job)
        return FileOutcome(job=plan.job, stats=stats, audio=audio, tracks=tracks)

    def _keep_partial(self, outcomes: dict[int, FileOutcome]) -> list[Path]:
        kept = []
        for file, plan in self.plans.items():
            if file in outcomes or not plan.job.keep_partial:
                continue
            leading = []
            for n in range(len(plan.segments)):
                if n not in self.parts[file]:
                    break
                leading.append(self.parts[file][n])
            if not leading:
                continue
            try:
                write_joined(replace(plan, segments=plan.segments[:len(leading)]), leading, partial=True)
            except LivecamError as exc:
                log.warning("warning: the partial video of %s could not be kept: %s", plan.job.input.name,
                            exc.message)
                continue
            kept.append(plan.job.output)
        return kept


# --------------------------------------------------------------------------- doctor


def _node_report() -> dict[str, str]:
    return {**versions(), "node": platform.node()}


def describe_cluster(address: str) -> list[str]:
    """`livecam doctor --cluster ADDR`: one line per node (GPUs, livecam/Ray/Python versions),
    marked where they differ from this machine's. InputError when it cannot be reached."""
    with connected(address) as ray:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        want = versions()
        lines = [f"cluster {address}: reachable; here livecam {want['livecam']}, Ray {want['ray']}, "
                 f"Python {want['python']}"]
        probe = ray.remote(num_cpus=0)(_node_report)
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            gpus = int(node.get("Resources", {}).get("GPU", 0))
            strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            try:
                theirs = ray.get(probe.options(scheduling_strategy=strategy).remote(), timeout=120)
            except Exception as exc:  # noqa: BLE001 - a node that cannot run livecam is the finding
                text = str(exc).strip().splitlines()
                lines.append(f"  node {node.get('NodeManagerAddress')}: {counted(gpus, 'GPU')}; cannot run livecam "
                             f"({text[-1] if text else type(exc).__name__}): {INSTALL_HINT}")
                continue
            diff = [f"{k} {theirs[k]} (here {want[k]})" for k in want if theirs[k] != want[k]]
            state = "OK" if not diff else "MISMATCH: " + ", ".join(diff)
            lines.append(f"  node {theirs['node']} ({node.get('NodeManagerAddress')}): {counted(gpus, 'GPU')}, livecam "
                         f"{theirs['livecam']}, Ray {theirs['ray']}, Python {theirs['python']}: {state}")
        return lines


__all__ = ["ClusterSettings", "EngineFactory", "build_engine", "describe_cluster", "run_on_cluster"]
