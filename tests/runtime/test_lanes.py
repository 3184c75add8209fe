"""Lanes on the CPU provider (RuntimeSettings.lanes=True forces them, as runtime/lanes.py says):
each lane owns its sessions, frames come out in order, and the pixels are those of the shared
path."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.frame import FramePacket
from livecam.pipeline.engine import Engine
from livecam.pipeline.file import OutFrame, run_frames
from livecam.runtime import sessions
from livecam.runtime.binding import BoundSession
from livecam.runtime.lanes import DEFAULT_LANES, lane_count, uses_lanes
from livecam.runtime.providers import resolve_providers
from livecam.settings import AnalysisSettings, ProcessingSettings, RuntimeSettings, SwapSettings


pytestmark = pytest.mark.usefixtures("fresh_pool")  # tests/runtime/conftest.py


def settings(models: Path, source: Path, *, lanes: bool | None, threads: int = 3,
             smoothing: float = 0.0) -> ProcessingSettings:
    runtime = RuntimeSettings(providers=("cpu",), models_dir=models, offline=True, unverified_models=True,
                              quiet=True, execution_threads=threads, explicit_threads=True, lanes=lanes)
    return ProcessingSettings(sources=(source,), frame_processors=("face_swapper",), runtime=runtime,
                              analysis=AnalysisSettings(smoothing=smoothing), swap=SwapSettings(model="inswapper_128"))


def small(faces_dir: Path, name: str, tmp_path: Path) -> Path:
    img = cv2.imread(str(faces_dir / name))
    out = tmp_path / f"small_{Path(name).stem}.png"
    cv2.imwrite(str(out), cv2.resize(img, (img.shape[1] // 2, img.shape[0] // 2), interpolation=cv2.INTER_AREA))
    return out


def sessions_of(engine: Engine) -> list[Any]:
    """Every ORT session the engine's analyser and processors hold (one attribute level down)."""
    found = []
    holders = [engine.analyser, *engine.processors]
    holders += [v for h in list(holders) for v in vars(h).values()
                if hasattr(v, "__dict__") and not hasattr(v, "get_inputs")]
    for holder in holders:
        found += [v for v in vars(holder).values() if hasattr(v, "get_inputs") and hasattr(v, "run")]
    return list({id(s): s for s in found}.values())


def clip(faces_dir: Path, tmp_path: Path, n: int = 8) -> list[np.ndarray]:
    """Frames that move: the photo shifted a few pixels each frame."""
    base = cv2.imread(str(small(faces_dir, "obama.jpg", tmp_path)))
    return [np.roll(base, 3 * i, axis=1) for i in range(n)]


def run(engine: Engine, frames: list[np.ndarray], lanes: list[Engine]) -> list[FramePacket]:
    out: list[FramePacket] = []
    run_frames((OutFrame(f.copy(), i / 25) for i, f in enumerate(frames)), out.append, engine,
               workers=3, label=False, max_in_flight=6, lanes=lanes)
    return out


def test_the_cpu_provider_keeps_the_shared_pool_unless_lanes_are_forced() -> None:
    cpu = resolve_providers(["cpu"])
    cuda = replace(cpu, names=("cuda", "cpu"))
    assert not uses_lanes(cpu, RuntimeSettings())
    assert uses_lanes(cuda, RuntimeSettings())
    assert uses_lanes(cpu, RuntimeSettings(lanes=True))
    assert not uses_lanes(cuda, RuntimeSettings(lanes=False))
    assert lane_count(RuntimeSettings(execution_threads=4)) == DEFAULT_LANES == 3  # not given: the default
    assert lane_count(RuntimeSettings(execution_threads=5, explicit_threads=True)) == 5


def test_each_lane_owns_its_sessions(tmp_path: Path, faces_dir: Path, standin_models: Path) -> None:
    source = small(faces_dir, "biden.jpg", tmp_path)
    shared = Engine.create(settings(standin_models, source, lanes=None), live=False, progress=False)
    assert shared.lanes() == []  # CPU provider: the shared pool
    engine = Engine.create(settings(standin_models, source, lanes=True), live=False, progress=False)
    lanes = engine.lanes()
    assert len(lanes) == 3 and engine.lanes() is lanes  # built once
    main = {id(s) for s in sessions_of(engine)}
    per_lane = [{id(s) for s in sessions_of(lane)} for lane in lanes]
    for k, ids in enumerate(per_lane):
        # detector, landmarker, swapper: all of them the lane's own, bound to buffers; no
        # embedder, which frames need only for --reference or --map (the source is embedded once)
        assert len(ids) >= 3 and not ids & main
        assert lanes[k].analyser.embedder is None and engine.analyser.embedder is not None
        assert all(isinstance(s, BoundSession) for s in sessions_of(lanes[k]))
        assert lanes[k].providers.lane == k
        for other in per_lane[k + 1:]:
            assert not ids & other
    assert not any(isinstance(s, BoundSession) for s in sessions_of(engine))
    # The knobs reach every lane.
    engine.set_det_size(320)
    engine.set_enabled("face_swapper", False)
    assert all(not lane.is_enabled("face_swapper") for lane in lanes)
    engine.set_enabled("face_swapper", True)
    assert all(lane.sources == engine.sources for lane in lanes)


