"""Loopback ports for the servers a test starts as separate processes.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from the ephemeral range, the
same range it draws every outgoing connection's source port from. Between choosing such a
port and the child process binding it, any client on the machine (an API server's watch, a
kube-scheduler's request) may take it as a source port, and the child exits with "Address
already in use". These ports come from below that range instead, where only listeners live,
and a port is handed out once per test process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000  # below: well-known and registered services
_handed: set[int] = set()
_random = random.Random()  # seeded from the OS: parallel test processes draw different ports


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(field) for field in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default
    return low, high


def free_port() -> int:
    """A loopback TCP port outside the ephemeral range that nothing listens on now."""
    low, high = ephemeral_range()
    candidates = range(_LOWEST, low) if low - _LOWEST >= 1_000 else range(high + 1, 65_536)
    for _ in range(1_000):
        port = _random.choice(candidates)
        if port in _handed:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {candidates.start}-{candidates.stop - 1}")
