"""RFC 6902 JSON Patch as the API server applies cellfit's patches: ``add`` (to an object's
member, or inserted into a list), ``replace``, ``remove`` and ``test``, whose failure the API
server answers HTTP 422."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.errors import KubernetesApiError


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
                raise KubernetesApiError(f"testing value {operation['path']} failed", status=422)
        elif operation["op"] == "add" and isinstance(target, list):
            target.insert(int(last), operation["value"])
        elif operation["op"] in ("add", "replace"):
            target[int(last) if isinstance(target, list) else last] = operation["value"]
        elif operation["op"] == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise AssertionError(f"cellfit sends no {operation['op']!r} operation")
    return result
