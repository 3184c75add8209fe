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

RuntimeSettings.lanes: None chooses by provider (LANE_PROVIDERS), True forces lanes on any
provider (this is how the lane machinery is tested on the CPU, and how scripts/gpu_bench.py's
CPU smoke run checks the GPU path), False keeps the shared pool.
"""

from __future__ import annotations

from livecam.runtime.providers import LANE_PROVIDERS, ProviderChoice
from livecam.settings import RuntimeSettings

DEFAULT_LANES = 3  # measured on the H200 (issue 17): 3 overlapping lanes keep the GPU busy


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
