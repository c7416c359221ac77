"""A request pipelined behind an answer that closes the connection (a graceful shutdown, the
client's Connection: close, the client gone) is neither decided nor answered: nobody would read
its answer, and a bind would bind the pod while kube-scheduler counts the call as failed. The
ASGI path, answering a turn later, queued such a request and never started it; the verbs
answered inside the parser's callback must not start it either (scheduler/extender/listeners.py)."""

from __future__ import annotations

import time

from tests.extender.test_listener_verbs import BIND, FILTER, Listener, closed, post, read_answer


def _wait_until_shutdown_reaches(listener: Listener) -> None:
    """Until the server's graceful shutdown has told the connection to close after its answer."""
    deadline = time.monotonic() + 10
    while True:
        connections = list(listener.server.server_state.connections)
        cycle = connections[0].cycle if connections else None
        if cycle is not None and not cycle.keep_alive:
            return
        assert time.monotonic() < deadline, "the shutdown did not reach the connection"
        time.sleep(0.01)


def test_a_request_pipelined_behind_the_last_answer_of_a_shutdown_is_not_decided() -> None:
    first, second = b'{"Pod":{"first":1}}', b'{"Pod":{"second":2}}'
    with Listener() as listener:
        with listener.connect() as sock:
            request = post(FILTER, first)
            sock.sendall(request[:-3])  # the body in progress when the shutdown begins
            listener.server.should_exit = True
            _wait_until_shutdown_reaches(listener)
            sock.sendall(request[-3:] + post(FILTER, second))
            status, headers, _ = read_answer(sock)
            assert status == b"HTTP/1.1 200 OK"
            assert headers[b"connection"] == b"close"
            assert closed(sock)
    assert listener.bodies == [first]


def test_a_bind_cancelled_when_the_graceful_shutdown_runs_out_is_answered_500_and_closed() -> None:
    """uvicorn cancels the requests still running when timeout_graceful_shutdown passes; through
    ASGI a cancelled bind was answered 500 at once. Unanswered, kube-scheduler would wait on the
    open connection until the process ends, or its own timeout."""
    with Listener() as listener:
        listener.server.config.timeout_graceful_shutdown = 0.2
        with listener.connect() as sock:
            sock.sendall(post(BIND))  # never released: still waiting when the shutdown gives up
            listener.server.should_exit = True
            status, headers, body = read_answer(sock)
            assert status == b"HTTP/1.1 500 Internal Server Error"
            assert headers[b"connection"] == b"close"
            assert b"shutting down" in body
            assert closed(sock)
