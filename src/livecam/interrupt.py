"""InterruptOnce, the process's SIGINT/SIGTERM handler: the first signal raises KeyboardInterrupt,
later ones are ignored, so a second Ctrl-C cannot break the cleanup of the first (or interpreter
shutdown) with a traceback. This module imports nothing, so livecam.__main__ installs the handler
before anything else loads; pipeline/signals.py builds the rest of the signal mechanism on it."""


class InterruptOnce:
    def __init__(self) -> None:
        self.received: int | None = None
        self.done = False  # the output is complete: a signal now changes nothing

    def __call__(self, signum: int, frame: object) -> None:
        if self.received is not None or self.done:
            return
        self.received = signum
        raise KeyboardInterrupt
