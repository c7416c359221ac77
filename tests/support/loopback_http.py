"""An HTTP/1.1 server on an ephemeral loopback port, in a thread, for tests that play the API
server with Python's http.server: its handlers quiet, its address as a URL."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 (keep-alive), no access log on the test's output."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass


class LoopbackServer:
    """``handler`` serving on 127.0.0.1 until :meth:`stop`; over TLS with ``tls``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, tls: ssl.SSLContext | None = None) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self._scheme = "http" if tls is None else "https"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
