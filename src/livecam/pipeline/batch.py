"""Many video files in one run (a folder in, a folder out): the plan, the local runner, the summary.

    plan_folder(template, pattern, skip_existing)  every matching file -> a VideoJob into the output
                                                   folder, largest first; skips and name clashes
                                                   decided here as FileOutcomes
    (commands/video.py runs the cheap checks per job; a refusal is an outcome, not an abort)
    run_batch(jobs, engine, ...)                   one engine, the files one after another through
                                                   process_video; a failed file does not stop the rest
    summarize(outcomes)                            one line per failed file; the error to exit with

Local batch runs and cluster runs (livecam.cluster) both report one FileOutcome per planned file,
so the summary and the exit code are decided in one place.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import logging
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from livecam.console import agree
from livecam.errors import EXIT_FAILURE, InputError, Interrupted, LivecamError
from livecam.paths import blocked_folder, why_missing
from livecam.media.video_writer import CONTAINERS
from livecam.pipeline.file import RunStats, process_video
from livecam.processors import registry
from livecam.settings import VideoJob

if TYPE_CHECKING:
    from livecam.marks.watermark import Watermarker
    from livecam.pipeline.contracts import FileEngine
    from livecam.pipeline.progress import Parts

log = logging.getLogger("livecam")

# What a folder run picks up without --pattern: the containers livecam writes (CONTAINERS) and
# the common ones FFmpeg reads that it does not write. Animated GIF/APNG are clips too, but a
# folder's .gif and .png files are mostly stills, so they are taken only with --pattern. Raw
# H.264/HEVC streams are what dashcams and Raspberry Pi cameras leave in a folder, JPEG streams
# (.mjpeg) what IP cameras and capture tools record.
READ_ONLY_SUFFIXES = (".avi", ".wmv", ".flv", ".ts", ".mts", ".m2ts", ".mpg", ".mpeg", ".vob", ".3gp",
                      ".ogv", ".mxf", ".dv", ".h264", ".264", ".h265", ".265", ".hevc", ".mjpeg", ".mjpg")
DEFAULT_OUTPUT_SUFFIX = ".mp4"  # for inputs whose container livecam does not write


def video_suffixes() -> tuple[str, ...]:
    return (*CONTAINERS, *READ_ONLY_SUFFIXES)


@dataclass(frozen=True)
class FileOutcome:
    job: VideoJob
    stats: RunStats = field(default_factory=RunStats)  # the file's counts (failed: the frames written before)
    error: LivecamError | None = None  # None: the output was written (or skipped)
    skipped: bool = False  # --skip-existing found the output already there
    audio: str | None = None  # written: its audio mode and tracks (VideoResult's)
    tracks: tuple[int, int] = (0, 0)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def frames(self) -> int:
        return self.stats.frames

    @property
    def faces_changed(self) -> int:
        return self.stats.faces_changed


@dataclass(frozen=True)
class Plan:
    jobs: tuple[VideoJob, ...]  # to check and run, largest input first
    decided: tuple[FileOutcome, ...]  # without running: skipped, or refused (two inputs, one output)


def is_folder_run(job: VideoJob) -> bool:
    """A folder input means a folder run; its output must then be a folder too (one clear line
    otherwise). A file input with a folder output is check_job's refusal, as before."""
    if not job.input.is_dir():
        return False
    out = job.output
    if (out.exists() and not out.is_dir()) or (not out.exists() and out.suffix.lower() in video_suffixes()):
        raise InputError(f"the input {job.input} is a folder, so the output must be a folder too, not a file "
                         f"like {out}; give a folder such as {out.parent / out.stem}")
    return True


def output_name(input_path: Path) -> str:
    """The input's name in the output folder: its own extension where livecam writes that
    container, else .mp4 (an AVI or TS comes out as MP4)."""
    suffix = input_path.suffix if input_path.suffix.lower() in CONTAINERS else DEFAULT_OUTPUT_SUFFIX
    return input_path.stem + suffix


