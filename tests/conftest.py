"""Shared fixtures: paths to the real photos and a clean environment for CLI subprocesses."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FACES_DIR = REPO_ROOT.parent / "shared" / "faces"


@pytest.fixture(autouse=True)
def livecam_logger_as_it_was() -> Iterator[None]:
    """The CLI, run in-process (click's CliRunner), gives the "livecam" logger its own handler
    and stops propagation; a later test's caplog would then see nothing of livecam's warnings."""
    log = logging.getLogger("livecam")
    saved = (log.level, log.propagate, list(log.handlers))
    yield
    log.setLevel(saved[0])
    log.propagate = saved[1]
    log.handlers[:] = saved[2]


@pytest.fixture(scope="session", autouse=True)
def stop_signals_as_on_a_terminal() -> None:
    """A suite started in the background (`cmd &`) inherits an ignored SIGINT, and under nohup an
    ignored SIGHUP, and so would every livecam it starts (which keeps an ignored SIGHUP ignored):
    the signal tests model a terminal, where SIGINT raises KeyboardInterrupt and SIGHUP stops."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # children get SIG_DFL at exec
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.fixture
def faces_dir() -> Path:
    """../shared/faces, or a clean skip when this checkout has no shared folder beside it."""
    if not (FACES_DIR / "obama.jpg").is_file():
        pytest.skip(f"real test photos not found at {FACES_DIR} (the shared folder is absent)")
    return FACES_DIR


@pytest.fixture
def isolated_env(tmp_path: Path) -> dict[str, str]:
    """Environment for CLI subprocesses: offline, private models and cache folders."""
    env = dict(os.environ)
    env["LIVECAM_MODELS_DIR"] = str(tmp_path / "models")
    env["LIVECAM_CACHE_DIR"] = str(tmp_path / "cache")
    env["LIVECAM_C2PA_DIR"] = str(tmp_path / "cache" / "c2pa")  # the local signing identity, never the user's
    env["LIVECAM_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 120,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m livecam ARGS` in a subprocess, capturing text output."""
    return subprocess.run([sys.executable, "-m", "livecam", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


# A small wrapper whose only child is the command: the kernel's ru_maxrss of its waited children
# is then the command's own peak. (Measured straight from the test process it is not: a child
# exec'd from pytest inherits pytest's high-water mark, which grows with the tests run before.)
_PEAK_WRAPPER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)  # KB on Linux
sys.exit(code)
"""


def run_measured(args: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str, int]:
    """(exit code, stderr, peak resident bytes) of `python -m livecam ARGS` (Linux)."""
    env = dict(env, PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)]))
    proc = subprocess.run([sys.executable, "-c", _PEAK_WRAPPER, sys.executable, "-m", "livecam", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stderr, int(proc.stdout.split()[-1])


@pytest.fixture
def standin_models(tmp_path: Path) -> Path:
    """A models folder with stand-ins of ArcFace (w600k_r50) and inswapper_128 (the neural path)."""
    from tests.standins import build_swap_models

    return build_swap_models(tmp_path / "standins")


def wait_for_file(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    """Poll until a subprocess has created PATH; fail if it exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"exited early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder this user cannot create files in: a read-only temporary folder, or /sys where
    permissions do not stop the user (root); skips the test where there is none."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o555)
    for candidate in (folder, Path("/sys")):
        try:
            (candidate / ".livecam-probe").touch()
        except OSError:
            return candidate
        (candidate / ".livecam-probe").unlink()
    pytest.skip("no unwritable folder available to this user")
