"""Loopback ports for the servers a test starts as separate processes.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from the ephemeral range, the
same range it draws every outgoing connection's source port from. Between choosing such a
port and the child process binding it, any client on the machine (an API server's watch, a
kube-scheduler's request) may take it as a source port, and the child exits with "Address
already in use". These ports come from outside that range instead (below it, where only
listeners live, or above it where the range leaves too few below), and a port is handed out
once: once per test process, and not to a second test process on the machine while the first
lives (each port handed out holds a lock on a file named after it in the temporary folder, so
a second pytest or an e2e run beside the integration tests draws other ports). Where the range
leaves no port outside it (``ip_local_port_range`` of ``1024 65535``), the kernel chooses, as
before this module.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path
from typing import IO

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000  # below: well-known and registered services
_ENOUGH = 1_000  # ports below the range worth drawing from rather than those above it
_handed: set[int] = set()
_claims: dict[int, IO[str]] = {}  # port -> its lock file, open (so locked) while this process lives
_random = random.Random()  # seeded from the OS: parallel test processes draw different ports


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(field) for field in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default
    return low, high


def _candidates() -> range:
    """The ports outside the ephemeral range to draw from: below it (from 10,000) if it leaves
    enough there, else whichever side has more; empty if it leaves none."""
    low, high = ephemeral_range()
    below = range(_LOWEST, max(_LOWEST, low))
    above = range(min(high + 1, 65_536), 65_536)
    if len(below) >= _ENOUGH:
        return below
    return below if len(below) >= len(above) else above


def _bindable(port: int) -> bool:
    """Nothing holds ``port`` on any local IPv4 address (a wildcard bind conflicts with every
    one), so a server binds it on loopback or on 0.0.0.0."""
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _claim(port: int) -> bool:
    """Lock ``port``'s file for this process's lifetime; False if another process holds it."""
    folder = Path(tempfile.gettempdir()) / f"cellfit-test-ports-{os.getuid()}"
    try:
        folder.mkdir(exist_ok=True)
        lock = open(folder / str(port), "a")  # noqa: SIM115 (kept open: the lock lives with it)
    except OSError:
        return True  # no folder to lock in: the bind check alone, as before
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return False
    _claims[port] = lock
    return True


def _release(port: int) -> None:
    lock = _claims.pop(port, None)
    if lock is not None:
        lock.close()


def free_port() -> int:
    """A loopback TCP port outside the ephemeral range that nothing listens on now, handed out
    by no other call in this process nor in any other test process alive."""
    candidates = _candidates()
    if not candidates:
        return _kernel_port()
    for _ in range(1_000):
        port = _random.choice(candidates)
        if port in _handed or not _claim(port):
            continue
        if not _bindable(port):
            _release(port)
            continue
        _handed.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {candidates.start}-{candidates.stop - 1}")


def _kernel_port() -> int:
    """The kernel's choice, from the ephemeral range (it leaves no other): not handed before."""
    for _ in range(1_000):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _handed and _claim(port):
            _handed.add(port)
            return port
    raise RuntimeError("no free loopback port")
