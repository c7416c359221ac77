"""How a long pass of the watch cache (a relist of thousands of objects) shares the process with
the verbs.

A pass is written as a generator that yields after each event it applies (``Steps``); a
:class:`Pacing` drives it. The verbs run on the server's event loop, so the pass that never
stalls them is one that runs there too, a step at a time (:class:`OnLoop`): a request that
arrives mid-pass waits for the step under way, then the loop serves it before the next. Run in
the reflector's own thread instead (:class:`InThread`), the pass and the verbs contend for the
GIL, which CPython hands between busy threads only every few milliseconds whatever the pass
yields: a relist of 10,000 pods kept the verbs at 3-5 ms p50 and ~20 ms p99 over HTTP.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Final, Iterator, Protocol

# A pass: the events it applies, one per step.
Steps = Iterator[None]


class Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


class Pacing(Protocol):
    def run(self, steps: Steps) -> None:
        """Every step of ``steps``, in order, each once; returns when the last is done and
        raises what a step raised. Called from a reflector's thread."""


class InThread:
    """The pass in the calling thread, giving up the GIL about every millisecond: the engine
    lock is not fair, and a thread that releases it and takes it again at once may keep a verb
    waiting for it until the pass ends, while yielding after every event (10,000 of them) made
    a relist several times longer whenever another thread was busy. Where no event loop serves
    the verbs (tests of the cache alone, a loop that has stopped)."""

    EVERY_SECONDS: Final = 0.001

    def run(self, steps: Steps) -> None:
        last = time.perf_counter()
        for _ in steps:
            now = time.perf_counter()
            if now - last >= self.EVERY_SECONDS:
                time.sleep(0)
                last = time.perf_counter()


class OnLoop:
    """Each step of the pass on ``loop`` (the one the verbs run on), the loop served between two
    steps; the calling thread waits for the pass to end. A loop that is not running, or the
    calling thread's own loop, runs the pass with ``fallback``; so do the steps left when the
    loop stops mid-pass (a server shutting down): none is run twice, none is lost."""

    # How often a waiting thread checks that the loop still runs.
    POLL_SECONDS: Final = 0.5
    # How often the pass asks again for a lock another thread holds.
    LOCK_POLL_SECONDS: Final = 0.0005

    def __init__(
        self, loop: asyncio.AbstractEventLoop, *, lock: Lock | None = None, fallback: Pacing | None = None
    ) -> None:
        """``lock``: the one the steps take (the engine's). Each step runs holding it, taken
        without blocking the loop: waiting on it there, the loop would serve nothing (not even
        /healthz, which never takes it) while another thread (a large-body verb, a controller)
        holds it."""
        self._loop = loop
        self._lock = lock
        self._fallback: Pacing = fallback if fallback is not None else InThread()

    def run(self, steps: Steps) -> None:
        loop = self._loop
        if not loop.is_running() or _running_loop() is loop:
            self._fallback.run(steps)
            return
        taken_back = threading.Event()

        async def drive() -> None:
            lock = self._lock
            while True:
                while lock is not None and not lock.acquire(blocking=False):
                    await asyncio.sleep(self.LOCK_POLL_SECONDS)
                try:
                    if taken_back.is_set():  # this thread went on without the loop
                        return
                    next(steps)
                except StopIteration:
                    return
                finally:
                    if lock is not None:
                        lock.release()
                await asyncio.sleep(0)

        try:
            future = asyncio.run_coroutine_threadsafe(drive(), loop)
        except RuntimeError:  # closed since is_running() was asked
            self._fallback.run(steps)
            return
        while True:
            try:
                future.result(timeout=self.POLL_SECONDS)
                return
            except concurrent.futures.TimeoutError:
                if loop.is_running():
                    continue
            except concurrent.futures.CancelledError:  # the loop cancelled its tasks on the way out
                pass
            break
        # The loop stopped between two steps (a stopped loop runs none): the rest goes on here.
        taken_back.set()
        self._fallback.run(steps)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
