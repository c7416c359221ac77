"""A path under the extender's prefix that names no verb (a typo in kube-scheduler's filterVerb,
say) is answered 404 with the ``Error`` body the verbs answer their errors in, naming the path
and the verbs, not FastAPI's ``{"detail": "Not Found"}``: on cellfit's own listener (whose
protocol answers the verbs itself and hands every other path to the app) and on plain uvicorn."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Iterator

import httpx
import pytest

from scheduler.config import ListenerLimits, Settings
from scheduler.extender.listeners import BoundedServer, ListenerConfig
from scheduler.extender.runtime import build_runtime

from tests.support.server import running_server

VERBS = "/v1/extender/filter, /v1/extender/prioritize, /v1/extender/preempt, /v1/extender/bind"


@contextlib.contextmanager
def cellfit_listener(app: object) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = ListenerConfig(app, limits=ListenerLimits(), setting="server.extenderListener", host="127.0.0.1",
                            port=port, lifespan="on", log_config=None, access_log=False)
    assert config.verbs is app  # the protocol answers the verbs itself
    server = BoundedServer(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the listener did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(params=["cellfit's listener", "uvicorn"])
def client(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    runtime = build_runtime(Settings(), standalone=True)
    serving = cellfit_listener(runtime.app) if request.param == "cellfit's listener" else running_server(runtime.app)
    with serving as base_url, httpx.Client(base_url=base_url, timeout=10) as http:
        yield http


@pytest.mark.parametrize("path", ["/v1/extender/nosuchverb", "/v1/extender/", "/v1/extender", "/v1/extender/filter/x"])
def test_an_unknown_verb_is_a_404_with_an_error_naming_the_path_and_the_verbs(client: httpx.Client, path: str) -> None:
    response = client.post(path, content=b'{"Pod":{}}', headers={"content-type": "application/json"})
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"Error": f"no extender verb at {path}; cellfit's verbs are {VERBS}"}
    # Any method: the path is what is wrong.
    assert client.get(path).json() == response.json()
    # The connection serves on: a verb after it is answered by the verb.
    verb = client.post("/v1/extender/filter", content=b"{", headers={"content-type": "application/json"})
    assert verb.status_code == 400 and "Error" in verb.json()


def test_paths_outside_the_prefix_are_the_apis_own(client: httpx.Client) -> None:
    assert client.get("/v1/extenders").status_code == 404
    assert client.get("/v1/extenders").json() == {"detail": "Not Found"}
    assert client.get("/healthz").json() == {"status": "ok"}
