"""A write the bind verb starts (a preemptor's binding naming the gang members its record names
on their Jobs) runs on the cache's own daemon threads (writes.Writes), not on asyncio's
default executor (review28 on fd66259). There, with the API server hanging, each such binding
held a default-executor thread for the write's tries (~33 s), threads the configuration reload's
to_thread shares, and at shutdown asyncio's Runner.close() waited for them without a timeout.

The API double's Job write hangs until the test lets it go; a watchdog lets it go after
WATCHDOG_SECONDS and says so, so that code which waits for it fails here instead of hanging."""

from __future__ import annotations

import queue
import threading
import time
import types
from concurrent.futures import Future, wait
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster import writes as writes_module
from tests.cluster.test_gang_members_named_at_binding import BindingApi, timers, watched_then_bound
from tests.cluster.test_gang_recovery_waits_for_deciding_replica import Timers

__all__ = ["timers"]

WATCHDOG_SECONDS = 20.0


def bind_writes() -> writes_module.Writes:
    """The bind verb's writes (the cache's), one thread a lane."""
    return writes_module.Writes(lanes={cache_module.NAMING: 1, cache_module.RECORDS: 1}, name="test-bind-writes", finish_queued=False)


class HangingJobApi(BindingApi):
    """A Job write that hangs (an API server that accepts the connection and answers nothing)
    until ``release`` is set."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.watchdog_fired = False
        self.on_daemon_thread: bool | None = None

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        self.on_daemon_thread = threading.current_thread().daemon
        self.entered.set()
        if not self.release.wait(timeout=WATCHDOG_SECONDS):
            self.watchdog_fired = True
        super().patch_job(namespace=namespace, name=name, operations=operations)


def test_the_event_loop_ends_and_the_cache_stops_while_the_write_hangs(timers: Timers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "NAMING_BEFORE_BINDING_SECONDS", 0.0)
    # The binding runs under asyncio.run (bind_te_0), whose close waits for its default executor.
    api, cache = watched_then_bound(time.time() - 10, api_type=HangingJobApi)
    assert isinstance(api, HangingJobApi)
    assert api.named_at_binding == [{}]  # bound without waiting for the write
    assert not api.watchdog_fired, "the event loop's close waited for the hanging Job write"
    assert api.entered.wait(timeout=WATCHDOG_SECONDS)  # the write is under way, hanging
    cache.stop()  # returns while it hangs
    assert not api.watchdog_fired
    assert api.on_daemon_thread is True  # the interpreter's exit does not wait for it either
    api.release.set()
    assert cache._bind_writes.settle(timeout=WATCHDOG_SECONDS)


def test_a_write_not_begun_at_the_stop_is_not_made() -> None:
    writes = bind_writes()
    hanging, release = threading.Event(), threading.Event()
    made: list[str] = []

    def hang() -> None:
        hanging.set()
        release.wait(timeout=WATCHDOG_SECONDS)
        made.append("first")

    first = writes.submit(hang)
    assert hanging.wait(timeout=WATCHDOG_SECONDS)
    second = writes.submit(lambda: made.append("second"))
    writes.shutdown()
    assert second.done() and not first.done()  # the one not begun is given up, the hanging one not waited for
    assert writes.submit(lambda: made.append("third")).done()  # nothing begins once stopped
    release.set()
    assert writes.settle(timeout=WATCHDOG_SECONDS)
    assert made == ["first"]


class _PausingQueue:
    """A SimpleQueue whose put of a write pauses (once armed) until ``go`` is set: a submit
    caught between its look at the stop and its put."""

    armed = False
    entered = threading.Event()
    go = threading.Event()

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def put(self, item: Any) -> None:
        if item is not None and _PausingQueue.armed:
            _PausingQueue.armed = False
            _PausingQueue.entered.set()
            _PausingQueue.go.wait(timeout=WATCHDOG_SECONDS)
        self._queue.put(item)

    def get(self) -> Any:
        return self._queue.get()

    def get_nowait(self) -> Any:
        return self._queue.get_nowait()


def test_a_write_submitted_as_the_writes_stop_is_made_or_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """review28b #3: submit looked at the stop under the lock and put after it; a shutdown in
    between put its stop marks first, and the write was left behind them: never run, its future
    never done (a binding waiting for it waited its whole NAMING_BEFORE_BINDING_SECONDS)."""
    monkeypatch.setattr(writes_module, "queue", types.SimpleNamespace(SimpleQueue=_PausingQueue, Empty=queue.Empty))
    _PausingQueue.entered.clear()
    _PausingQueue.go.clear()
    writes = bind_writes()
    assert writes.submit(lambda: None).result(timeout=WATCHDOG_SECONDS) is None  # its thread started
    _PausingQueue.armed = True
    submitted: list[Future[None]] = []
    submitting = threading.Thread(target=lambda: submitted.append(writes.submit(lambda: None)))
    submitting.start()
    assert _PausingQueue.entered.wait(timeout=WATCHDOG_SECONDS)
    stopping = threading.Thread(target=writes.shutdown)
    stopping.start()
    stopping.join(timeout=0.5)  # before: the stop is over here, its marks put; after: it waits for the submit
    _PausingQueue.go.set()
    submitting.join(timeout=WATCHDOG_SECONDS)
    stopping.join(timeout=WATCHDOG_SECONDS)
    (future,) = submitted
    assert wait([future], timeout=WATCHDOG_SECONDS).done == {future}  # made or given up: done either way
    assert writes.settle(timeout=WATCHDOG_SECONDS)
