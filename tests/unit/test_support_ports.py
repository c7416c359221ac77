"""The ports test processes listen on never come from the range outgoing connections use."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

import tests.support.ports as ports
from tests.support.ports import ephemeral_range, free_port

ROOT = Path(__file__).resolve().parents[2]


def test_ports_are_outside_the_ephemeral_range_free_and_never_handed_twice() -> None:
    low, high = ephemeral_range()
    handed = [free_port() for _ in range(200)]
    assert len(set(handed)) == len(handed)
    assert all(not low <= port <= high for port in handed)
    for port in handed[:20]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def _force_draws(monkeypatch: pytest.MonkeyPatch, draws: Iterator[int]) -> None:
    monkeypatch.setattr(ports, "_random", type("Draws", (), {"choice": lambda self, _: next(draws)})())


def _spare_ports(count: int) -> list[int]:
    """Ports below the ephemeral range that this process has not handed out and that bind now."""
    low, _ = ephemeral_range()
    spare: list[int] = []
    for port in range(min(low, 65_536) - 1, 1_024, -1):
        if port in ports._handed:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
        spare.append(port)
        if len(spare) == count:
            return spare
    pytest.skip("no spare ports below the ephemeral range")


def test_a_port_something_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    (spare,) = _spare_ports(1)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))  # any port: the draw below is forced onto it first
        listener.listen()
        taken = listener.getsockname()[1]
        _force_draws(monkeypatch, iter([taken, spare]))
        assert free_port() == spare


def test_a_port_taken_on_another_local_address_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that listens on every address (the admission webhook's default host, 0.0.0.0)
    cannot have a port something else holds on one address, loopback or not."""
    taken, spare = _spare_ports(2)
    with socket.socket() as listener:
        try:
            listener.bind(("127.0.0.2", taken))
        except OSError:
            pytest.skip("no 127.0.0.2 here")
        listener.listen()
        _force_draws(monkeypatch, iter([taken, spare]))
        assert free_port() == spare


@pytest.mark.parametrize(
    ("ephemeral", "expected"),
    [
        ((1_024, 65_535), None),  # every unprivileged port is ephemeral: the kernel's choice
        ((10_500, 65_535), range(10_000, 10_500)),  # a few below, none above
        ((5_000, 60_999), range(61_000, 65_536)),  # nothing at or above 10,000 below the range
        ((40_000, 64_999), range(10_000, 40_000)),
    ],
)
def test_an_unusual_ephemeral_range_still_gives_a_free_port(
    monkeypatch: pytest.MonkeyPatch, ephemeral: tuple[int, int], expected: range | None
) -> None:
    monkeypatch.setattr(ports, "ephemeral_range", lambda: ephemeral)
    port = free_port()
    if expected is not None:
        assert port in expected
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


_CLAIMER = """
import sys, tests.support.ports as ports
draws = iter([int(sys.argv[1])])
ports._random = type("Draws", (), {"choice": lambda self, _: next(draws)})()
print(ports.free_port(), flush=True)
sys.stdin.readline()  # holds the port (its server would start now) until the parent is done
"""


def test_a_port_another_test_process_handed_out_is_not_handed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two test processes (a second pytest, an e2e run beside the integration tests) draw from
    the same ports; one's port whose server has not bound it yet is not the other's."""
    claimed, spare = _spare_ports(2)
    other = subprocess.Popen(
        [sys.executable, "-c", _CLAIMER, str(claimed)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdin is not None
        assert int(other.stdout.readline()) == claimed
        _force_draws(monkeypatch, iter([claimed, spare]))
        assert free_port() == spare
    finally:
        other.communicate("\n", timeout=30)
