"""Keeps an HTTPS listener's certificate current without a restart.

The webhook's certificate and key are files of a mounted Secret. When the Secret changes (the
chart's certificate rotated, cert-manager renewing it), the kubelet swaps the files in place
within a minute or so, but a TLS context loaded at startup would go on presenting the old
certificate until it expires and the API server stops trusting it. So the files are checked
periodically and, when they changed, loaded into a new context, which the listener's own
context hands every new handshake to (its SNI callback runs for each ClientHello, SNI or not):
connections made after that present the new pair, open ones keep theirs. A pair that does not
load (a half-written swap, a key that does not match) is logged and the old one kept; the next
check tries again. Loading into the listener's context itself would not do: a certificate
whose key does not match is taken before the key is refused, leaving a context no handshake
succeeds with.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Callable

from scheduler.cluster.file_stamps import FileStamp, file_stamps

log = logging.getLogger(__name__)

_Stamp = tuple[FileStamp, ...]


class CertificateReloader:
    """``context`` is the listener's; ``make_context`` builds one like it from the files (same
    settings), raising when they do not load."""

    def __init__(
        self, *, context: ssl.SSLContext, make_context: Callable[[], ssl.SSLContext], cert_file: str, key_file: str
    ) -> None:
        self._make_context = make_context
        self._cert_file = cert_file
        self._key_file = key_file
        self._loaded = self._stamp()
        self._current = context
        self.not_after = certificate_not_after(cert_file)
        context.sni_callback = self._hand_over

    def _hand_over(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        current = self._current
        if connection.context is not current:
            connection.context = current

    def _stamp(self) -> _Stamp:
        return file_stamps((self._cert_file, self._key_file))

    def reload_if_changed(self) -> bool:
        """Load the files into the context if they changed since the last load; returns
        whether a new pair is now presented."""
        stamp = self._stamp()
        if stamp == self._loaded or None in stamp:
            return False
        try:
            fresh = self._make_context()
        except (OSError, ssl.SSLError, ValueError) as error:
            log.warning(
                "new certificate not loaded; the listener keeps presenting the previous one",
                extra={"cert_file": self._cert_file, "key_file": self._key_file, "reason": str(error)},
            )
            return False
        self._current = fresh
        self._loaded = stamp
        self.not_after = certificate_not_after(self._cert_file)
        log.info("certificate reloaded", extra={"cert_file": self._cert_file})
        return True

    async def watch(self, *, interval_seconds: float) -> None:
        """Check every ``interval_seconds`` until cancelled."""
        if interval_seconds <= 0:
            raise ValueError(f"interval_seconds must be positive, got {interval_seconds}")
        while True:
            await asyncio.sleep(interval_seconds)
            self.reload_if_changed()


def certificate_not_after(cert_file: str) -> float | None:
    """The first certificate's notAfter in ``cert_file`` (Unix seconds), for the expiry metric;
    None when it cannot be read. ssl has no public parser for a certificate file: its private
    one (what ssl's own tests use) is the only one in the standard library."""
    try:
        return float(ssl.cert_time_to_seconds(ssl._ssl._test_decode_cert(cert_file)["notAfter"]))  # type: ignore[attr-defined]
    except (AttributeError, KeyError, OSError, ValueError, ssl.SSLError):
        return None