def test_a_live_run_analyses_on_its_analysis_lane(tmp_path: Path, faces_dir: Path, standin_models: Path) -> None:
    """Live with lanes: analyse(track=True), the live pipeline's one analysis thread, runs on a
    lane of its own (lane K, sessions bound to buffers, no processors) with the run's knobs, and
    finds and tracks what the shared pool's analyser finds on the same frames."""
    source = small(faces_dir, "biden.jpg", tmp_path)
    frames = clip(faces_dir, tmp_path, n=5)
    shared = Engine.create(settings(standin_models, source, lanes=False, threads=2), live=True, progress=False)
    shared.set_detect_every(2)
    expected = []
    for i, frame in enumerate(frames):
        packet = FramePacket(index=i, image=frame.copy(), captured_at=i / 25)
        shared.analyse(packet, track=True)
        expected.append(packet.faces)
    engine = Engine.create(settings(standin_models, source, lanes=True, threads=2), live=True, progress=False)
    lanes = engine.lanes()
    tracking = engine.analysis_lane
    assert tracking is not None and tracking.providers.lane == len(lanes) == 2 and not tracking.processors
    assert all(isinstance(s, BoundSession) for s in sessions_of(tracking))
    assert not {id(s) for s in sessions_of(tracking)} & {id(s) for lane in lanes for s in sessions_of(lane)}
    engine.set_detect_every(2)  # the governor's knob reaches it
    assert tracking.analyser.detect_every == 2
    for i, frame in enumerate(frames):
        packet = FramePacket(index=i, image=frame.copy(), captured_at=i / 25)
        engine.analyse(packet, track=True)
        assert [(f.track_id, f.bbox.tolist()) for f in packet.faces] == [
            (f.track_id, f.bbox.tolist()) for f in expected[i]], i
    assert engine.analyser._carried is None and tracking.analyser._carried  # the run's own tracked nothing
    engine.reset_tracking()
    assert tracking.analyser._carried is None


@pytest.mark.parametrize("smoothing", [0.0, 0.5])
def test_lanes_give_the_shared_paths_pixels_in_order(tmp_path: Path, faces_dir: Path, standin_models: Path,
                                                    smoothing: float) -> None:
    """With and without the ordered tracking step (smoothing): no deadlock, same frames."""
    source = small(faces_dir, "biden.jpg", tmp_path)
    frames = clip(faces_dir, tmp_path)
    shared = Engine.create(settings(standin_models, source, lanes=False, smoothing=smoothing), live=False, progress=False)
    expected = run(shared, frames, [])
    engine = Engine.create(settings(standin_models, source, lanes=True, smoothing=smoothing), live=False, progress=False)
    got = run(engine, frames, engine.lanes())
    assert [p.index for p in got] == list(range(len(frames)))
    assert all(p.faces for p in got)
    for want, have, original in zip(expected, got, frames):
        assert not np.array_equal(have.image, original)  # swapped
        assert np.array_equal(want.image, have.image)


def test_live_pipeline_process_workers_are_the_lanes(tmp_path: Path, faces_dir: Path, standin_models: Path) -> None:
    """`livecam run`: analysis on the run's engine, process worker i on lane i; every frame out
    in order with the shared path's pixels."""
    from livecam.pipeline.live import LiveRun, run_live_pipeline
    from livecam.settings import LiveJob
    from tests.doubles import MemorySink, SyntheticSource

    source = small(faces_dir, "biden.jpg", tmp_path)
    photo = clip(faces_dir, tmp_path, n=1)[0]

    def live(lanes: bool) -> list[np.ndarray]:
        processing = settings(standin_models, source, lanes=lanes)
        engine = Engine.create(processing, live=True, progress=False)
        used: list[int] = []
        lane_engines = engine.lanes()
        for k, lane in enumerate(lane_engines):
            original = lane.process

            def counted(packet: FramePacket, k: int = k, original: Any = original) -> None:
                used.append(k)
                original(packet)

            lane.process = counted  # type: ignore[method-assign]
        run = LiveRun(LiveJob(processing=processing, realtime=False, output="none", label=False, degrade=False),
                      lanes=lane_engines, handle_signals=False)
        assert run.workers == 3
        sink = MemorySink()
        frames = SyntheticSource(photo.shape[1], photo.shape[0], frames=6, live=False, realtime=False, image=photo)
        run_live_pipeline(engine, frames, sink, run)
        assert bool(used) == lanes and set(used) <= {0, 1, 2}
        return [f for f in sink.frames]

    shared, laned = live(False), live(True)
    assert len(shared) == len(laned) == 6
    assert all(np.array_equal(a, b) for a, b in zip(shared, laned))