def plan_folder(template: VideoJob, pattern: str | None, *, skip_existing: bool) -> Plan:
    """Every regular, non-hidden file of template.input (not its subfolders) whose name matches
    `pattern` (shell-style, case-sensitive; None: a video extension, any case) as a copy of
    `template` writing the same stem into template.output, largest first. Raises InputError when
    nothing matches or the output folder is the input folder."""
    folder, out_folder = template.input, template.output
    if "/" in (pattern or "") or "\\" in (pattern or ""):
        raise InputError(f"--pattern {pattern!r} matches file names inside {folder}, not paths; subfolders are "
                         "not searched (run once per folder)")
    if out_folder.exists() and out_folder.resolve() == folder.resolve():
        raise InputError(f"the output folder {out_folder} is the input folder; give another one (outputs there "
                         "would be read as inputs by the next run)")
    suffixes = video_suffixes()
    try:
        # a broken link is listed (it fails, named) rather than silently missing from the count
        entries = [p for p in folder.iterdir() if not p.name.startswith(".") and (p.is_file() or _broken_link(p))]
    except OSError as exc:
        raise InputError(f"cannot list the input folder {folder}: {exc.strerror or exc}") from exc
    matched = [p for p in entries
               if (fnmatch.fnmatchcase(p.name, pattern) if pattern else p.suffix.lower() in suffixes)]
    if not matched and pattern:
        other_case = [p.name for p in entries if fnmatch.fnmatch(p.name.lower(), pattern.lower())]
        fix = (f"--pattern is case-sensitive: {other_case[0]!r} differs only in case" if other_case
               else "check the pattern (shell style: '*.mp4', 'take-??.mov')")
        raise InputError(f"no files matching {pattern!r} in {folder}; {fix}")
    if not matched:
        raise InputError(f"no files with a video extension ({', '.join(suffixes)}) in {folder}; "
                         "give --pattern to choose others")
    matched.sort(key=lambda p: (-_size(p), p.name))  # the longest work first: fewer idle minutes at the end
    jobs: list[VideoJob] = []
    decided: list[FileOutcome] = []
    taken: dict[Path, Path] = {}  # output -> the input writing it
    for path in matched:
        job = replace(template, input=path, output=out_folder / output_name(path))
        other = taken.setdefault(job.output, path)
        if _broken_link(path):
            decided.append(FileOutcome(job, error=InputError(f"{path.name} {why_missing(path)}")))
        elif other != path:
            decided.append(FileOutcome(job, error=InputError(
                f"{path.name} and {other.name} would both be written to {job.output}; rename one, or choose "
                f"the files with --pattern")))
        elif job.output.is_dir():  # check_job's fix, "a file name such as OUT/x.mp4/x.mp4", is none here
            decided.append(FileOutcome(job, error=InputError(
                f"{job.output} is a folder where the output of {path.name} goes; move or rename that folder")))
        elif skip_existing and (job.output.exists() or job.output.is_symlink()):
            decided.append(FileOutcome(job, skipped=True))
        else:
            jobs.append(job)
    return Plan(tuple(jobs), tuple(decided))


def _broken_link(path: Path) -> bool:
    return path.is_symlink() and not path.exists()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@contextlib.contextmanager
def output_folder(folder: Path) -> Iterator[None]:
    """The output folder, created (with its parents) when missing; at the end, the folders
    created here that hold nothing (every file failed) are removed again, innermost first.
    A folder that was there before, or that holds anything, stays (rmdir refuses those)."""
    created: list[Path] = []  # innermost first
    missing = folder
    while not os.path.lexists(missing) and missing != missing.parent:
        created.append(missing)
        missing = missing.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise InputError(f"the output {folder} is a file, not a folder; give a folder") from exc
    except OSError as exc:  # (under a file mkdir says only "Not a directory")
        reason = blocked_folder(folder) or exc.strerror or exc
        raise InputError(f"cannot create the output folder {folder} ({reason}); choose another output folder") from exc
    try:
        yield
    finally:
        for path in created:
            try:
                path.rmdir()
            except OSError:  # it holds something (or is not ours to remove): it stays
                break


