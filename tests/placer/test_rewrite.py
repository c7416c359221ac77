"""The placer's pure rewrite: a pod template in one configuration, never both."""

import copy
import json

from placer.configuration import parse_configurations
from placer.rewrite import apply_configuration

CONFIGURATIONS = parse_configurations(
    '{"cpu":{"resources":{"cpu":"16","memory":"32Gi"},"env":{"OMP_NUM_THREADS":"16"},'
    '"nodeSelector":{"node.kubernetes.io/instance-type":"c7"}},'
    '"gpu":{"resources":{"nvidia.com/gpu":"1","cpu":"2","memory":"16Gi"},"env":{"CUDA":"1"},'
    '"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}],'
    '"annotations":{"profile":"gpu"}}}'
)

TEMPLATE = {
    "metadata": {"labels": {"app": "bert"}, "annotations": {"keep": "me"}},
    "spec": {
        "schedulerName": "cellfit",
        "initContainers": [{"name": "fetch", "resources": {"requests": {"cpu": "100m"}}}],
        "containers": [
            {"name": "trainer", "image": "t", "env": [{"name": "CUDA", "value": "0"}, {"name": "KEEP", "value": "1"}],
             "resources": {"limits": {"nvidia.com/gpu": "4"}, "requests": {"cpu": "1"}}},
            {"name": "sidecar", "image": "s"},
        ],
        "nodeSelector": {"zone": "a"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


def test_cpu_configuration_replaces_resources_and_never_keeps_the_gpu():
    before = copy.deepcopy(TEMPLATE)
    pod = apply_configuration(TEMPLATE, CONFIGURATIONS["cpu"])
    assert TEMPLATE == before  # the input is untouched
    for container in pod["spec"]["containers"]:
        assert container["resources"] == {"requests": {"cpu": "16", "memory": "32Gi"}}
        assert {"name": "OMP_NUM_THREADS", "value": "16"} in container["env"]
    assert pod["spec"]["initContainers"] == TEMPLATE["spec"]["initContainers"]
    assert pod["spec"]["nodeSelector"] == {"zone": "a", "node.kubernetes.io/instance-type": "c7"}


def test_gpu_configuration_sets_env_tolerations_and_annotations_once():
    pod = apply_configuration(TEMPLATE, CONFIGURATIONS["gpu"], extra_env={"CELLFIT_SAMPLE_ITERATIONS": "20"},
                              extra_labels={"cellfit.io/sample": "true"}, extra_annotations={"cellfit.io/x": "y"})
    trainer = pod["spec"]["containers"][0]
    assert trainer["resources"] == {"requests": {"nvidia.com/gpu": "1", "cpu": "2", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": "1"}}
    # CUDA set where the template names it, so that a $(CUDA) after it still expands.
    assert trainer["env"] == [{"name": "CUDA", "value": "1"}, {"name": "KEEP", "value": "1"}, {"name": "CELLFIT_SAMPLE_ITERATIONS", "value": "20"}]
    assert pod["spec"]["tolerations"] == TEMPLATE["spec"]["tolerations"]  # already there: not doubled
    assert pod["metadata"]["annotations"] == {"keep": "me", "profile": "gpu", "cellfit.io/x": "y"}
    assert pod["metadata"]["labels"] == {"app": "bert", "cellfit.io/sample": "true"}


def test_a_bare_template_gets_what_the_configuration_says():
    pod = apply_configuration({"spec": {"containers": [{"name": "c"}]}}, CONFIGURATIONS["gpu"])
    assert pod["spec"]["containers"][0]["env"] == [{"name": "CUDA", "value": "1"}]
    assert pod["metadata"] == {"annotations": {"profile": "gpu"}}


def test_a_template_as_json_text_is_rewritten_as_the_parsed_one():
    for kind in ("cpu", "gpu"):
        text = json.dumps(TEMPLATE).encode()
        assert apply_configuration(text, CONFIGURATIONS[kind], extra_labels={"l": "v"}) == \
            apply_configuration(TEMPLATE, CONFIGURATIONS[kind], extra_labels={"l": "v"})
