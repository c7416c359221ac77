"""The bytes of a request the event loop's API client writes (scheduler/cluster/loop_http.py):
its head's lines, in order, with the credentials' headers current at each request, whether the
credentials come back as a new mapping (a refresh) or as the same one changed."""

from __future__ import annotations

from scheduler.cluster import loop_http

BINDING = b'{"apiVersion":"v1","kind":"Binding","target":{"name":"node-1"}}'


def _client(headers: dict[str, str], *, port: int = 443, path_prefix: str = "") -> loop_http.LoopHttpClient:
    endpoint = loop_http.Endpoint(host="10.96.0.1", port=port, path_prefix=path_prefix, ssl=None, server_hostname=None)
    return loop_http.LoopHttpClient(endpoint=endpoint, headers=lambda: headers, timeout_seconds=5, max_connections=4)


def test_a_post_is_written_as_the_api_server_reads_it() -> None:
    client = _client({"authorization": "Bearer token-1"}, port=6443, path_prefix="/gateway")

    written = client._encode("POST", "/api/v1/namespaces/ns/pods/p/binding", BINDING, "application/json")

    assert written == (
        b"POST /gateway/api/v1/namespaces/ns/pods/p/binding HTTP/1.1\r\n"
        b"Host: 10.96.0.1:6443\r\n"
        b"Accept: application/json\r\n"
        b"authorization: Bearer token-1\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: %d\r\n"
        b"User-Agent: cellfit\r\n\r\n%s" % (len(BINDING), BINDING)
    )


def test_a_get_has_no_body_lines() -> None:
    client = _client({"authorization": "Bearer token-1"}, port=80)  # plain HTTP: its default port is not named

    written = client._encode("GET", "/api/v1/namespaces/ns/pods/p", None, "application/json")

    assert written == (
        b"GET /api/v1/namespaces/ns/pods/p HTTP/1.1\r\nHost: 10.96.0.1\r\nAccept: application/json\r\n"
        b"authorization: Bearer token-1\r\nUser-Agent: cellfit\r\n\r\n"
    )


def test_each_request_carries_the_credentials_current_then() -> None:
    headers = {"authorization": "Bearer token-1"}
    current = [headers]
    endpoint = loop_http.Endpoint(host="api", port=443, path_prefix="", ssl=None, server_hostname=None)
    client = loop_http.LoopHttpClient(endpoint=endpoint, headers=lambda: current[0], timeout_seconds=5, max_connections=4)

    first = client._encode("POST", "/x", BINDING, "application/json")
    headers["authorization"] = "Bearer token-2"  # the same mapping, changed
    second = client._encode("POST", "/x", BINDING, "application/json")
    current[0] = {"authorization": "Bearer token-3", "impersonate-user": "someone"}  # a refresh: a new mapping
    third = client._encode("POST", "/x", BINDING, "application/json")
    current[0] = {}  # no credentials any more
    fourth = client._encode("POST", "/x", BINDING, "application/json")

    assert b"authorization: Bearer token-1\r\n" in first
    assert b"authorization: Bearer token-2\r\n" in second and b"token-1" not in second
    assert b"authorization: Bearer token-3\r\nimpersonate-user: someone\r\n" in third
    assert b"authorization" not in fourth and fourth.startswith(b"POST /x HTTP/1.1\r\nHost: api:443\r\nAccept: application/json\r\nContent-Type")
