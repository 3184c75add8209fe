"""The `livecam` command and `python -m livecam`: cli.main, with Ctrl-C, SIGTERM and SIGHUP handled from
the first statement of main() (nothing but the C signal module and
livecam.interrupt, which imports only built-in modules, is loaded before it), so an interrupt while the CLI's modules load (about half
a second) is one line and exit 130 like any other, never an import traceback.

An interrupted run leaves through os._exit(130) once its line is written and the streams are
flushed: Python itself would turn a KeyboardInterrupt that ever escaped code it ran through
PyRun_* (as a C extension's import may do) into death by SIGINT at exit (status -2), even when
livecam caught it and exited 130; and nothing is left to finalise by then (the outputs are
cleaned up, the pipeline's threads joined or abandoned on purpose). Any run that leaves a pipeline
stage behind (a read that never returned) leaves the same way, with its own status."""

import _signal  # type: ignore[import-not-found]  # (no stub) the C module the interpreter already loaded

from livecam.interrupt import InterruptOnce  # imports only built-in modules


def main() -> None:
    once = InterruptOnce()  # cli.main's stop_signals() takes this one over (one state)
    _signal.signal(_signal.SIGINT, once)
    _signal.signal(_signal.SIGTERM, once)
    hup = getattr(_signal, "SIGHUP", None)  # a closed terminal: the same stop (not on Windows; nohup keeps it ignored)
    if hup is not None and _signal.getsignal(hup) != _signal.SIG_IGN:
        _signal.signal(hup, once)
    once.catch_swallowed()
    try:
        from livecam.cli import main as cli_main

        cli_main()
    except SystemExit as exc:
        from livecam.errors import EXIT_INTERRUPTED

        if exc.code == EXIT_INTERRUPTED:  # cli.py wrote its one line
            _exit_now(EXIT_INTERRUPTED)
        if (exc.code is None or isinstance(exc.code, int)) and _stage_left_running():
            _exit_now(exc.code or 0)
        raise
    except BaseException:  # KeyboardInterrupt, or the ImportError a C extension makes of it
        if once.received is None:
            raise
        from livecam.errors import EXIT_INTERRUPTED  # (again, if the signal cut it short: signals are ignored now)

        _exit_now(EXIT_INTERRUPTED, "livecam: interrupted\n")


def _stage_left_running() -> bool:
    """Whether a pipeline stage is still running (pipeline.stages.StageThread): a live run that
    ended during a stalled stream's read leaves its capture thread inside FFmpeg, whose interrupt
    callback asks for the interpreter every 0.1 s; once Python had finalised it, the process died
    with "Segmentation fault" (exit 139) after its last line."""
    import sys
    import threading

    stages = sys.modules.get("livecam.pipeline.stages")  # (never loaded: no stage ran)
    return stages is not None and any(isinstance(thread, stages.StageThread) and not thread.done.is_set()
                                      for thread in threading.enumerate())


def _exit_now(code: int, line: str = "") -> None:
    """Ignore further signals, write `line`, flush, and end the process now."""
    import os
    import sys

    for sig in (_signal.SIGINT, _signal.SIGTERM, getattr(_signal, "SIGHUP", None)):
        if sig is not None:
            _signal.signal(sig, _signal.SIG_IGN)
    try:
        if line:
            sys.stderr.write(line)
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stream: the exit status still says it
        pass
    os._exit(code)


if __name__ == "__main__":
    main()
