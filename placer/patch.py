"""The placer's webhook mechanism, pure: a pod being created and the configuration its Job was
placed in → the JSON Patch (RFC 6902) that makes the pod exactly that configuration.

Used where the suspended Job's pod template cannot take the configuration's resources
(Kubernetes without KEP-5440, MutablePodResourcesForSuspendedJobs): the Job's pods are rewritten
as they are created instead. The patch is computed from :func:`placer.rewrite.apply_configuration`,
so both mechanisms give the same pod.
"""

from __future__ import annotations

from typing import Any, Mapping

from placer.configuration import Configuration
from placer.rewrite import apply_configuration

_MISSING = object()


def placement_patch(pod: Mapping[str, Any], configuration: Configuration) -> list[dict[str, Any]]:
    """JSON Patch operations turning ``pod`` into ``configuration``; empty when it already is."""
    placed = apply_configuration(pod, configuration)
    operations: list[dict[str, Any]] = []
    spec, placed_spec = pod.get("spec") or {}, placed["spec"]
    for index, (container, placed_container) in enumerate(zip(spec.get("containers") or [], placed_spec.get("containers") or [])):
        for key in ("resources", "env"):
            _set(operations, f"/spec/containers/{index}/{key}", container.get(key, _MISSING), placed_container.get(key, _MISSING))
    for key in ("nodeSelector", "tolerations"):
        _set(operations, f"/spec/{key}", spec.get(key, _MISSING), placed_spec.get(key, _MISSING))
    metadata = pod.get("metadata") or {}
    _set(operations, "/metadata/annotations", metadata.get("annotations", _MISSING), placed["metadata"].get("annotations", _MISSING))
    return operations


def _set(operations: list[dict[str, Any]], path: str, before: object, after: object) -> None:
    if after is _MISSING or before == after:
        return
    # "add" replaces an existing object member, and creates an absent one (RFC 6902 §4.1).
    operations.append({"op": "add", "path": path, "value": after})
