"""A real uvicorn server on an ephemeral loopback port, in a thread: tests talk HTTP to it."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

import httpx
import uvicorn
from starlette.types import ASGIApp


@contextlib.contextmanager
def running_server(app: ASGIApp) -> Iterator[str]:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def wait_until_ready(client: httpx.Client, *, timeout: float = 10.0) -> None:
    """Until ``/readyz`` answers 200: a connected cellfit's watch cache has synced."""
    deadline = time.monotonic() + timeout
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "the watch cache never synced"
        time.sleep(0.02)