def test_lane_detectors_take_the_uint8_frame_where_fronts_are_on(tmp_path: Path, faces_dir: Path, standin_models: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU a lane's SCRFD runs with its letterbox joined in front (uint8 up); here the
    switch is forced on the CPU: the lanes use it, the run's engine does not, frames come out."""
    from tests.standins.scrfd import build_scrfd

    monkeypatch.setattr("livecam.runtime.lanes.uses_device_fronts", lambda providers: providers.lane is not None)
    build_scrfd(standin_models / "det_10g.onnx")
    source = small(faces_dir, "biden.jpg", tmp_path)
    engine = Engine.create(settings(standin_models, source, lanes=True), live=False, progress=False)
    assert engine.analyser.detector.joined is None  # type: ignore[attr-defined]
    lanes = engine.lanes()
    for lane in lanes:
        joined = lane.analyser.detector.joined  # type: ignore[attr-defined]
        assert isinstance(joined, BoundSession) and joined.get_inputs()[0].name == "pre_image"
    frames = clip(faces_dir, tmp_path, n=4)
    out = run(engine, frames, lanes)
    assert [p.index for p in out] == [0, 1, 2, 3] and all(p.faces for p in out)


def test_a_front_that_cannot_be_joined_leaves_the_plain_path(tmp_path: Path, standin_models: Path) -> None:
    from livecam.models.store import ModelStore
    from livecam.runtime.graphs import Front

    def broken(opset: int) -> Any:
        raise ValueError("no such graph")

    store = ModelStore(RuntimeSettings(models_dir=standin_models, offline=True, unverified_models=True, quiet=True))
    choice = resolve_providers(["cpu"]).for_lane(0)
    assert store.open_session("w600k_r50", choice, 1, front=Front("broken", broken, "input.1")) is None
    assert store.open_session("w600k_r50", choice, 1) is not None


def test_with_cuda_graphs_every_lane_is_warmed_in_turn_before_any_frame(tmp_path: Path, faces_dir: Path,
                                                                        standin_models: Path) -> None:
    source = small(faces_dir, "biden.jpg", tmp_path)
    processing = settings(standin_models, source, lanes=True)
    graphs = replace(processing, runtime=replace(processing.runtime, cuda_graphs=True))
    for chosen, warmed in ((processing, False), (graphs, True)):
        sessions.clear_pool()
        engine = Engine.create(chosen, live=False, progress=False)
        swappers = [s for lane in engine.lanes() for s in sessions_of(lane) if s.get_inputs()[0].name == "target"]
        assert len(swappers) == 3
        assert all(bool(s._bound) == warmed for s in swappers)  # buffers bound: it has run


def test_live_lanes_keep_the_order_and_the_drop_rule() -> None:
    """A live source faster than the lanes: frames are dropped (never queued), the ones shown
    come out in order, drops and frames add up, and only the lanes process."""
    from livecam.pipeline.live import run_live_pipeline
    from tests.doubles import MemorySink, SyntheticSource
    from tests.pipeline.test_live import FakeEngine, indices, opts

    class CountingLane(FakeEngine):
        def process(self, packet: FramePacket) -> None:
            self.calls.append(("process", packet.index))
            super().process(packet)

    main = CountingLane()
    lanes = [CountingLane(process_s=0.03, jitter=True) for _ in range(3)]
    sink = MemorySink()
    result = run_live_pipeline(main, SyntheticSource(frames=60, fps=100), sink, opts(lanes=lanes, degrade=False))
    got = indices(sink)
    assert got == sorted(set(got)), got
    summary = result.summary
    assert summary["frames"] == len(got) and summary["frames"] + summary["dropped"] == 60
    assert not main.calls and sum(bool(lane.calls) for lane in lanes) >= 2
    assert sum(len(lane.calls) for lane in lanes) >= len(got)
