"""The one background writer of the watch cache (scheduler/cluster/writes.py), which serves both
its events and Job counts (one ordered lane, whose writes asked for before the stop are still
made) and the writes its bind verb starts (two lanes, whose writes not begun at the stop are
given up): lanes never wait for each other, a lane of one thread writes in the order asked, no
write asked for after the stop is made, and neither the stop nor, for the bind verb's, the
interpreter's exit waits for the API server.

Writes that hang wait on Events the test sets; a watchdog (WATCHDOG_SECONDS) lets them go so that
code which waits for them fails instead of hanging."""

from __future__ import annotations

import functools
import gc
import subprocess
import sys
import textwrap
import threading
from typing import Callable

import pytest

from scheduler.cluster.writes import Writes

WATCHDOG_SECONDS = 20.0


def hanging_write(made: list[str], name: str) -> tuple[threading.Event, threading.Event, Callable[[], None]]:
    """A write appending ``name`` to ``made`` once released; the Events say it began, and let it go."""
    began, release = threading.Event(), threading.Event()

    def write() -> None:
        began.set()
        release.wait(timeout=WATCHDOG_SECONDS)
        made.append(name)

    return began, release, write


def test_a_lane_of_one_thread_writes_in_the_order_asked() -> None:
    writes = Writes(lanes={"only": 1}, name="test-ordered", finish_queued=True)
    made: list[int] = []
    futures = [writes.submit(functools.partial(made.append, number)) for number in range(50)]
    assert all(future.result(timeout=WATCHDOG_SECONDS) is None for future in futures)
    assert made == list(range(50))
    writes.shutdown(wait=True)


def test_one_lanes_hanging_write_holds_up_no_other_lane() -> None:
    writes = Writes(lanes={"slow": 1, "fast": 1}, name="test-lanes", finish_queued=False)
    made: list[str] = []
    began, release, hang = hanging_write(made, "slow")
    writes.submit(hang, lane="slow")
    assert began.wait(timeout=WATCHDOG_SECONDS)
    writes.submit(lambda: made.append("fast"), lane="fast").result(timeout=WATCHDOG_SECONDS)
    assert made == ["fast"]
    release.set()
    assert writes.settle(timeout=WATCHDOG_SECONDS)
    assert made == ["fast", "slow"]
    writes.shutdown()


@pytest.mark.parametrize("finish_queued", [True, False])
def test_at_the_stop_queued_writes_are_made_or_given_up_as_asked_and_none_after(finish_queued: bool) -> None:
    writes = Writes(lanes={"only": 1}, name="test-stop", finish_queued=finish_queued)
    made: list[str] = []
    began, release, hang = hanging_write(made, "under way")
    under_way = writes.submit(hang)
    assert began.wait(timeout=WATCHDOG_SECONDS)
    queued = writes.submit(lambda: made.append("queued"))
    writes.shutdown()  # returns while a write hangs
    assert not under_way.done()
    late = writes.submit(lambda: made.append("late"))
    assert late.done() and late.result() is None  # not made, nothing raised where it was asked
    release.set()
    writes.shutdown(wait=True)
    assert queued.done()
    assert made == (["under way", "queued"] if finish_queued else ["under way"])


def test_a_write_that_raises_fails_its_future_and_the_lane_goes_on() -> None:
    writes = Writes(lanes={"only": 1}, name="test-raises", finish_queued=True)

    def fails() -> None:
        raise RuntimeError("the API server said no")

    with pytest.raises(RuntimeError, match="said no"):
        writes.submit(fails).result(timeout=WATCHDOG_SECONDS)
    made: list[str] = []
    writes.submit(lambda: made.append("next")).result(timeout=WATCHDOG_SECONDS)
    assert made == ["next"]
    writes.shutdown(wait=True)


def test_a_writes_nobody_holds_ends_its_threads() -> None:
    writes = Writes(lanes={"a": 1, "b": 2}, name="test-dropped-writes", finish_queued=True)
    writes.submit(lambda: None, lane="a").result(timeout=WATCHDOG_SECONDS)
    writes.submit(lambda: None, lane="b").result(timeout=WATCHDOG_SECONDS)
    threads = [thread for thread in threading.enumerate() if thread.name.startswith("test-dropped-writes-")]
    assert len(threads) == 3 and all(thread.daemon for thread in threads)
    del writes
    gc.collect()
    for thread in threads:
        thread.join(timeout=WATCHDOG_SECONDS)
    assert not any(thread.is_alive() for thread in threads)


def test_a_lane_it_does_not_have_or_without_threads_is_refused_by_name() -> None:
    writes = Writes(lanes={"naming": 1}, name="test-refused", finish_queued=False)
    with pytest.raises(ValueError, match="lane: 'records'"):
        writes.submit(lambda: None, lane="records")
    with pytest.raises(ValueError, match=r"lanes\['naming'\]"):
        Writes(lanes={"naming": 0}, name="test-refused", finish_queued=False)
    with pytest.raises(ValueError, match="lanes"):
        Writes(lanes={}, name="test-refused", finish_queued=False)


EXITING = textwrap.dedent("""
    import sys, threading, time
    from scheduler.cluster.writes import Writes

    finished = Writes(lanes={"events": 1}, name="finished", finish_queued=True)
    given_up = Writes(lanes={"bind": 1}, name="given-up", finish_queued=False)
    hanging = threading.Event()
    given_up.submit(lambda: (hanging.set(), threading.Event().wait()))  # an API server that never answers
    hanging.wait()
    began = threading.Event()
    finished.submit(lambda: (began.set(), time.sleep(0.2)))
    began.wait()
    finished.submit(lambda: print("queued event written", flush=True))
    given_up.submit(lambda: print("queued bind write made", flush=True))
    # the process ends here: neither Writes stopped
""")


def test_the_exit_makes_the_queued_writes_it_finishes_and_waits_for_no_hanging_bind_write() -> None:
    ended = subprocess.run([sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=WATCHDOG_SECONDS, check=False)
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout.splitlines() == ["queued event written"]