def run_batch(jobs: Sequence[VideoJob], engine: FileEngine, *, parts: Parts | None = None,
              watermark: Watermarker | None = None, sign: Callable[[VideoJob, Path], None] | None = None,
              on_warm: Callable[[], None] | None = None, lanes: Sequence[FileEngine] = ()) -> list[FileOutcome]:
    """The local runner: each job through process_video with the one engine (its own
    AtomicOutput, watermark and signing, as for one file), in order. A file that fails is an
    outcome and the next one starts. Ctrl-C/SIGTERM ends the batch: the current file's output is
    removed (or kept partial with keep_partial), the finished ones stay, and Interrupted (exit
    130) names where it stopped. `parts` counts frames per input on one bar; `sign(job, temp)`
    signs a finished temporary file; `lanes`: one engine per worker, built once for every file."""
    outcomes: list[FileOutcome] = []
    current: VideoJob | None = None
    try:
        for job in jobs:
            current = job
            engine.reset_tracking()  # a later --frame-range start is not pulled towards old faces
            counter = parts.counter(job.input) if parts is not None else None
            file_sign = functools.partial(sign, job) if sign is not None else None
            try:
                with naming(job.input.name):
                    result = process_video(job, engine, quiet=True, on_warm=on_warm, watermark=watermark,
                                           sign=file_sign, progress=counter, lanes=lanes)
            except Interrupted:
                raise
            except Exception as exc:  # noqa: BLE001 - one file's failure is its outcome, not the batch's end
                error = as_error(exc)
                log.debug("%s failed", job.input, exc_info=True)
                outcomes.append(FileOutcome(job, RunStats(frames=counter.done if counter is not None else 0),
                                            error=error))
                continue
            outcomes.append(FileOutcome(job, result.stats, audio=result.audio, tracks=result.tracks))
    except (Interrupted, KeyboardInterrupt) as exc:
        written = sum(not o.failed for o in outcomes)
        what = exc.message if isinstance(exc, Interrupted) else "interrupted; no output written"
        name = current.input.name if current is not None else "the first file"
        folder = current.output.parent if current is not None else Path(".")
        raise Interrupted(f"{name}: {what}; {written} of {len(jobs)} files {agree(written, 'was', 'were')} written to "
                          f"{folder} before it") from exc
    return outcomes


def as_error(exc: Exception) -> LivecamError:
    """A file's failure as its outcome's one line (a cluster worker's too): livecam's own error as
    it is, running out of memory with its fix, anything else as an internal error."""
    if isinstance(exc, LivecamError):
        return exc
    if isinstance(exc, MemoryError):
        return LivecamError("ran out of memory; raise --max-memory or use fewer --execution-threads")
    first = str(exc).splitlines()[0] if str(exc) else ""
    return LivecamError(f"internal error: {type(exc).__name__}: {first} (rerun with -v for details and please "
                        "report it)")


@contextlib.contextmanager
def naming(name: str) -> Iterator[None]:
    """Warnings logged while one file of a batch runs start with its name, so they say which."""
    prefix = name.replace("%", "%%") + ": "

    def add_name(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and isinstance(record.msg, str):
            record.msg = prefix + record.msg
        return True

    log.addFilter(add_name)
    try:
        yield
    finally:
        log.removeFilter(add_name)


def _failure_line(job: VideoJob, message: str) -> str:
    """A failed file's reason naming the file once: most reasons name it already (the checks speak
    as for one file: "cannot read clips/a.mp4 as a video"), the rest get its name first."""
    return message if _names_input(job.input, message) else f"{job.input.name}: {message}"


def _names_input(path: Path, message: str) -> bool:
    """Whether `message` names the input `path`: by a path to it (as given, absolute or resolved)
    or by its bare name. The same name under another folder is another file: the output's
    (out/a.mp4, however spelled), or the file a linked output points to, was taken for the input,
    which was then named nowhere."""
    spellings = {str(path), str(path.absolute()), os.path.realpath(path), path.name}
    alternatives = "|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))
    # not inside a longer name or path: a.mp4 is not in data.mp4, clips/a.mp4 not in out/clips/a.mp4
    return re.search(rf"(?<![\w.\-/\\])(?:{alternatives})(?![\w-])", message) is not None


def summarize(outcomes: Sequence[FileOutcome], seconds: float) -> LivecamError | None:
    """Log one line per failed file and a total line; the error to exit with when any failed:
    the failures' own exit code when they share one (2 for bad inputs, as for one file), else 1."""
    failed = sorted((o for o in outcomes if o.failed), key=lambda o: o.job.input.name)
    skipped = sum(o.skipped for o in outcomes)
    written = len(outcomes) - len(failed) - skipped
    for outcome in failed:
        assert outcome.error is not None
        log.error("error: %s", _failure_line(outcome.job, outcome.error.message))
    stats = RunStats.total(o.stats for o in outcomes if not o.failed)
    frames = stats.frames
    folder = outcomes[0].job.output.parent if outcomes else Path(".")
    total = f"{written} of {len(outcomes)} files written to {folder}"
    if frames:
        faces = registry.changed(stats.faces_changed, outcomes[0].job.processing.frame_processors,
                                 stats.faces_small)  # one template: the same for all
        total += f" ({frames} frames in {seconds:.1f} s, {frames / max(seconds, 1e-9):.1f} fps, {faces})"
    if skipped:
        total += f", {skipped} skipped (output already there)"
    if failed:
        total += f", {len(failed)} failed"
    if not failed:
        log.info("%s", total)
        return None
    codes = {o.error.exit_code for o in failed if o.error is not None}
    return LivecamError(total, exit_code=codes.pop() if len(codes) == 1 else EXIT_FAILURE)
