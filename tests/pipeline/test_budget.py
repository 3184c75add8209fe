"""The memory plan of a `livecam video` run (pipeline/budget.py): bytes, not frame counts."""

from __future__ import annotations

import logging

import pytest

from livecam.errors import InputError
from livecam.pipeline import budget
from livecam.pipeline.budget import GB, MB, check_execution_threads, plan_video

RESIDENT = 200 * MB  # what the process holds with its models loaded


@pytest.fixture(autouse=True)
def roomy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 GB available, whatever this machine has: --max-memory past it is planned to it."""
    monkeypatch.setattr(budget, "available_bytes", lambda: 64 * GB)


def test_a_budget_past_the_available_memory_is_planned_to_it_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(budget, "available_bytes", lambda: 2 * GB)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        plan = plan_video(3840, 2160, 4, 500, resident=RESIDENT)
    assert plan.budget == RESIDENT + 2 * GB and plan.needed <= plan.budget
    assert [r.getMessage() for r in caplog.records] == [
        "warning: --max-memory 500 is more than this machine has available (2.2 GB); the run is planned within that"]
    assert plan_video(3840, 2160, 4, 500, resident=RESIDENT) == plan_video(3840, 2160, 4, None, resident=RESIDENT)


def test_a_budget_that_cannot_hold_the_smallest_pipeline_says_what_would_fit() -> None:
    with pytest.raises(InputError) as info:
        plan_video(3840, 2160, 2, 0.1, resident=RESIDENT)
    message = info.value.message
    assert message.startswith("--max-memory 0.1 is too small for 3840x2160 video: at least ")
    least = float(message.split("at least ")[1].split(" GB")[0])
    assert 0.5 < least < 2  # 4K: x264's frame pool alone is ~0.4 GB
    plan = plan_video(3840, 2160, 1, least, resident=RESIDENT)  # what it said fits does fit
    assert plan.needed <= least * GB


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080), (3840, 2160)])
@pytest.mark.parametrize("gb", [0.6, 1, 2, 4, 16])
def test_the_plan_fits_the_budget_and_grows_with_it(size: tuple[int, int], gb: float) -> None:
    try:
        plan = plan_video(*size, 4, gb, resident=RESIDENT)
    except InputError:
        assert size == (3840, 2160) and gb <= 1  # only 4K in 1 GB or less is too small
        return
    assert plan.needed <= gb * GB * budget.USABLE_SHARE
    assert 1 <= plan.workers <= 4 and plan.workers + 2 <= plan.frames_in_flight <= 2 * plan.workers + 4
    bigger = plan_video(*size, 4, gb * 2, resident=RESIDENT)
    assert (bigger.workers, bigger.frames_in_flight) >= (plan.workers, plan.frames_in_flight)


def test_the_encoder_looks_ahead_less_before_workers_go() -> None:
    roomy = plan_video(1920, 1080, 2, 8, resident=RESIDENT)
    assert roomy.lookahead is None and roomy.frames_in_flight == 8  # the preset's, all frames
    tight = plan_video(1920, 1080, 1, 0.52, resident=RESIDENT)
    assert tight.lookahead is not None and tight.lookahead < budget.PRESET_LOOKAHEAD


@pytest.mark.parametrize("retimed, held_back, room, in_flight", [(False, 0, 8, 7), (True, 0, 8, 5), (False, 8, 13, 4)])
def test_the_frames_held_outside_the_slots_are_in_the_plan(retimed: bool, held_back: int, room: int,
                                                           in_flight: int) -> None:
    """The reader holds each decoded frame until the next says when it ends, an AVI with B-frames
    8 more to time them (held_back), and --fps's retime its newest frame and one waiting for its
    last tick: frames the in-flight slots do not count. 8K, where a frame is ~100 MB: a budget
    with room for `room` frames beside the rest gives fewer slots, so that the slots and the held
    frames together fit."""
    width, height, workers = 7680, 4320, 2
    pixels = width * height
    frame = pixels * budget.BGR_BYTES
    rest = (RESIDENT + budget.decoder_bytes(pixels) + budget.encoder_bytes(pixels, None)
            + workers * budget.worker_bytes(pixels))
    usable = rest + room * frame + frame // 2  # and half a frame spare
    plan = plan_video(width, height, workers, usable / budget.USABLE_SHARE / GB, resident=RESIDENT,
                      retimed=retimed, held_back=held_back)
    assert (plan.workers, plan.lookahead) == (workers, None)
    assert plan.frames_in_flight == in_flight
    held = budget.held_frames(retimed, held_back)
    assert held == 1 + held_back + (2 if retimed else 0)
    assert plan.needed == rest + (in_flight + held) * frame <= usable


def test_more_workers_than_fit_are_reduced_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="livecam"):
        plan = plan_video(3840, 2160, 8, 1.2, resident=RESIDENT)
    assert 1 <= plan.workers < 8
    assert [r.getMessage() for r in caplog.records] == [
        f"warning: --max-memory 1.2 holds {plan.workers} of the 8 execution threads for 3840x2160 video; "
        f"using {plan.workers}"]


def test_without_a_budget_the_available_memory_bounds_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "available_bytes", lambda: 300 * MB)
    with pytest.raises(InputError, match=r"not enough free memory for 3840x2160 video: it needs at least "
                                         r"\d+\.\d GB and this machine has 0\.3 GB available"):
        plan_video(3840, 2160, 2, None, resident=RESIDENT)
    monkeypatch.setattr(budget, "available_bytes", lambda: None)  # unknown: the default count
    assert plan_video(3840, 2160, 2, None, resident=RESIDENT).frames_in_flight == 8


def test_absurd_execution_threads_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "cores", lambda: 2)
    check_execution_threads(8)
    with pytest.raises(InputError, match=r"^--execution-threads 64 is more than this machine's 2 cores can use "
                                         r"\(at most 8, 4 per core\); use --execution-threads 8 or fewer$"):
        check_execution_threads(64)


def test_the_encoders_frame_threads_are_in_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each x264 frame thread holds ~10 B/px more (1080p, 2-16 threads measured): a 16-core machine's
    # 4K encoder needs about 1.1 GB more than a 1-core one's, which --max-memory has to know.
    pixels = 3840 * 2160
    monkeypatch.setattr("livecam.machine.cores", lambda: 1)
    one = budget.encoder_bytes(pixels, None)
    monkeypatch.setattr("livecam.machine.cores", lambda: 64)  # x264 gets 16 at most
    sixteen = budget.encoder_bytes(pixels, None)
    assert abs((sixteen - one) - pixels * budget.ENCODER_PER_THREAD * 15) <= 1
    assert 1.0 * GB < sixteen - one < 1.3 * GB
