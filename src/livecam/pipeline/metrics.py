"""Live metrics: per-frame latency and stage times, per-second records, the final summary.

Frames are recorded by the output stage only; drops may be counted from any thread. Whole-run
latency percentiles come from a fixed-size histogram so memory does not grow with run length.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import defaultdict
from typing import Any, Callable, Mapping

import numpy as np

from livecam.frame import FramePacket

log = logging.getLogger("livecam")

# Latency histogram: 0.1 ms bins up to 1 s (what live runs see), then bins growing by 0.1% of
# their value up to 120 s (slow CPU runs of the full-size models take seconds per frame).
_HIST_BIN_MS = 0.1
_HIST_LINEAR_MS = 1_000.0
_HIST_RATIO = 1.001
_HIST_MAX_MS = 120_000.0


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


class LatencyHistogram:
    """Fixed-memory latency distribution: 0.1 ms resolution below 1 s, 0.1% of the value from
    1 s to 120 s (about 14800 bins in all); longer latencies count in the last bin."""

    def __init__(self) -> None:
        self._linear_bins = int(round(_HIST_LINEAR_MS / _HIST_BIN_MS))
        self._log_step = float(np.log(_HIST_RATIO))
        log_bins = int(np.ceil(np.log(_HIST_MAX_MS / _HIST_LINEAR_MS) / self._log_step))
        self._counts = np.zeros(self._linear_bins + log_bins, dtype=np.int64)
        self.count = 0

    def _index(self, ms: float) -> int:
        ms = max(ms, 0.0) if ms == ms else 0.0  # NaN counts as 0
        if ms < _HIST_LINEAR_MS:
            idx = int(ms / _HIST_BIN_MS)
        else:
            idx = self._linear_bins + int(np.log(min(ms, _HIST_MAX_MS) / _HIST_LINEAR_MS) / self._log_step)
        return min(idx, len(self._counts) - 1)

    def _value(self, idx: int) -> float:
        """A bin's representative value: its middle (geometric middle for the growing bins)."""
        if idx < self._linear_bins:
            return (idx + 0.5) * _HIST_BIN_MS
        return min(_HIST_LINEAR_MS * float(np.exp((idx - self._linear_bins + 0.5) * self._log_step)), _HIST_MAX_MS)

    def add(self, ms: float) -> None:
        self._counts[self._index(float(ms))] += 1
        self.count += 1

    def percentile(self, q: float) -> float | None:
        if self.count == 0:
            return None
        rank = q / 100.0 * self.count
        idx = int(np.searchsorted(np.cumsum(self._counts), max(rank, 1), side="left"))
        return self._value(idx)


class ResourceProbe:
    """Process RSS (psutil, else /proc/self/statm) and GPU memory (NVML when importable)."""

    def __init__(self) -> None:
        self._process: Any = None
        try:
            import psutil

            self._process = psutil.Process()
        except Exception:  # noqa: BLE001 - optional dependency
            self._process = None
        self._nvml: Any = None
        self._gpu: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # noqa: BLE001 - no NVIDIA driver or nvidia-ml-py: no GPU figure
            self._nvml = None

    def rss_mb(self) -> float | None:
        try:
            if self._process is not None:
                return self._process.memory_info().rss / 2**20
            with open("/proc/self/statm", encoding="ascii") as fh:
                return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except Exception:  # noqa: BLE001 - platform without either source
            return None

    def gpu_mb(self) -> float | None:
        if self._nvml is None:
            return None
        try:
            pid = os.getpid()
            for proc in self._nvml.nvmlDeviceGetComputeRunningProcesses(self._gpu):
                if proc.pid == pid and proc.usedGpuMemory is not None:
                    return proc.usedGpuMemory / 2**20
            return self._nvml.nvmlDeviceGetMemoryInfo(self._gpu).used / 2**20
        except Exception:  # noqa: BLE001
            return None

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
            self._nvml = None


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


