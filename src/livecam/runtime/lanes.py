"""Lanes: on a GPU provider, K threads that each own a full set of sessions.

ONNX Runtime serialises concurrent runs of one TensorRT session, and a CUDA graph belongs to one
session's stream, so workers sharing the pool's sessions do not overlap on a GPU. A lane is one
worker thread with its own sessions of every model (the detector at its fixed size, the swapper,
the enhancer), created with `ProviderChoice.for_lane(k)` (the pool keys on it) and run through
IO binding with buffers bound once (runtime/binding.py). `Engine.lanes()` builds one Engine per
lane; the file pipeline's worker i uses lane i. On the CPU provider the shared pool stays: one
session's intra-op threads already fill the cores.

On a GPU (`uses_device_fronts`) a lane's models also get sessions with graphs joined around them
(runtime/graphs.Front), so that only uint8 pixels cross the bus: the detector takes the frame
(its letterbox in front), the swapper and the enhancer take the CPU's uint8 crop and give back
the uint8 result (graphs.pixel_front: the blob in front, the conversion to uint8 BGR after).

With CUDA graphs (RuntimeSettings.cuda_graphs) a lane also has a `LaneThread` that makes all of
its model calls: ONNX Runtime keeps captured graphs per calling thread.

RuntimeSettings.lanes: None chooses by provider (LANE_PROVIDERS), True forces lanes on any
provider (this is how the lane machinery is tested on the CPU, and how scripts/gpu_bench.py's
CPU smoke run checks the GPU path), False keeps the shared pool.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, TypeVar

from livecam.runtime.providers import LANE_PROVIDERS, ProviderChoice
from livecam.settings import RuntimeSettings

T = TypeVar("T")

DEFAULT_LANES = 3  # issue 17's choice, not yet measured here: scripts/gpu_bench.py's overlap part times 1-6 lanes


def uses_lanes(providers: ProviderChoice, runtime: RuntimeSettings) -> bool:
    if runtime.lanes is not None:
        return runtime.lanes
    return providers.primary in LANE_PROVIDERS


def uses_device_fronts(providers: ProviderChoice) -> bool:
    """Whether a lane's models get their graphs joined around them (runtime/graphs.Front): on
    the GPU, where they save the float blobs' uploads, the float outputs' downloads and the
    CPU's letterbox and conversions."""
    return providers.lane is not None and providers.device == "cuda"


def lane_count(runtime: RuntimeSettings) -> int:
    """K: --execution-threads when given, else DEFAULT_LANES."""
    return max(1, runtime.execution_threads) if runtime.explicit_threads else DEFAULT_LANES


class LaneThread:
    """The one thread that runs every model call of one lane, when CUDA graphs are on.

    ONNX Runtime's CUDA and TensorRT providers keep a session's captured graphs, and its count of
    runs before a capture, per calling thread (the provider's per-thread context, kept while
    graphs are on). A graph captured by the lane warm-up on the thread that built the lanes is
    not the one a pipeline worker would replay: the worker would capture its own on its third
    frame, while the other lanes copy (which fails them), and the workers of each file of a
    folder again. So a lane's calls (Engine.analyse, process and the warm-ups) are handed to
    this thread, which lives as long as the lane: the warm-up's captures are the ones every
    frame replays. One call at a time, in the order given; the caller waits for its result or
    its exception."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], threading.Event, list[Any]] | None] = \
            queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def name(self) -> str:
        return self._thread.name

    def is_current(self) -> bool:
        return threading.current_thread() is self._thread

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) on this thread (here when called from it); its result, or its exception raised."""
        if self.is_current():
            return fn(*args)
        done = threading.Event()
        outcome: list[Any] = []
        self._calls.put((lambda: fn(*args), done, outcome))
        while not done.wait(0.05):  # a model call takes milliseconds; never wait on a dead thread
            if not self._thread.is_alive():
                raise RuntimeError(f"{self.name} has stopped")
        ok, value = outcome
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """End the thread after the calls already given (the lane is gone)."""
        self._calls.put(None)

    def _serve(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            fn, done, outcome = item
            try:
                outcome[:] = [True, fn()]
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                outcome[:] = [False, exc]
            finally:
                del fn, item
                done.set()
