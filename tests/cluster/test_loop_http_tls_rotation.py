"""The event loop's API client (scheduler/cluster/loop_http.py) follows rotated certificates:
a client certificate and key replaced on disk (kubeadm's, cert-manager's), and the CA file (the
service account's projected bundle) once the API server's certificate is signed by another CA.
Against a real TLS server on loopback that requires a client certificate and answers with the
common name of the one it was shown."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client as k8s

from scheduler.cluster import loop_http
from scheduler.errors import KubernetesApiError
from tests.cluster.test_loop_http import event_loop_kind  # noqa: F401  (autouse: asyncio's loop and uvloop's)
from tests.support.tls import ServingCertificate, make_serving_certificate

CHECK = loop_http.TLS_FILES_CHECK_SECONDS


class ClientAuthority:
    """A CA that signs client certificates (the API server's --client-ca-file)."""

    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.certificate = self._builder(self.name, self.key.public_key()).add_extension(
            x509.BasicConstraints(ca=True, path_length=0), critical=True).sign(self.key, hashes.SHA256())

    def _builder(self, subject: x509.Name, public_key: Any) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.timezone.utc)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(self.name).public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1)))

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str) -> tuple[bytes, bytes]:
        """A client certificate for ``common_name`` and its key, as PEM."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        certificate = self._builder(subject, key.public_key()).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False).sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def replace_file(path: Path, content: bytes) -> None:
    """As a rotation writes it: a new file renamed over the old one (a new inode)."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(content)
    os.replace(fresh, path)


