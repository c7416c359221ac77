"""The webhook mechanism's JSON Patch gives the same pod as the template mechanism's rewrite."""

import copy

from placer.configuration import parse_configurations
from placer.patch import placement_patch
from placer.rewrite import apply_configuration
from tests.placer.test_rewrite import CONFIGURATIONS, TEMPLATE


def apply_add(document, operations):
    """RFC 6902 "add" (the only op placement_patch emits), as the API server applies it."""
    document = copy.deepcopy(document)
    for operation in operations:
        assert operation["op"] == "add"
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in operation["path"].split("/")[1:]]
        target = document
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target.insert(int(last), operation["value"])
        else:
            target[last] = operation["value"]
    return document


def test_the_patched_pod_is_the_rewritten_pod_for_both_configurations():
    for kind in ("cpu", "gpu"):
        operations = placement_patch(TEMPLATE, CONFIGURATIONS[kind])
        assert apply_add(TEMPLATE, operations) == apply_configuration(TEMPLATE, CONFIGURATIONS[kind])


def test_a_pod_already_in_the_configuration_needs_no_patch():
    placed = apply_configuration(TEMPLATE, CONFIGURATIONS["gpu"])
    assert placement_patch(placed, CONFIGURATIONS["gpu"]) == []


def test_absent_fields_are_added():
    bare = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
    operations = placement_patch(bare, CONFIGURATIONS["cpu"])
    assert {op["path"] for op in operations} == {"/spec/containers/0/resources", "/spec/containers/0/env", "/spec/nodeSelector"}
    assert apply_add(bare, operations) == apply_configuration(bare, CONFIGURATIONS["cpu"])
    minimal = parse_configurations('{"cpu": {"resources": {"cpu": "1"}}}')["cpu"]
    assert placement_patch(bare, minimal) == [{"op": "add", "path": "/spec/containers/0/resources", "value": {"requests": {"cpu": "1"}}}]
