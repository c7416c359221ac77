"""Background writes to the API server, on daemon threads of their own, in named lanes.

A lane is a queue and its threads, first in first out: a lane with one thread makes its writes
in the order asked; one lane's writes never wait behind another's. The watch cache keeps two
:class:`Writes` (cache.py): its events and Job counts, one ordered lane whose writes asked for
before the stop are still made; and the writes its bind verb starts, whose writes not begun at
the stop are given up.

Not a ThreadPoolExecutor, whose threads the interpreter joins at its exit (a write the API
server leaves hanging held the exit up), and which raises in the thread that asks once shut down
(a timer's look racing the stop died of it); nor asyncio's default executor, whose threads a
configuration reload shares and whose close waits for them without a timeout.

Stop (:meth:`Writes.shutdown`) returns at once, waiting for no API call: a write asked for
after it is not made, its future done; one asked for as the writes stop is made or given up,
never left pending behind the threads' stop marks. The writes a ``finish_queued`` Writes still
owes at the stop are made before its threads end, and the interpreter's exit waits for them, as
it did for the executor's; a Writes nobody holds any more is stopped so, and its threads end.
"""

from __future__ import annotations

import atexit
import queue
import threading
import weakref
from concurrent.futures import Future
from typing import Callable, Mapping

_Write = tuple[Future[None], Callable[[], object]]


class _Lanes:
    """What a :class:`Writes` shares with its threads, which hold this and not the Writes (so
    that one nobody holds is collected, and its finalizer stops them)."""

    def __init__(self, *, threads: Mapping[str, int], name: str, finish_queued: bool) -> None:
        self.threads_per_lane = dict(threads)
        self.name = name
        self.finish_queued = finish_queued
        self.queues: dict[str, queue.SimpleQueue[_Write | None]] = {lane: queue.SimpleQueue() for lane in threads}
        self.changed = threading.Condition()
        self.threads: list[threading.Thread] = []
        self.started: set[str] = set()
        self.stopped = False
        self.unfinished = 0

    def submit(self, call: Callable[[], object], *, lane: str) -> Future[None]:
        future: Future[None] = Future()
        with self.changed:
            if self.stopped:
                future.set_result(None)  # not made: done, so whoever waits for it goes on
                return future
            queued = self.queues[lane]
            if lane not in self.started:
                self.started.add(lane)
                for number in range(self.threads_per_lane[lane]):
                    thread = threading.Thread(target=self.work, args=(queued,), name=f"{self.name}-{lane}-{number}", daemon=True)
                    self.threads.append(thread)
                    thread.start()
            self.unfinished += 1
            # Under the lock stop() puts its marks under (a SimpleQueue's put never blocks): a
            # stop after the look above finds the write queued, before its marks (review28b #3:
            # put after the lock, it could land behind them, never run, its future never done).
            queued.put((future, call))
        return future

    def work(self, queued: queue.SimpleQueue[_Write | None]) -> None:
        while (item := queued.get()) is not None:
            future, call = item
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        call()
                    except BaseException as error:  # the caller's to read (or lose): never this thread's end
                        future.set_exception(error)
                    else:
                        future.set_result(None)
            finally:
                with self.changed:
                    self.unfinished -= 1
                    self.changed.notify_all()

    def stop(self) -> None:
        given_up: list[Future[None]] = []
        with self.changed:
            if self.stopped:
                return
            self.stopped = True
            if not self.finish_queued:
                for queued in self.queues.values():
                    while True:
                        try:
                            item = queued.get_nowait()
                        except queue.Empty:
                            break
                        if item is not None:
                            given_up.append(item[0])
                            self.unfinished -= 1
            for lane in self.started:
                for _ in range(self.threads_per_lane[lane]):
                    self.queues[lane].put(None)
            self.changed.notify_all()
        for future in given_up:
            if future.set_running_or_notify_cancel():
                future.set_result(None)

    def join(self) -> None:
        with self.changed:
            threads = list(self.threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()


# The lanes whose queued writes the interpreter's exit waits for (finish_queued), while any of
# their threads runs or their Writes is held.
_FINISHED_AT_EXIT: weakref.WeakSet[_Lanes] = weakref.WeakSet()


@atexit.register
def _finish_at_exit() -> None:
    for lanes in list(_FINISHED_AT_EXIT):
        lanes.stop()
        lanes.join()


class Writes:
    """Writes made in the background, on daemon threads named ``name``-lane-number.

    ``lanes``: each lane's name -> its number of threads (1: its writes made in the order
    asked). ``finish_queued``: at the stop, the writes queued are still made, and the
    interpreter's exit waits for them; otherwise they are given up (done, not made)."""

    def __init__(self, *, lanes: Mapping[str, int], name: str, finish_queued: bool) -> None:
        if not lanes:
            raise ValueError("lanes: a Writes needs at least one lane")
        for lane, threads in lanes.items():
            if threads < 1:
                raise ValueError(f"lanes[{lane!r}]: a lane needs at least one thread, not {threads}")
        self._lanes = _Lanes(threads=lanes, name=name, finish_queued=finish_queued)
        self._first_lane = next(iter(lanes))
        if finish_queued:
            _FINISHED_AT_EXIT.add(self._lanes)
        weakref.finalize(self, self._lanes.stop)

    def submit(self, call: Callable[[], object], *, lane: str | None = None) -> Future[None]:
        """``call`` made on a thread of ``lane`` (the first lane when None); its future is done
        once it is made (its exception, if it raised) or given up. Once stopped, done at once,
        unmade."""
        if lane is not None and lane not in self._lanes.queues:
            raise ValueError(f"lane: {lane!r} is none of this Writes' lanes {sorted(self._lanes.queues)}")
        return self._lanes.submit(call, lane=self._first_lane if lane is None else lane)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until every write submitted has ended (tests); whether they all have."""
        with self._lanes.changed:
            return self._lanes.changed.wait_for(lambda: self._lanes.unfinished == 0, timeout=timeout)

    def shutdown(self, *, wait: bool = False) -> None:
        """No write asked for from now on is made; none is waited for, unless ``wait``: then
        every write the stop leaves to its threads has ended when this returns (tests)."""
        self._lanes.stop()
        if wait:
            self._lanes.join()