class ApiServer:
    """A TLS server that requires a client certificate signed by its client CA and answers with
    the certificate's common name. Its serving certificate and client CA can be replaced, as
    an API server restarted with rotated ones: new handshakes take them (its context's SNI
    callback, run for every ClientHello), and :meth:`drop_connections` closes the open ones."""

    def __init__(self, serving: ServingCertificate, client_ca: ClientAuthority, *, keep_alive: bool) -> None:
        self.context = self.make_context(serving, client_ca)
        self.handshakes: list[str] = []  # the client certificate's common name, per connection
        self._open: set[Any] = set()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._open.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._open.discard(self.connection)
                super().finish()

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                subject = dict(item[0] for item in self.connection.getpeercert()["subject"])
                body = json.dumps({"client": subject["commonName"]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                if not keep_alive:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(body)

        listening = self.make_context(serving, client_ca)  # its verify mode stays the connection's
        listening.sni_callback = self._hand_over
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = listening.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def make_context(serving: ServingCertificate, client_ca: ClientAuthority) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(serving.cert_file, serving.key_file)
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=client_ca.pem().decode())
        return context

    def _hand_over(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        connection.context = self.context

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.httpd.server_address[1]}"

    def drop_connections(self) -> None:
        with self._lock:
            for connection in list(self._open):
                try:
                    connection.shutdown(2)
                except OSError:
                    pass

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Files:
    """The client's certificate, key and CA files, as a kubeconfig names them."""

    def __init__(self, directory: Path, *, ca: bytes, pair: tuple[bytes, bytes]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.ca, self.cert, self.key = directory / "ca.crt", directory / "client.crt", directory / "client.key"
        self.ca.write_bytes(ca)
        self.rotate(pair)

    def rotate(self, pair: tuple[bytes, bytes]) -> None:
        replace_file(self.cert, pair[0])
        replace_file(self.key, pair[1])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def client(server: ApiServer, files: Files, clock: Clock, *, max_connections: int = 1) -> loop_http.LoopHttpClient:
    configuration = k8s.Configuration()
    configuration.host = server.url
    configuration.ssl_ca_cert, configuration.cert_file, configuration.key_file = str(files.ca), str(files.cert), str(files.key)
    http = loop_http.for_configuration(configuration, headers=dict, timeout_seconds=5, max_connections=max_connections, clock=clock)
    assert http is not None
    return http


async def shown(http: loop_http.LoopHttpClient) -> str:
    """The common name of the client certificate the server was shown."""
    status, body = await http.request("GET", "/whoami")
    assert status == 200
    return str(json.loads(body)["client"])


@pytest.fixture
def serving(tmp_path: Path) -> ServingCertificate:
    return make_serving_certificate(tmp_path / "serving")


@pytest.fixture
def servers() -> Iterator[list[ApiServer]]:
    started: list[ApiServer] = []
    yield started
    for server in started:
        server.stop()


def test_a_rotated_client_certificate_is_presented_from_the_next_look_at_the_files(serving, servers, tmp_path):
    authority = ClientAuthority("client-ca")
    server = ApiServer(serving, authority, keep_alive=False)  # each request on a new connection
    servers.append(server)
    files, clock = Files(tmp_path / "client", ca=serving.ca_pem, pair=authority.issue("cellfit-1")), Clock()
    http = client(server, files, clock)

    async def scenario() -> list[str]:
        seen = [await shown(http)]
        files.rotate(authority.issue("cellfit-2"))
        clock.now += CHECK - 1
        seen.append(await shown(http))  # not looked at yet: a stat per connection would cost every bind
        clock.now += 1
        seen.append(await shown(http))
        return seen

    assert asyncio.run(scenario()) == ["cellfit-1", "cellfit-1", "cellfit-2"]


def test_a_half_written_rotation_keeps_the_last_pair_until_it_is_whole(serving, servers, tmp_path, caplog):
    authority = ClientAuthority("client-ca")
    server = ApiServer(serving, authority, keep_alive=False)
    servers.append(server)
    files, clock = Files(tmp_path / "client", ca=serving.ca_pem, pair=authority.issue("cellfit-1")), Clock()
    http = client(server, files, clock)
    certificate, key = authority.issue("cellfit-2")

    async def scenario() -> list[str]:
        seen = [await shown(http)]
        replace_file(files.cert, certificate)  # the key is still the old one: they do not match
        clock.now += CHECK
        seen.append(await shown(http))
        replace_file(files.key, key)
        clock.now += CHECK
        seen.append(await shown(http))
        return seen

    with caplog.at_level(logging.WARNING, logger="scheduler.cluster.loop_http"):
        assert asyncio.run(scenario()) == ["cellfit-1", "cellfit-1", "cellfit-2"]
    assert any("did not load; the last ones are used" in record.getMessage() for record in caplog.records)


def test_a_server_certificate_of_a_rotated_ca_is_trusted_at_once_from_the_new_ca_file(serving, servers, tmp_path):
    # The API server restarts with a certificate of a new CA, and the CA file (the projected
    # service-account bundle) already names it: the handshake with the old CA fails, the files
    # are looked at then, and the request goes on a connection made with them.
    authority = ClientAuthority("client-ca")
    server = ApiServer(serving, authority, keep_alive=True)
    servers.append(server)
    files, clock = Files(tmp_path / "client", ca=serving.ca_pem, pair=authority.issue("cellfit-1")), Clock()
    http = client(server, files, clock)
    renewed = make_serving_certificate(tmp_path / "renewed")

    async def scenario() -> str:
        await shown(http)
        server.context = ApiServer.make_context(renewed, authority)
        server.drop_connections()
        replace_file(files.ca, renewed.ca_pem)
        return await shown(http)  # the clock has not moved: no periodic look

    assert asyncio.run(scenario()) == "cellfit-1"


def test_a_client_certificate_the_server_refuses_fails_one_request_and_the_next_reads_the_files(serving, servers, tmp_path):
    # The API server restarts trusting a new client CA; the client's files already hold a
    # certificate of it. Under TLS 1.3 the refusal comes after the client sent its request: that
    # request fails (resending it could repeat a bind), the idle connections are closed, and the
    # next request reads the files without waiting for the periodic look.
    old, new = ClientAuthority("client-ca-1"), ClientAuthority("client-ca-2")
    server = ApiServer(serving, old, keep_alive=True)
    servers.append(server)
    files, clock = Files(tmp_path / "client", ca=serving.ca_pem, pair=old.issue("cellfit-1")), Clock()
    http = client(server, files, clock)

    async def scenario() -> tuple[str, int, str]:
        first = await shown(http)
        server.context = ApiServer.make_context(serving, new)
        server.drop_connections()
        files.rotate(new.issue("cellfit-2"))
        with pytest.raises(KubernetesApiError, match="unreachable"):
            await shown(http)
        return first, http.idle_connections, await shown(http)

    assert asyncio.run(scenario()) == ("cellfit-1", 0, "cellfit-2")


def test_the_kubernetes_clients_own_path_reads_the_files_for_each_new_connection(serving, servers, tmp_path):
    # Every other call (lists, watches, patches) goes through the Kubernetes client's urllib3
    # pool, which loads the certificate, key and CA files for each connection it opens.
    authority = ClientAuthority("client-ca")
    server = ApiServer(serving, authority, keep_alive=False)
    servers.append(server)
    files = Files(tmp_path / "client", ca=serving.ca_pem, pair=authority.issue("cellfit-1"))
    configuration = k8s.Configuration()
    configuration.host = server.url
    configuration.ssl_ca_cert, configuration.cert_file, configuration.key_file = str(files.ca), str(files.cert), str(files.key)
    pool = k8s.ApiClient(configuration).rest_client.pool_manager

    def whoami() -> str:
        return str(json.loads(pool.request("GET", f"{server.url}/whoami").data)["client"])

    first = whoami()
    files.rotate(authority.issue("cellfit-2"))
    assert (first, whoami()) == ("cellfit-1", "cellfit-2")
