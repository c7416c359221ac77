"""Whether the kube-scheduler beside this cellfit is alive, for that kube-scheduler's liveness probe.

With several replicas each pod runs one kube-scheduler and the cellfit it calls over loopback;
the kube-schedulers elect a leader among themselves. A leader whose cellfit has died (a crash
loop, say) keeps its Lease, since nothing of kube-scheduler's own health changed, and every pod
of the profile waits while the other replica, whose cellfit is fine, stands by. The chart
therefore points the kube-scheduler's liveness probe here, on cellfit's metrics listener: the
probe fails when cellfit does not answer at all, and when the kube-scheduler's own ``/healthz``
fails (what the probe checked before). The kubelet then restarts that kube-scheduler, which
releases its Lease, and the standby takes over.

Only cellfit's *liveness* counts: a cellfit that answers but is not ready yet (its watch cache
still syncing, the API server away) passes. Restarting kube-scheduler then would not help, and
during an API outage it would put every replica's kube-scheduler into the kubelet's restart
backoff, minutes that outlast the outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Final

# Below the probe's timeoutSeconds (the chart's 5 s), so the probe reads this answer rather than
# timing out itself.
CHECK_TIMEOUT_SECONDS: Final = 3.0
_LONGEST_STATUS_LINE: Final = 1024


@dataclass(frozen=True, slots=True)
class Verdict:
    alive: bool
    reason: str  # what was asked and what came back, for the probe's failure message


class PairedSchedulerHealth:
    """GET of the kube-scheduler's health URL (``server.pairedSchedulerHealthUrl``), a new
    connection each time. HTTPS is not verified: the URL is on loopback and kube-scheduler serves
    a certificate it signed itself."""

    def __init__(self, url: str, *, timeout_seconds: float = CHECK_TIMEOUT_SECONDS) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL with a host: {url!r}")
        self.url = url
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._tls = _unverified_context() if parts.scheme == "https" else None
        self._timeout = timeout_seconds

    async def check(self) -> Verdict:
        try:
            status = await asyncio.wait_for(self._status(), timeout=self._timeout)
        except asyncio.TimeoutError:
            return Verdict(False, f"kube-scheduler's {self.url} did not answer within {self._timeout:g} s")
        except (OSError, ssl.SSLError, ValueError) as error:
            return Verdict(False, f"kube-scheduler's {self.url} cannot be reached: {error or type(error).__name__}")
        if status != 200:
            return Verdict(False, f"kube-scheduler's {self.url} answered HTTP {status}")
        return Verdict(True, f"kube-scheduler's {self.url} answered HTTP 200")

    async def _status(self) -> int:
        reader, writer = await asyncio.open_connection(self._host, self._port, ssl=self._tls)
        try:
            host = f"[{self._host}]" if ":" in self._host else self._host
            writer.write(f"GET {self._target} HTTP/1.1\r\nHost: {host}:{self._port}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            line = await reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as error:
            raise ValueError("the connection closed before a status line") from error
        except asyncio.LimitOverrunError as error:
            raise ValueError("no status line in the answer") from error
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
        return _status_code(line[:_LONGEST_STATUS_LINE])


def _status_code(line: bytes) -> int:
    """The code of an HTTP/1.x status line; ValueError for anything else."""
    parts = line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
        raise ValueError(f"not an HTTP status line: {line[:80]!r}")
    return int(parts[1])


def _unverified_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
