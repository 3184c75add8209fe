"""The governor: degrade gracefully when the live latency budget is exceeded, recover when not.

Once per interval the pipeline reports the p95 latency from capture to processed of that
interval (the output's own time left out: no step makes a slow display or encoder faster). Over
budget -> apply the next step (the fastest enhancer model where the run holds it, enhancer off,
then detection every 2nd frame with tracking in between where that saves work, then detection
at 320); under 80% of the budget for `recover_s` -> undo the last step.
After a change the next interval is not judged, because it still holds frames processed before
the change; nor is the first interval with frames (model warm-up). The clock is injectable so tests need not sleep.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from livecam.pipeline.contracts import Knobs
from livecam.processors import registry

log = logging.getLogger("livecam")

RECOVER_FRACTION = 0.8
LOW_DET_SIZE = 320


def det_sizes(det_size: int | None) -> tuple[int, ...]:
    """The detector sizes default_steps may set for a run at `det_size`: it and, above
    LOW_DET_SIZE, LOW_DET_SIZE (a lane builds a session for each before the first frame)."""
    if det_size is None:
        return ()
    return (det_size, LOW_DET_SIZE) if det_size > LOW_DET_SIZE else (det_size,)


@dataclass(frozen=True)
class Step:
    name: str  # as shown in logs, --stats and the summary
    apply: Callable[[], None]
    undo: Callable[[], None]


def default_steps(engine: Knobs, *, detect_every: int = 1, det_size: int | None = 640,
                  sparse_detection: bool = True,
                  switch_enhancers: Callable[[bool], None] | None = None) -> list[Step]:
    """The degradation ladder for this engine; steps that cannot help are left out (det_size
    None: the detector's input is fixed, so a smaller det size would change nothing;
    sparse_detection False: a carried frame costs what a detection does, so detecting every 2nd
    frame would save nothing: LiveEngine.sparse_detection_saves).
    `switch_enhancers(on)` turns the run's enhancers (processors.registry) on or off; by default
    straight through the engine (the live pipeline combines it with the e key)."""
    steps: list[Step] = []
    if engine.uses_mask_models:  # the occluder and the parser first: the face stays swapped
        steps.append(Step("mask models off", lambda: engine.set_mask_models(False),
                          lambda: engine.set_mask_models(True)))
    enhancers = registry.with_role(engine.processor_names, "enhancer")
    if enhancers:
        def switch(on: bool) -> None:
            for name in enhancers:
                engine.set_enabled(name, on)

        turn = switch_enhancers or switch
        fast = engine.fast_enhancer
        if fast:  # the fastest enhancer first: the face keeps some restoration
            steps.append(Step(f"enhancer {fast}", lambda: engine.set_fast_enhancer(True),
                              lambda: engine.set_fast_enhancer(False)))
        steps.append(Step("enhancer off", lambda: turn(False), lambda: turn(True)))
    if detect_every < 2 and sparse_detection:
        steps.append(Step("detect every 2nd frame", lambda: engine.set_detect_every(2),
                          lambda: engine.set_detect_every(detect_every)))
    if det_size is not None and LOW_DET_SIZE in det_sizes(det_size)[1:]:
        steps.append(Step(f"detect at {LOW_DET_SIZE}", lambda: engine.set_det_size(LOW_DET_SIZE),
                          lambda: engine.set_det_size(det_size)))
    return steps


class Governor:
    def __init__(self, steps: list[Step], budget_ms: float, *, enabled: bool = True,
                 interval_s: float = 1.0, recover_s: float = 3.0,
                 clock: Callable[[], float] = time.monotonic, skip_first: bool = True) -> None:
        self.steps = steps
        self.budget_ms = budget_ms
        self.enabled = enabled
        self.interval_s = interval_s
        self.recover_s = recover_s
        self._clock = clock
        self.level = 0  # number of steps applied
        self._changed_at: float | None = None
        self._good_since: float | None = None
        self.events: list[dict[str, Any]] = []
        self._warming_up = skip_first

    @property
    def active(self) -> list[str]:
        return [s.name for s in self.steps[: self.level]]

    def observe(self, p95_ms: float | None, now: float | None = None) -> str | None:
        """Judge one interval's p95; returns a description of what was done, if anything."""
        if not self.enabled or p95_ms is None:
            return None
        now = self._clock() if now is None else now
        if self._warming_up:  # the first frames include model warm-up, not steady-state cost
            self._warming_up = False
            return None
        if self._changed_at is not None and now - self._changed_at < self.interval_s * 1.5:
            self._good_since = None
            return None  # this interval still holds frames from before the last change
        if p95_ms > self.budget_ms:
            self._good_since = None
            if self.level < len(self.steps):
                step = self.steps[self.level]
                step.apply()
                self.level += 1
                return self._record(now, "degrade", step.name, p95_ms)
            return None
        if p95_ms >= RECOVER_FRACTION * self.budget_ms:
            self._good_since = None
            return None
        if self._good_since is None:
            self._good_since = now - self.interval_s  # the whole interval just judged was good
        if self.level > 0 and now - self._good_since >= self.recover_s - 1e-9:
            self.level -= 1
            step = self.steps[self.level]
            step.undo()
            self._good_since = None
            return self._record(now, "recover", step.name, p95_ms)
        return None

    def _record(self, now: float, action: str, step: str, p95_ms: float) -> str:
        self._changed_at = now
        if action == "degrade":
            text = (f"p95 latency {p95_ms:.0f} ms over the {self.budget_ms:.0f} ms budget: {step} "
                    f"(degradation level {self.level})")
        else:
            text = (f"p95 latency {p95_ms:.0f} ms under {RECOVER_FRACTION:.0%} of the budget for "
                    f"{self.recover_s:g} s: undo {step} (degradation level {self.level})")
        self.events.append({"action": action, "step": step, "p95_ms": round(p95_ms, 1),
                            "budget_ms": self.budget_ms, "level": self.level})
        log.info("governor: %s", text)
        return text
