#!/usr/bin/env python
"""Interrupt the real `livecam` at random moments: SIGINT or SIGTERM, once or repeated a few ms
apart, during Python's start-up, the CLI's imports, model loading, mid-run, the write and after
the output is complete, for `image`, `video` and `run --output FILE`, over the odd media inputs
(resolution change, TS offset, cover art, PCM, non-square pixels, full range, interlaced, an
animated GIF, a pipe) and memory budgets. Each run must end with:

    exit 130 and one line saying it was interrupted, no output and no hidden partial file
    (`run` may keep its recording: a valid file, never a hidden one), or
    exit 0 with a finished, readable output and nothing else in the folder (the signal came after
    the output was done, or after the process ended), or
    the scenario's own refusal (exit 2, one line) where the input is refused anyway,
    and never a traceback, never death by the signal (a negative status).

    python -m tests.hardening.interrupts                   # 60 runs, seed 1, over each run's length
    python -m tests.hardening.interrupts --runs 200 --seed 3
    python -m tests.hardening.interrupts --startup --runs 100 --only image   # in the first 0.6 s
    python -m tests.hardening.interrupts --src ../other/src   # another checkout's livecam

(from the repository root, with the dev extra installed; pytest does not collect it;
tests/hardening/test_interrupt_script.py runs a handful of cases.) Prints every bad run and a
summary (outcomes, exit codes); exits 1 if any run misbehaved once livecam's handler was
installed. A signal that lands while Python itself is still starting (before the first statement
of livecam.__main__.main installs the handler: Linux tells, from /proc/PID/status) acts as
Python's default (death by SIGTERM, a KeyboardInterrupt traceback from site or runpy); such runs
are counted apart ("bad in Python's start-up", printed as PYTHON) as no livecam code can mend them.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[2]
# The `livecam` console script is `from livecam.__main__ import main; sys.exit(main())`.
ENTRIES = {
    "script": ["-c", "import sys; from livecam.__main__ import main; sys.exit(main())"],
    "module": ["-m", "livecam"],
}
SIGNALS = {signal.SIGINT: "INT", signal.SIGTERM: "TERM"}


@dataclass(frozen=True)
class Scenario:
    name: str
    args: tuple[str, ...]  # "{out}" stands for the output path
    output: str  # the output's file name
    command: str  # image, video or run
    pipe: Path | None = None  # fed to the process's stdin through a pipe
    refused: bool = False  # the input is refused anyway (exit 2, one line)


@dataclass(frozen=True)
class Plan:
    signals: tuple[int, ...]
    delay: float  # seconds after the process started
    gap: float  # between repeated signals


@dataclass
class Outcome:
    code: int
    stderr: str
    files: list[str]
    sent: int  # signals actually delivered (0: the process had already ended)
    handled: bool | None = None  # livecam's handler was installed when the first one was sent (None: unknown)
    problem: str | None = None
    seconds: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)


def make_inputs(faces: Path, work: Path) -> dict[str, Path]:
    """The media cases, small enough for a run of a few seconds."""
    import cv2

    from tests.hardening import fuzz
    from tests.videos import make_animation, make_clip, make_flat_clip, make_interlaced_clip, make_timed_clip

    work.mkdir(parents=True, exist_ok=True)
    face = work / "face.png"
    cv2.imwrite(str(face), fuzz.small_face(faces, "biden.jpg", 200))
    target = work / "target.jpg"
    cv2.imwrite(str(target), fuzz.small_face(faces, "obama.jpg", 320))
    first = make_timed_clip(work / "a.ts", start=1.4, frames=20, size=(96, 64), fmt="mpegts")
    second = make_timed_clip(work / "b.ts", start=1.4, frames=20, size=(192, 64), fmt="mpegts", shade=128)
    joined = work / "resolution-change.ts"
    joined.write_bytes(first.read_bytes() + second.read_bytes())
    return {
        "face": face,
        "target": target,
        "clip": make_clip(work / "clip.mp4", frames=40, size=(160, 120), source_image=faces / "obama.jpg"),
        "stream": make_clip(work / "stream.ts", frames=40, size=(160, 120), source_image=faces / "obama.jpg"),
        "resolution-change": joined,
        "ts-offset": make_timed_clip(work / "offset.ts", start=36000.0, frames=30, fmt="mpegts"),
        "cover": make_timed_clip(work / "cover.mp4", frames=30, cover=(128, 128)),
        "pcm": make_timed_clip(work / "pcm.mov", frames=30, audio_codec="pcm_s16le", fmt="mov"),
        "sar": make_timed_clip(work / "sar.mkv", frames=30, sample_aspect=Fraction(8, 9)),
        "full-range": make_flat_clip(work / "full.mp4", luma=100, colour=(2, 1, 1, 1), frames=20, size=(96, 64)),
        "mjpeg": make_flat_clip(work / "mjpeg.avi", luma=100, pix_fmt="yuvj420p", codec="mjpeg", frames=20,
                                size=(96, 64)),
        "interlaced": make_interlaced_clip(work / "interlaced.mkv", frames=20),
        "animated": make_animation(work / "animated.gif", frames=6),
    }


def scenarios(inputs: dict[str, Path]) -> list[Scenario]:
    face = str(inputs["face"])
    common = ("--source", face, "--swap-model", "mesh", "--no-watermark", "--no-c2pa")
    found = [Scenario("image", ("image", str(inputs["target"]), "{out}", *common), "out.png", "image"),
             Scenario("image-marked", ("image", str(inputs["target"]), "{out}", "--source", face, "--swap-model",
                                       "mesh"), "out.jpg", "image")]
    for name in ("clip", "resolution-change", "ts-offset", "cover", "pcm", "sar", "full-range", "mjpeg",
                 "interlaced", "animated"):
        found.append(Scenario(f"video-{name}", ("video", str(inputs[name]), "{out}", *common), "out.mp4", "video"))
    found += [
        Scenario("video-budget-1gb", ("video", str(inputs["clip"]), "{out}", *common, "--max-memory", "1",
                                      "--execution-threads", "3"), "out.mp4", "video"),
        Scenario("video-budget-too-small", ("video", str(inputs["clip"]), "{out}", *common, "--max-memory", "0.1"),
                 "out.mp4", "video", refused=True),
        Scenario("video-pipe", ("video", "/dev/stdin", "{out}", *common), "out.mp4", "video",
                 pipe=inputs["clip"], refused=True),
        Scenario("video-keep-marks", ("video", str(inputs["clip"]), "{out}", "--source", face, "--swap-model",
                                      "mesh", "--no-c2pa"), "out.mkv", "video"),
        Scenario("run-file", ("run", "--camera", str(inputs["clip"]), "--output", "{out}", "--no-realtime",
                              *common[:4]), "rec.mp4", "run"),
        Scenario("run-pipe", ("run", "--camera", "/dev/stdin", "--output", "{out}", "--no-realtime", *common[:4]),
                 "rec.mp4", "run", pipe=inputs["stream"]),  # a pipe cannot seek: MPEG-TS
    ]
    return found


def _feed(pipe: IO[bytes], data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def run_one(scenario: Scenario, plan: Plan | None, folder: Path, env: dict[str, str], entry: str) -> Outcome:
    """Start livecam, send the plan's signals at its delay (if the process still runs), judge."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    out = folder / scenario.output
    args = [a.replace("{out}", str(out)) for a in scenario.args]
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *ENTRIES[entry], "-q", *args], env=env, cwd=folder.parent,
                            stdin=subprocess.PIPE if scenario.pipe else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if scenario.pipe is not None:
        pipe, proc.stdin = proc.stdin, None  # fed by this thread; communicate() leaves it alone
        assert pipe is not None
        threading.Thread(target=_feed, args=(pipe, scenario.pipe.read_bytes()), daemon=True).start()
    sent = 0
    handled = None
    if plan is not None:
        time.sleep(max(0.0, plan.delay - (time.perf_counter() - started)))
        for i, sig in enumerate(plan.signals):
            if proc.poll() is not None:
                break
            if i:
                time.sleep(plan.gap)
            if i == 0:
                handled = handler_installed(proc.pid)
            try:
                os.kill(proc.pid, sig)
                sent += 1
            except ProcessLookupError:
                break
    try:
        _, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return Outcome(-9, err.decode(errors="replace"), [], sent, "hung for 180 s")
    seconds = time.perf_counter() - started
    stderr = err.decode(errors="replace")
    files = sorted(p.name for p in folder.iterdir())
    outcome = Outcome(proc.returncode, stderr, files, sent, handled, seconds=seconds)
    outcome.problem = judge(scenario, outcome, out)
    return outcome


