"""The ports test processes listen on never come from the range outgoing connections use."""

from __future__ import annotations

import socket

import pytest

import tests.support.ports as ports
from tests.support.ports import ephemeral_range, free_port


def test_ports_are_outside_the_ephemeral_range_free_and_never_handed_twice() -> None:
    low, high = ephemeral_range()
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(not low <= port <= high for port in ports)
    for port in ports[:20]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    low, _ = ephemeral_range()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))  # any port: the draw below is forced onto it first
        listener.listen()
        taken = listener.getsockname()[1]
        draws = iter([taken, low - 1])
        monkeypatch.setattr(ports, "_handed", set())
        monkeypatch.setattr(ports, "_random", type("Draws", (), {"choice": lambda self, _: next(draws)})())
        assert free_port() == low - 1
