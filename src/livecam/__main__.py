"""The `livecam` command and `python -m livecam`: cli.main, with Ctrl-C and SIGTERM already
handled while the CLI's modules load (about half a second): an interrupt then is one line and
exit 130 like any other, never an import traceback."""

from __future__ import annotations

import signal
import sys

from livecam.errors import EXIT_INTERRUPTED
from livecam.pipeline.signals import InterruptOnce, ignore_stop_signals


def main() -> None:
    once = InterruptOnce()  # cli.main's stop_signals() takes this one over (one state)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, once)
    try:
        from livecam.cli import main as cli_main
    except BaseException:  # KeyboardInterrupt, or the ImportError a C extension makes of it
        if once.received is None:
            raise
        ignore_stop_signals()
        sys.stderr.write("livecam: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    cli_main()


if __name__ == "__main__":
    main()