def handler_installed(pid: int) -> bool | None:
    """Whether livecam's handler is installed in process `pid` now: whether it catches SIGTERM
    (Linux: SigCgt of /proc/PID/status; None elsewhere). Python catches SIGINT from its start,
    SIGTERM only from livecam.__main__.main's first statement on."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    except (OSError, ValueError):
        pass
    return None


def judge(scenario: Scenario, outcome: Outcome, out: Path) -> str | None:
    code, files = outcome.code, outcome.files
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    if code < 0:
        return f"died by signal {-code} after {lines[-1:]}"
    if any(word in outcome.stderr for word in ("Traceback", "Exception ignored", "internal error", "Fatal Python")):
        return f"traceback: {outcome.stderr.strip()[-600:]}"
    hidden = [name for name in files if name.startswith(".")]
    if hidden:
        return f"exit {code} left hidden files {hidden}"
    if code == 130:
        if len(lines) != 1 or not lines[0].startswith("livecam: ") or "interrupted" not in lines[0]:
            return f"exit 130 but stderr is not one 'interrupted' line: {lines}"
        if scenario.command == "run":  # a recording stopped by Ctrl-C is finalised and kept
            return None if files in ([], [out.name]) and (not files or readable(out)) else f"left {files}"
        return None if files == [] else f"interrupted but left {files}"
    if code == 0:
        if files != [out.name]:
            return f"exit 0 but the folder holds {files}"
        if lines:
            return f"exit 0 but stderr says {lines}"
        return None if readable(out) else f"exit 0 but {out.name} does not read back"
    if scenario.refused and code == 2:
        if len(lines) != 1 or not lines[0].startswith("livecam: error: "):
            return f"refused but stderr is not one error line: {lines}"
        return None if files == [] else f"refused but left {files}"
    return f"exit {code}: {lines[-3:]}"


def readable(path: Path) -> bool:
    if path.suffix in (".png", ".jpg"):
        import cv2

        return cv2.imread(str(path)) is not None
    import av

    try:
        with av.open(str(path)) as container:
            return any(True for _ in container.decode(video=0))
    except Exception:  # noqa: BLE001 - any failure to read it back is the finding
        return False


def random_plan(rng: random.Random, length: float, startup: float | None) -> Plan:
    count = rng.choice([1, 1, 1, 2, 3])
    signals = tuple(rng.choice(list(SIGNALS)) for _ in range(count))
    delay = rng.uniform(0.0, startup) if startup is not None else rng.uniform(0.0, length * 1.1)
    return Plan(signals, delay, rng.uniform(0.0, 0.005))


def environment(work: Path, src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LIVECAM_MODELS_DIR=str(work / "models"), LIVECAM_CACHE_DIR=str(work / "cache"),
               LIVECAM_C2PA_DIR=str(work / "cache" / "c2pa"), LIVECAM_OFFLINE="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(src), str(REPO)]))
    return env


def campaign(faces: Path, work: Path, runs: int, seed: int, *, startup: float | None = None,
             only: str | None = None, src: Path = REPO / "src", entries: tuple[str, ...] = tuple(ENTRIES),
             report: bool = True) -> tuple[list[str], Counter[str]]:
    """Run `runs` random interrupts; returns (bad runs described, counts of outcomes)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started with `&`: children would ignore Ctrl-C
        signal.signal(signal.SIGINT, signal.default_int_handler)
    env = environment(work, src)
    chosen = [s for s in scenarios(make_inputs(faces, work / "inputs")) if only is None or only in s.name]
    rng = random.Random(seed)
    lengths: dict[str, float] = {}
    bad: list[str] = []
    counts: Counter[str] = Counter()
    for scenario in chosen:  # each scenario once without a signal: it must pass, and gives its length
        if startup is not None:
            lengths[scenario.name] = startup
            continue
        outcome = run_one(scenario, None, work / "run", env, "script")
        lengths[scenario.name] = outcome.seconds
        if outcome.problem:
            bad.append(f"{scenario.name} (no signal): {outcome.problem}")
    for i in range(runs):
        scenario = rng.choice(chosen)
        plan = random_plan(rng, lengths[scenario.name], startup)
        entry = rng.choice(entries)
        outcome = run_one(scenario, plan, work / "run", env, entry)
        names = "+".join(SIGNALS[s] for s in plan.signals)
        counts[f"exit {outcome.code}"] += 1
        counts["signal after the end" if outcome.sent == 0 else "signalled"] += 1
        where = f"{i:03d} {scenario.name} via {entry}: SIG{names} at {plan.delay:.3f} s (gap {plan.gap * 1000:.1f} ms)"
        if outcome.sent and outcome.handled is False:
            counts["sent before livecam's handler"] += 1
        if outcome.problem and outcome.handled is False:  # Python's own start-up: not livecam's to mend
            counts["bad in Python's start-up"] += 1
            if report:
                print(f"PYTHON {where}: {outcome.problem}", flush=True)
        elif outcome.problem:
            counts["bad"] += 1
            bad.append(f"{where}: {outcome.problem}")
            if report:
                print(f"BAD {where}: {outcome.problem}", flush=True)
    return bad, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--startup", nargs="?", type=float, const=0.6, default=None, metavar="SECONDS",
                        help="send every signal within the first SECONDS (default 0.6) instead of over the run")
    parser.add_argument("--only", help="scenarios whose name contains this")
    parser.add_argument("--entry", choices=sorted(ENTRIES), help="only this entry point (default: both)")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the livecam sources to run")
    parser.add_argument("--faces", type=Path, default=REPO.parent / "shared" / "faces")
    args = parser.parse_args()
    if not (args.faces / "obama.jpg").is_file():
        print(f"no photos in {args.faces}; pass --faces FOLDER")
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        bad, counts = campaign(args.faces, Path(tmp), args.runs, args.seed, startup=args.startup, only=args.only,
                               src=args.src.resolve(), entries=(args.entry,) if args.entry else tuple(ENTRIES))
    for line in bad:
        if "(no signal)" in line:
            print(f"BAD {line}")
    print(f"{args.runs} runs (seed {args.seed}) in {time.perf_counter() - started:.0f} s: "
          f"{dict(sorted(counts.items()))}; {len(bad)} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
