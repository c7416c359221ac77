"""The placer's webhook mechanism, pure: a pod being created and the configuration its Job was
placed in → the JSON Patch (RFC 6902) that makes the pod exactly that configuration.

Used where the suspended Job's pod template cannot take the configuration's resources
(Kubernetes without KEP-5440, MutablePodResourcesForSuspendedJobs): the Job's pods are rewritten
as they are created instead. The patch is computed from :func:`placer.rewrite.apply_configuration`,
so both mechanisms give the same pod.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from placer.configuration import Configuration, parse_configurations_cached
from placer.rewrite import apply_configuration
from scheduler.constants import ANNOTATION_CONFIGURATIONS
from scheduler.errors import InvalidAnnotation

_MISSING = object()


def placement_patch(pod: Mapping[str, Any], configuration: Configuration) -> list[dict[str, Any]]:
    """JSON Patch operations turning ``pod`` into ``configuration``; empty when it already is.
    A variable another of the configurations the pod carries (``cellfit.io/configurations``)
    sets, holding that one's value, is taken out first: a Job placed on one kind, suspended
    again and placed on the other keeps the first one's env in its template's containers (the
    API server lets the placer change none of them), and its pods must not run with it."""
    placed = apply_configuration(_without_others_env(pod, configuration), configuration)
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


def _without_others_env(pod: Mapping[str, Any], configuration: Configuration) -> Mapping[str, Any]:
    """``pod`` without the env entries the other configurations it carries set (name and value
    alike: a user's own variable of that name and another value stays); ``pod`` itself when
    there are none, or its configurations do not parse (the caller parsed them already)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CONFIGURATIONS)
    try:
        configurations = parse_configurations_cached(text)
    except InvalidAnnotation:
        return pod
    others = {(name, value) for kind in configurations.kinds if kind != configuration.kind
              for name, value in configurations[kind].env.items() if configuration.env.get(name) != value}
    containers = (pod.get("spec") or {}).get("containers") or []
    if not others or not any(_set_by(entry, others) for container in containers for entry in container.get("env") or []):
        return pod
    copy: dict[str, Any] = json.loads(json.dumps(pod))
    for container in copy["spec"]["containers"]:
        if container.get("env"):
            container["env"] = [entry for entry in container["env"] if not _set_by(entry, others)]
    return copy


def _set_by(entry: Any, others: set[tuple[str, str]]) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("value"), str):
        return False
    return (entry["name"], entry["value"]) in others


def _set(operations: list[dict[str, Any]], path: str, before: object, after: object) -> None:
    if after is _MISSING or before == after:
        return
    # "add" replaces an existing object member, and creates an absent one (RFC 6902 §4.1).
    operations.append({"op": "add", "path": path, "value": after})
