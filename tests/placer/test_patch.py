"""The webhook mechanism's JSON Patch gives the same pod as the template mechanism's rewrite."""


from placer.configuration import parse_configurations
from placer.patch import containers_record, placement_patch
from placer.rewrite import apply_configuration
from tests.placer.test_rewrite import CONFIGURATIONS, TEMPLATE
from tests.support.json_patch import patched


def test_the_patched_pod_is_the_rewritten_pod_for_both_configurations():
    for kind in ("cpu", "gpu"):
        operations = placement_patch(TEMPLATE, CONFIGURATIONS[kind])
        # The template records no containers: all of them take the configuration, and the pod records them.
        expected = apply_configuration(TEMPLATE, CONFIGURATIONS[kind], extra_annotations=containers_record(TEMPLATE))
        assert patched(TEMPLATE, operations) == expected


def test_a_pod_already_in_the_configuration_needs_no_patch():
    placed = apply_configuration(TEMPLATE, CONFIGURATIONS["gpu"], extra_annotations=containers_record(TEMPLATE))
    assert placement_patch(placed, CONFIGURATIONS["gpu"]) == []


def test_absent_fields_are_added():
    bare = {"metadata": {"annotations": {"cellfit.io/configured-containers": "c"}}, "spec": {"containers": [{"name": "c"}]}}
    operations = placement_patch(bare, CONFIGURATIONS["cpu"])
    assert {op["path"] for op in operations} == {"/spec/containers/0/resources", "/spec/containers/0/env", "/spec/nodeSelector"}
    assert patched(bare, operations) == apply_configuration(bare, CONFIGURATIONS["cpu"])
    minimal = parse_configurations('{"cpu": {"resources": {"cpu": "1"}}}')["cpu"]
    assert placement_patch(bare, minimal) == [{"op": "add", "path": "/spec/containers/0/resources", "value": {"requests": {"cpu": "1"}}}]
