"""VerbDispatch with a coroutine handler (the bind verb): awaited on the event loop, many in
flight at once with no thread between them, and each verb's CPU time counted over the steps
its handler runs, not over its waits."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from scheduler.extender.dispatch import VerbDispatch, VerbRoute
from scheduler.extender.service import Answer

PATH = "/v1/extender/bind"


async def nothing_behind(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("a verb reached the app behind the dispatch")


async def request(app: VerbDispatch, body: bytes = b"{}") -> tuple[int, bytes]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", "method": "POST", "path": PATH, "headers": []}, receive, send)
    start, answer = sent
    return start["status"], answer["body"]


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def route(handler: Any, cpu: list[float], durations: list[float] | None = None) -> VerbRoute:
    return VerbRoute(handler=handler, observe_seconds=(durations if durations is not None else []).append,
                     count_rejected=lambda: None, count_failed=lambda: None, add_cpu_seconds=cpu.append)


def test_coroutine_handlers_are_all_in_flight_at_once_on_the_loop() -> None:
    """200 binds waiting on the API at the same time: none waits for another to finish (the
    thread pool before capped this at 64, and queued the rest)."""
    in_flight = 0
    most = 0
    release = asyncio.Event()

    async def bind(body: bytes) -> Answer:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        if most == 200:
            release.set()
        await release.wait()
        in_flight -= 1
        return Answer(200, json.dumps({"Error": "", "got": len(body)}).encode())

    cpu: list[float] = []
    app = VerbDispatch(api=nothing_behind, routes={PATH: route(bind, cpu)}, max_request_bytes=1000)

    async def burst() -> list[tuple[int, bytes]]:
        return await asyncio.wait_for(asyncio.gather(*(request(app) for _ in range(200))), 10)

    answers = asyncio.run(burst())
    assert most == 200 and all(status == 200 and json.loads(body)["got"] == 2 for status, body in answers)
    assert len(cpu) > 200  # counted step by step: up to the wait, and after it


def test_cpu_time_counts_the_handler_steps_not_its_waits() -> None:
    async def bind(body: bytes) -> Answer:
        burn(0.02)
        await asyncio.sleep(0.2)  # the API server's answer: nothing runs here meanwhile
        burn(0.02)
        return Answer(200, b'{"Error":""}')

    cpu: list[float] = []
    durations: list[float] = []
    app = VerbDispatch(api=nothing_behind, routes={PATH: route(bind, cpu, durations)}, max_request_bytes=1000)
    assert asyncio.run(request(app))[0] == 200
    assert 0.04 <= sum(cpu) < 0.1, cpu
    assert durations[0] >= 0.24  # the request took the wait as well


def test_cpu_time_of_a_plain_handler_is_counted_once() -> None:
    def filter_(body: bytes) -> Answer:
        burn(0.03)
        return Answer(200, b"{}")

    cpu: list[float] = []
    app = VerbDispatch(api=nothing_behind, routes={PATH: route(filter_, cpu)}, max_request_bytes=1000)
    asyncio.run(request(app))
    assert len(cpu) == 1 and 0.03 <= cpu[0] < 0.08


def test_a_failing_coroutine_handler_is_a_500_and_its_cpu_is_still_counted() -> None:
    async def bind(body: bytes) -> Answer:
        burn(0.01)
        await asyncio.sleep(0)
        raise RuntimeError("defect")

    cpu: list[float] = []
    app = VerbDispatch(api=nothing_behind, routes={PATH: route(bind, cpu)}, max_request_bytes=1000)
    status, body = asyncio.run(request(app))
    assert status == 500 and "RuntimeError" in json.loads(body)["Error"]
    assert sum(cpu) >= 0.01


def test_cancelling_a_request_reaches_the_handler() -> None:
    """Shutdown cancels what is in flight: the handler sees the cancellation where it waits."""
    seen: list[str] = []

    async def bind(body: bytes) -> Answer:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return Answer(200, b"{}")

    app = VerbDispatch(api=nothing_behind, routes={PATH: route(bind, [])}, max_request_bytes=1000)

    async def cancel_one() -> None:
        task = asyncio.ensure_future(request(app))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            seen.append("request ended")

    asyncio.run(cancel_one())
    assert seen == ["cancelled", "request ended"]
