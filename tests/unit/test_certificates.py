"""CertificateReloader against real TLS handshakes: after the files are swapped the way the
kubelet swaps a mounted Secret's, new connections get the new certificate; a pair that does not
load leaves the old one served."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import threading
from pathlib import Path
from typing import Iterator

import pytest

from scheduler.extender.certificates import CertificateReloader
from tests.support.tls import ServingCertificate, make_serving_certificate


class TlsServer:
    """Accepts connections on loopback and completes the TLS handshake with ``context``."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._context = context
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            try:
                with self._context.wrap_socket(connection, server_side=True) as tls:
                    tls.recv(1)
            except (OSError, ssl.SSLError):
                pass

    def trusted_by(self, ca: ServingCertificate) -> bool:
        client = ssl.create_default_context(cafile=str(ca.ca_file))
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as raw:
                with client.wrap_socket(raw, server_hostname="127.0.0.1"):
                    return True
        except ssl.SSLCertVerificationError:
            return False

    def close(self) -> None:
        self._socket.close()


def swap(source: ServingCertificate, target: ServingCertificate) -> None:
    """Replace target's files by source's, each in one rename (never a half-written file)."""
    for new, old in ((source.cert_file, target.cert_file), (source.key_file, target.key_file)):
        staged = old.with_suffix(".new")
        shutil.copyfile(new, staged)
        os.replace(staged, old)


@pytest.fixture
def pairs(tmp_path: Path) -> tuple[ServingCertificate, ServingCertificate]:
    return make_serving_certificate(tmp_path / "first"), make_serving_certificate(tmp_path / "second")


@pytest.fixture
def served(pairs: tuple[ServingCertificate, ServingCertificate], tmp_path: Path) -> Iterator[tuple[TlsServer, CertificateReloader, ServingCertificate]]:
    first, _ = pairs
    mounted = ServingCertificate(ca_file=first.ca_file, cert_file=tmp_path / "tls.crt", key_file=tmp_path / "tls.key")
    shutil.copyfile(first.cert_file, mounted.cert_file)
    shutil.copyfile(first.key_file, mounted.key_file)

    def make_context() -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(mounted.cert_file, mounted.key_file)
        return context

    context = make_context()
    server = TlsServer(context)
    reloader = CertificateReloader(
        context=context, make_context=make_context, cert_file=str(mounted.cert_file), key_file=str(mounted.key_file)
    )
    try:
        yield server, reloader, mounted
    finally:
        server.close()


def test_unchanged_files_are_not_reloaded(served) -> None:  # type: ignore[no-untyped-def]
    server, reloader, _ = served
    assert reloader.reload_if_changed() is False


def test_new_connections_get_the_new_certificate_after_a_swap(served, pairs) -> None:  # type: ignore[no-untyped-def]
    server, reloader, mounted = served
    first, second = pairs
    assert server.trusted_by(first) and not server.trusted_by(second)
    swap(second, mounted)
    assert server.trusted_by(first), "nothing changes before the check"
    assert reloader.reload_if_changed() is True
    assert server.trusted_by(second) and not server.trusted_by(first)
    assert reloader.reload_if_changed() is False


def test_a_pair_that_does_not_load_keeps_the_old_one_until_a_good_one_comes(served, pairs, caplog) -> None:  # type: ignore[no-untyped-def]
    server, reloader, mounted = served
    first, second = pairs
    shutil.copyfile(second.cert_file, mounted.cert_file)  # the new certificate with the old key
    assert reloader.reload_if_changed() is False
    assert "keeps presenting the previous one" in caplog.text
    assert server.trusted_by(first)
    shutil.copyfile(second.key_file, mounted.key_file)
    assert reloader.reload_if_changed() is True
    assert server.trusted_by(second)


def test_a_missing_file_is_not_a_change(served, pairs) -> None:  # type: ignore[no-untyped-def]
    server, reloader, mounted = served
    mounted.key_file.unlink()
    assert reloader.reload_if_changed() is False
    assert server.trusted_by(pairs[0])
