"""The pod-create webhook called again (``reinvocationPolicy: IfNeeded``) on a pod it rewrote into a
configuration whose quantities are not written as the API server writes them ("0.5" cores,
"1024Mi"): the API server keeps every quantity in its canonical form ("500m", "1Gi"), so the
second call sees the configuration's amounts spelled otherwise. They are the same amounts: it
patches nothing (and counts the pod placed once), as for a configuration written canonically.
Likewise a toleration with empty fields, which the API server keeps without them, and a limit
with no request, whose request the API server defaults to it."""

from __future__ import annotations

import json
from typing import Any

from placer.configuration import parse_configurations
from placer.rewrite import without_configuration
from tests.support import kube_objects as k
from tests.unit.test_admission_reinvocation import admitted, called, injected, webhook

CONFIGURATIONS = {"cpu": {"resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"memory": "2048Mi"}}}}


def created_pod() -> dict[str, Any]:
    pod = k.pod("train-q7k2m", gpus=0, labels={"cellfit.io/placement": "cpu"})
    pod["metadata"]["annotations"] = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                                      "cellfit.io/configured-containers": "trainer"}
    (trainer,) = pod["spec"]["containers"]
    trainer["name"], trainer["resources"] = "trainer", {"requests": {"cpu": "1"}}
    return pod


def as_kept(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as the API server hands it to the next webhook: each quantity in canonical form
    (resource.Quantity's String; written out by hand, not by the code under test)."""
    kept = json.loads(json.dumps(pod))
    canonical = {"0.5": "500m", "1024Mi": "1Gi", "2048Mi": "2Gi"}
    for container in kept["spec"]["containers"]:
        for side in ("requests", "limits"):
            values = (container.get("resources") or {}).get(side) or {}
            for name, amount in values.items():
                values[name] = canonical.get(amount, amount)
    return kept


def test_called_again_on_the_pod_as_the_api_server_keeps_it_it_patches_nothing() -> None:
    service, metrics = webhook()
    rewritten = as_kept(admitted(service, created_pod()))
    assert rewritten["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    again = called(service, injected(rewritten))
    assert again == {"uid": again["uid"], "allowed": True}, again
    assert metrics.admission_reviews.labels(result="placed")._value.get() == 1
    assert metrics.admission_reviews.labels(result="unchanged")._value.get() == 1


def test_another_amount_is_still_set_back_to_the_configurations() -> None:
    # A later webhook (a vertical autoscaler's) that changed the amount: the configuration's again.
    service, _ = webhook()
    rewritten = as_kept(admitted(service, created_pod()))
    rewritten["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "750m"
    pod = admitted(service, rewritten)
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "0.5"


def test_a_toleration_written_with_empty_fields_is_not_added_again() -> None:
    # The API server drops a toleration's empty fields (omitempty: "value": "", "effect": ""): the
    # second call saw the configuration's toleration missing and appended it again, a duplicate.
    configurations = {"cpu": {"resources": {"cpu": "4"},
                              "tolerations": [{"key": "pool", "operator": "Exists", "value": "", "effect": ""}]}}
    pod = created_pod()
    pod["metadata"]["annotations"]["cellfit.io/configurations"] = json.dumps(configurations)
    service, _ = webhook()
    rewritten = admitted(service, pod)
    assert rewritten["spec"]["tolerations"][-1] == {"key": "pool", "operator": "Exists", "value": "", "effect": ""}
    kept = json.loads(json.dumps(rewritten))
    kept["spec"]["tolerations"][-1] = {"key": "pool", "operator": "Exists"}  # as the API server keeps it
    again = called(service, kept)
    assert again == {"uid": again["uid"], "allowed": True}, again


def test_a_toleration_written_with_empty_fields_is_taken_out_of_a_template_placed_again() -> None:
    # The Job's template keeps the first configuration's toleration as the API server does (no
    # empty fields); placed again on another kind, the template must shed it, not keep it.
    configuration = parse_configurations(json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"},
                                                             "tolerations": [{"key": "pool", "operator": "Exists", "value": ""}]}}))["gpu"]
    template = {"spec": {"containers": [{"name": "trainer"}], "tolerations": [{"key": "pool", "operator": "Exists"}]}}
    assert without_configuration(template, configuration)["spec"]["tolerations"] == []


def test_a_limit_without_a_request_is_the_request_the_api_server_defaults() -> None:
    # A configuration limiting memory with no request of it: the API server defaults the request
    # to the limit in the pod it keeps, and the second call re-sent the resources.
    configurations = {"cpu": {"resources": {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}}}}
    pod = created_pod()
    pod["metadata"]["annotations"]["cellfit.io/configurations"] = json.dumps(configurations)
    service, metrics = webhook()
    rewritten = admitted(service, pod)
    trainer = rewritten["spec"]["containers"][0]
    assert trainer["resources"] == {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}}
    trainer["resources"]["requests"]["memory"] = "8Gi"  # as the API server keeps it
    again = called(service, injected(rewritten))
    assert again == {"uid": again["uid"], "allowed": True}, again
    assert metrics.admission_reviews.labels(result="placed")._value.get() == 1
