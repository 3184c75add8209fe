"""The governor: degrade one step over budget, undo after 3 s under 80%; with a fake clock and
with the real pipeline on a processor whose cost the test switches."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from livecam.pipeline.governor import Governor, default_steps
from livecam.pipeline.live import LivePipeline
from tests.doubles import MemorySink, SyntheticSource
from tests.pipeline.test_live import FakeEngine, opts


def make(engine: FakeEngine, **kw: object) -> Governor:
    return Governor(default_steps(engine, detect_every=1, det_size=640), 40.0, **kw)  # type: ignore[arg-type]


def test_degrades_one_step_at_a_time_then_recovers_in_reverse(caplog: pytest.LogCaptureFixture) -> None:
    engine = FakeEngine(processors=("face_swapper", "face_enhancer"))
    gov = make(engine)
    caplog.set_level(logging.INFO, logger="livecam")
    t = 0.0
    assert gov.observe(30.0, t) is None and gov.level == 0  # within budget
    t += 1
    assert "enhancer off" in (gov.observe(55.0, t) or "")
    assert engine.enabled["face_enhancer"] is False and gov.level == 1
    t += 1
    assert gov.observe(55.0, t) is None  # this interval still has frames from before the change
    t += 1
    gov.observe(55.0, t)
    assert engine.detect_every == 2 and gov.level == 2
    t += 2
    gov.observe(55.0, t)
    assert engine.det_size == 320 and gov.level == 3
    t += 2
    assert gov.observe(90.0, t) is None and gov.level == 3  # nothing left to give up
    for _ in range(2):
        t += 1
        assert gov.observe(20.0, t) is None
    t += 1
    assert "undo detect at 320" in (gov.observe(20.0, t) or "")
    assert engine.det_size == 640 and gov.level == 2
    t += 1
    gov.observe(35.0, t)  # between 80% and 100%: hold, and the good streak restarts
    for _ in range(2):
        t += 1
        gov.observe(20.0, t)
    assert gov.level == 2
    t += 1
    gov.observe(20.0, t)
    assert gov.level == 1 and engine.detect_every == 1
    assert [e["action"] for e in gov.events] == ["degrade", "degrade", "degrade", "recover", "recover"]
    assert "p95 latency 55 ms over the 40 ms budget: enhancer off" in caplog.text


def test_steps_that_cannot_help_are_left_out_and_no_degrade_does_nothing() -> None:
    engine = FakeEngine(processors=("face_swapper",))
    assert [s.name for s in default_steps(engine, detect_every=1, det_size=320)] == ["detect every 2nd frame"]
    # A detector with a fixed input (BlazeFace, det_size None): a smaller det size changes
    # nothing, so it is no step (it used to be applied, logged and counted as a degradation).
    assert [s.name for s in default_steps(engine, detect_every=1, det_size=None)] == ["detect every 2nd frame"]
    # A carried frame that costs what a detection does (BlazeFace without landmarks:
    # FaceAnalyser.sparse_detection_saves) saves nothing: no step, the ladder goes on past it.
    assert [s.name for s in default_steps(engine, detect_every=1, det_size=640, sparse_detection=False)] == \
        ["detect at 320"]
    gov = make(engine, enabled=False)
    assert gov.observe(500.0, 1.0) is None and engine.calls == []
    assert make(engine).observe(None, 1.0) is None


def test_pipeline_degrades_and_recovers_when_the_processor_cost_is_switched(tmp_path: Path) -> None:
    # The enhancer costs 80 ms at first (over a 40 ms budget), then the test makes it free.
    engine = FakeEngine(process_s=0.002, enhancer_s=0.08, processors=("face_swapper", "face_enhancer"))
    stats = tmp_path / "s.jsonl"
    engine.det_size = 320
    options = opts(max_latency_ms=40, interval_s=0.2, recover_s=0.6, stats_json=stats)
    pipeline = LivePipeline(engine, SyntheticSource(fps=50, frames=None), MemorySink(keep=2), options)

    def drive() -> None:
        deadline = time.monotonic() + 8
        while engine.enabled["face_enhancer"] and time.monotonic() < deadline:
            time.sleep(0.02)
        engine.enhancer_s = 0.0  # the switch: now the enhancer is cheap
        # On a starved machine the governor may take a further step before it recovers (the
        # pipeline's own threads stay over budget): wait for the enhancer to be back, not for any recovery.
        while not engine.enabled["face_enhancer"] and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        pipeline.stop()

    driver = threading.Thread(target=drive)
    driver.start()
    result = pipeline.run()
    driver.join()
    steps = [(e["action"], e["step"]) for e in result.summary["degradations"]]
    assert steps[0] == ("degrade", "enhancer off") and ("recover", "enhancer off") in steps, steps
    switches = [call[1] for call in engine.calls if call[0] == "enabled"]
    assert switches[:2] == [("face_enhancer", False), ("face_enhancer", True)], engine.calls
    lines = [json.loads(line) for line in stats.read_text().splitlines()]
    assert any(r.get("degraded") == ["enhancer off"] for r in lines[:-1])
    assert lines[-1]["summary"]["degradations"] == result.summary["degradations"]


def test_the_pipeline_asks_the_engine_whether_sparse_detection_saves_work() -> None:
    # with the default BlazeFace and a processor that needs no landmarks, "detect every 2nd
    # frame" was applied and counted as a degradation while the analysis took as long
    engine = FakeEngine(processors=("face_swapper", "face_enhancer"))
    engine.det_size = None  # type: ignore[assignment]
    engine.sparse_detection_saves = False
    pipeline = LivePipeline(engine, SyntheticSource(frames=1), MemorySink(), opts())
    assert [s.name for s in pipeline.governor.steps] == ["enhancer off"]
    engine.sparse_detection_saves = True
    pipeline = LivePipeline(engine, SyntheticSource(frames=1), MemorySink(), opts())
    assert [s.name for s in pipeline.governor.steps] == ["enhancer off", "detect every 2nd frame"]


def test_mask_models_go_first_and_come_back_last() -> None:
    # --face-mask occlusion/region: the occluder and the parser are the first thing given up
    # (the face stays swapped, under the plain box and landmark areas), before the enhancer.
    engine = FakeEngine(processors=("face_swapper", "face_enhancer"))
    engine.uses_mask_models = True  # type: ignore[misc]
    steps = default_steps(engine, detect_every=1, det_size=None)
    assert [s.name for s in steps] == ["mask models off", "enhancer off", "detect every 2nd frame"]
    steps[0].apply()
    steps[0].undo()
    assert engine.calls == [("mask_models", False), ("mask_models", True)]


def test_the_fastest_enhancer_comes_before_enhancer_off_and_goes_after_it() -> None:
    # A live run holding gpen_bfr_256 beside a slower enhancer: over budget it first switches to
    # the fast model (the face stays restored), then switches the enhancer off; undone in reverse.
    engine = FakeEngine(processors=("face_swapper", "face_enhancer"))
    engine.fast_enhancer = "gpen_bfr_256"
    gov = make(engine)
    assert [s.name for s in gov.steps][:2] == ["enhancer gpen_bfr_256", "enhancer off"]
    t = 0.0
    gov.observe(30.0, t)  # warm-up interval
    t += 1
    assert "enhancer gpen_bfr_256" in (gov.observe(55.0, t) or "")
    assert engine.calls == [("fast_enhancer", True)] and engine.enabled["face_enhancer"] is True
    t += 2
    assert "enhancer off" in (gov.observe(55.0, t) or "")
    assert engine.enabled["face_enhancer"] is False and gov.level == 2
    t = _recover_one(gov, t)
    assert gov.level == 1 and engine.enabled["face_enhancer"] is True  # on again, still the fast model
    assert engine.calls[-1] == ("enabled", ("face_enhancer", True))
    _recover_one(gov, t)
    assert gov.level == 0 and engine.calls[-1] == ("fast_enhancer", False)


def _recover_one(gov: Governor, t: float) -> float:
    """Good intervals, one a second, until the governor undoes a step; returns the time."""
    level = gov.level
    for _ in range(10):
        t += 1
        gov.observe(20.0, t)
        if gov.level != level:
            return t
    raise AssertionError("the governor undid nothing in 10 s under budget")


def test_without_a_fast_model_or_an_enhancer_there_is_no_switch_step() -> None:
    engine = FakeEngine(processors=("face_swapper", "face_enhancer"))
    assert "enhancer off" in [s.name for s in default_steps(engine)]
    assert not any(s.name.startswith("enhancer gpen") for s in default_steps(engine))
    engine = FakeEngine(processors=("face_swapper",))
    engine.fast_enhancer = "gpen_bfr_256"  # held by no enhancer of this run: nothing to switch
    assert not any("enhancer" in s.name for s in default_steps(engine))


def test_a_slow_consumer_does_not_make_the_governor_degrade_the_swap(tmp_path: Path) -> None:
    # A sink that takes 0.4 s a frame (a remote display, a stalled virtual camera reader, a slow
    # encoder) put every frame over budget, and the governor turned the enhancer off and detected
    # less often, which cannot make the output faster. It judges capture -> processed now.
    class SlowSink(MemorySink):
        def write(self, image_bgr: np.ndarray) -> None:
            time.sleep(0.4)
            super().write(image_bgr)

    engine = FakeEngine(process_s=0.002, processors=("face_swapper", "face_enhancer"))
    stats = tmp_path / "s.jsonl"
    result = LivePipeline(engine, SyntheticSource(fps=30, frames=90), SlowSink(keep=1),
                          opts(max_latency_ms=200, interval_s=0.3, stats_json=stats)).run()
    assert result.summary["degradations"] == [] and engine.enabled["face_enhancer"]
    records = [json.loads(line) for line in stats.read_text().splitlines()[:-1]]
    judged = [r for r in records if r["frames"]]
    assert len(judged) >= 3  # intervals the governor judged (the first is warm-up)
    # the stats say where the time goes: the output, not the processing
    assert all(r["latency_ms_p95"] > 200 > r["processed_ms_p95"] for r in judged)