class LiveMetrics:
    """Collects what the live pipeline reports; `tick` closes one interval's record."""

    def __init__(self, *, clock: Callable[[], float] = time.perf_counter, interval_s: float = 1.0,
                 probe: ResourceProbe | None = None) -> None:
        self._clock = clock
        self.interval_s = interval_s
        self._probe = probe
        self._lock = threading.Lock()
        self._drops: dict[str, int] = defaultdict(int)
        self.started_at = clock()
        self._first_output: float | None = None
        self._last_output: float | None = None
        self.frames = 0
        self.captured = 0
        self._hist = LatencyHistogram()
        self._window_start = self.started_at
        self._win_latency: list[float] = []
        self._win_processed: list[float] = []  # capture -> processed, ms (what the governor judges)
        self._win_stages: dict[str, list[float]] = defaultdict(list)
        self._win_queues: dict[str, int] = {}
        self._win_captured = 0
        self._win_drops: dict[str, int] = defaultdict(int)
        self.last: dict[str, Any] = {}

    # -- from any thread ----------------------------------------------------------------------
    def drop(self, reason: str) -> None:
        with self._lock:
            self._drops[reason] += 1
            self._win_drops[reason] += 1

    def captured_frame(self) -> None:
        with self._lock:
            self.captured += 1
            self._win_captured += 1

    # -- output thread only ---------------------------------------------------------------------
    def frame(self, packet: FramePacket, output_at: float, queue_depths: Mapping[str, int],
              processed_at: float | None = None) -> float:
        """Record one shown frame (processed at `processed_at`, when known); returns its
        capture-to-output latency in ms."""
        latency_ms = (output_at - packet.captured_at) * 1000.0
        if processed_at is not None:
            self._win_processed.append((processed_at - packet.captured_at) * 1000.0)
        self.frames += 1
        if self._first_output is None:
            self._first_output = output_at
        self._last_output = output_at
        self._hist.add(latency_ms)
        self._win_latency.append(latency_ms)
        for stage, ms in packet.timings.items():
            self._win_stages[stage].append(ms)
        for name, depth in queue_depths.items():
            self._win_queues[name] = max(self._win_queues.get(name, 0), depth)
        return latency_ms

    def due(self, now: float) -> bool:
        return now - self._window_start >= self.interval_s

    def window_processed_p95(self) -> float | None:
        """This interval's p95 from capture to processed (the output's own time left out)."""
        return percentile(self._win_processed, 95)

    def tick(self, now: float, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Close the current interval and return its record (one line of --stats-json)."""
        span = max(now - self._window_start, 1e-9)
        with self._lock:
            drops = dict(self._win_drops)
            self._win_drops.clear()
            captured = self._win_captured
            self._win_captured = 0
            total_dropped = sum(self._drops.values())
        record: dict[str, Any] = {
            "time_s": round(now - self.started_at, 3),
            "frames": len(self._win_latency),
            "fps": round(len(self._win_latency) / span, 2),
            "capture_fps": round(captured / span, 2),
            "latency_ms_p50": _r(percentile(self._win_latency, 50)),
            "latency_ms_p95": _r(percentile(self._win_latency, 95)),
            "processed_ms_p95": _r(percentile(self._win_processed, 95)),
            "stage_ms": {k: round(float(np.mean(v)), 2) for k, v in self._win_stages.items() if v},
            "queue_depth": dict(self._win_queues),
            "dropped": drops,
            "dropped_total": total_dropped,
            "rss_mb": _r(self._probe.rss_mb()) if self._probe else None,
            "gpu_mb": _r(self._probe.gpu_mb()) if self._probe else None,
        }
        if extra:
            record.update(extra)
        self._window_start = now
        self._win_latency = []
        self._win_processed = []
        self._win_stages = defaultdict(list)
        self._win_queues = {}
        self.last = record
        return record

    @property
    def dropped(self) -> dict[str, int]:
        with self._lock:
            return dict(self._drops)

    def summary(self, **extra: Any) -> dict[str, Any]:
        """The run's totals, once its stages have stopped: every captured frame is shown, dropped
        or left in the pipeline at a stop (a limit, a key, a signal), which is no drop."""
        fps: float | None = None  # one frame has no rate (0.0 read as a stalled run)
        if self._first_output is not None and self._last_output is not None and self.frames > 1:
            fps = round((self.frames - 1) / max(self._last_output - self._first_output, 1e-9), 2)
        drops = self.dropped
        out: dict[str, Any] = {
            "frames": self.frames,
            "fps": fps,
            "latency_ms_p50": _r(self._hist.percentile(50)),
            "latency_ms_p95": _r(self._hist.percentile(95)),
            "dropped": sum(drops.values()),
            "dropped_by_reason": drops,
            "captured": self.captured,
            "left_at_stop": max(0, self.captured - self.frames - sum(drops.values())),
            "duration_s": round(self._clock() - self.started_at, 3),
        }
        out.update(extra)
        return out

    def overlay_lines(self) -> list[str]:
        """The text --stats draws, from the last closed interval."""
        rec = self.last
        if not rec:
            return ["livecam: measuring..."]
        lines = [f"{rec['fps']:.1f} FPS  p50 {rec['latency_ms_p50'] or 0:.0f} ms  "
                 f"p95 {rec['latency_ms_p95'] or 0:.0f} ms  dropped {rec['dropped_total']}"]
        stages = "  ".join(f"{k} {v:.1f}" for k, v in rec["stage_ms"].items())
        if stages:
            lines.append(stages + " ms")
        mem = []
        if rec.get("rss_mb") is not None:
            mem.append(f"RSS {rec['rss_mb']:.0f} MB")
        if rec.get("gpu_mb") is not None:
            mem.append(f"GPU {rec['gpu_mb']:.0f} MB")
        if rec.get("degraded"):
            mem.append("degraded: " + ", ".join(rec["degraded"]))
        if mem:
            lines.append("  ".join(mem))
        return lines
