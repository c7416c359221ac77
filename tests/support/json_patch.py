"""RFC 6902 JSON Patch as the API server applies cellfit's patches: ``add`` (to an object's
member, or inserted into a list), ``replace``, ``remove`` and ``test``, whose failure the API
server answers HTTP 422 with the body it writes (:func:`failed_operation_status`), read by
cellfit's own client."""

from __future__ import annotations

import copy
import json
from typing import Any

from scheduler.cluster.api import _status_error
from scheduler.errors import KubernetesApiError


def failed_operation_status(message: str) -> bytes:
    """The API server's answer to a JSON Patch one of whose operations failed
    (apiserver/pkg/endpoints/handlers/patch.go: NewGenericServerResponse(422, ..., err.Error())):
    a generic message, and the operation's own error (json-patch's "testing value /spec/suspend
    failed: test failed") only as the one cause."""
    return json.dumps({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server rejected our request due to an error in our request", "reason": "Invalid",
        "details": {"causes": [{"message": message}]}, "code": 422,
    }).encode()


def failed_test_error(path: str, *, action: str = "patch") -> KubernetesApiError:
    """The error cellfit's client raises for a failed ``test`` of ``path``."""
    return _status_error(422, failed_operation_status(f"testing value {path} failed: test failed"), action)


def patched(document: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """``document`` with ``operations`` applied, as a new document; raises KubernetesApiError
    with status 422 for a failed test (the document is then left as it was)."""
    result = copy.deepcopy(document)
    for operation in operations:
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]]
        target: Any = result
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if operation["op"] == "test":
            found = target[int(last)] if isinstance(target, list) else target.get(last)
            if found != operation["value"]:
                raise failed_test_error(operation["path"])
        elif operation["op"] == "add" and isinstance(target, list):
            target.insert(int(last), operation["value"])
        elif operation["op"] in ("add", "replace"):
            target[int(last) if isinstance(target, list) else last] = operation["value"]
        elif operation["op"] == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise AssertionError(f"cellfit sends no {operation['op']!r} operation")
    return result
