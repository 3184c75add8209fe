"""DropOldestQueue and ReorderBuffer."""

from __future__ import annotations

import queue
import random
import threading
import time

import pytest

from livecam.pipeline.queues import DropOldestQueue, ReorderBuffer


def test_full_queue_drops_the_oldest_counts_it_and_reports_it() -> None:
    dropped: list[int] = []
    q: DropOldestQueue[int] = DropOldestQueue(2, on_drop=dropped.append)
    for i in range(5):
        q.put(i)
    assert q.qsize() == 2 and q.dropped == 3 and dropped == [0, 1, 2]
    assert [q.get(0.1), q.get(0.1)] == [3, 4]
    with pytest.raises(queue.Empty):
        q.get(0.05)


def test_put_wait_is_lossless_and_times_out_when_full() -> None:
    q: DropOldestQueue[int] = DropOldestQueue(1)
    assert q.put_wait(1, 0.05)
    assert not q.put_wait(2, 0.05)
    assert not q.wait_for_space(0.01)
    threading.Timer(0.05, lambda: q.get(1)).start()
    assert q.put_wait(3, 2.0)
    assert q.get(0.1) == 3 and q.dropped == 0
    assert q.drain() == [] and q.qsize() == 0


def test_get_wakes_up_when_an_item_arrives() -> None:
    q: DropOldestQueue[str] = DropOldestQueue(1)
    threading.Timer(0.05, lambda: q.put("x")).start()
    assert q.get(2.0) == "x"


def test_reorder_gives_items_back_in_index_order_and_skips_dropped_indices() -> None:
    buf: ReorderBuffer[str] = ReorderBuffer()
    buf.push(1, "b")
    buf.push(3, "d")
    assert buf.pop_ready() == []
    buf.push(0, "a")
    assert buf.pop_ready() == ["a", "b"]
    buf.skip(2)
    assert buf.pop_ready() == ["d"]
    assert not buf.push(1, "late") and buf.late == 1
    buf.finish()
    assert buf.done


def test_reorder_gives_up_on_a_missing_index_after_max_wait() -> None:
    now = [0.0]
    buf: ReorderBuffer[int] = ReorderBuffer(max_wait_s=0.5, clock=lambda: now[0])
    buf.push(1, 1)
    assert buf.pop_ready() == []
    now[0] = 0.6
    assert buf.pop_ready() == [1]
    assert not buf.push(0, 0) and buf.late == 1


def test_reorder_flushes_everything_in_order_when_all_producers_finished() -> None:
    buf: ReorderBuffer[int] = ReorderBuffer(producers=2)
    buf.push(5, 5)
    buf.push(2, 2)
    buf.finish()
    assert not buf.done
    buf.finish()
    assert buf.pop_ready() == [2, 5] and buf.done


def test_reorder_with_concurrent_producers() -> None:
    buf: ReorderBuffer[int] = ReorderBuffer(producers=4)
    work: "queue.Queue[int]" = queue.Queue()
    for i in range(200):
        work.put(i)

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        while True:
            try:
                i = work.get_nowait()
            except queue.Empty:
                break
            time.sleep(rng.random() * 0.002)
            if i % 17 == 0:
                buf.skip(i)
            else:
                buf.push(i, i)
        buf.finish()

    threads = [threading.Thread(target=producer, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    out: list[int] = []
    while not buf.done:
        out += buf.pop_ready(0.05)
    for t in threads:
        t.join()
    assert out == [i for i in range(200) if i % 17]
