"""user26 #9: cellfit logged uvicorn's "Started server process [pid]" four times per start, one
per listener (extender, metrics, inspect, webhook) of its one process, and "Finished server
process" four times at its end; life28 #2: "Shutting down" four times at each stop, naming no
listener. Each is logged once."""

from __future__ import annotations

import asyncio
import logging
import pytest
from starlette.types import Receive, Scope, Send

from scheduler.config import ListenerLimits
from scheduler.extender.server import _listener, _serve_until_signalled


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_three_listeners_log_the_process_started_shutting_down_and_finished_once(caplog: pytest.LogCaptureFixture) -> None:
    listeners = [_listener(app, host="127.0.0.1", port=0, lifespan="off", setting=f"test.port{i}", limits=ListenerLimits(),
                           limits_setting=f"test.listener{i}") for i in range(3)]

    async def stop_once_started() -> None:
        while not all(listener.started for listener, _ in listeners):
            await asyncio.sleep(0.01)
        for listener, _ in listeners:
            listener.should_exit = True

    caplog.set_level(logging.INFO, logger="uvicorn.error")
    asyncio.run(_serve_until_signalled(listeners, [stop_once_started]))
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.error"]
    assert sum(line.startswith("Started server process [") for line in lines) == 1, lines
    assert sum(line == "Shutting down" for line in lines) == 1, lines
    assert sum(line.startswith("Finished server process [") for line in lines) == 1, lines
