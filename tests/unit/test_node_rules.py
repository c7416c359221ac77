"""kube-scheduler's node filters that read only the pod's spec and the node's labels, name and
taints (scheduler/kube/node_rules.py), decoded from the JSON the API server sends."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.errors import InvalidRequest
from scheduler.kube import node_rules


def spec(**fields: Any) -> node_rules.ConstrainedPodSpec:
    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [{"name": "c"}], **fields}}
    return node_rules.pods_of(json.dumps({"items": [pod]}).encode())[0].spec


def node(name: str = "n1", *, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False) -> node_rules.TaintedNode:
    body = {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or [], "unschedulable": unschedulable}}
    return node_rules.nodes_of(json.dumps({"items": [body]}).encode())[0]


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def test_a_pod_without_constraints_may_go_to_any_plain_node():
    assert node_rules.why_not(spec(), node()) is None


def test_node_selector_needs_every_label():
    pod = spec(nodeSelector={"zone": "z1", "gpu": "v100"})
    assert node_rules.why_not(pod, node(labels={"zone": "z1", "gpu": "v100", "extra": "x"})) is None
    assert node_rules.why_not(pod, node(labels={"zone": "z1"})) == "node(s) didn't match Pod's node affinity/selector"
    assert node_rules.why_not(pod, node(labels={"zone": "z2", "gpu": "v100"})) is not None


@pytest.mark.parametrize(
    ("requirement", "labels", "admits"),
    [
        (expression("zone", "In", "z1", "z2"), {"zone": "z2"}, True),
        (expression("zone", "In", "z1"), {"zone": "z3"}, False),
        (expression("zone", "In", "z1"), {}, False),
        (expression("zone", "NotIn", "z1"), {"zone": "z2"}, True),
        (expression("zone", "NotIn", "z1"), {}, True),  # as in Kubernetes: an absent label is not in the set
        (expression("zone", "NotIn", "z1"), {"zone": "z1"}, False),
        (expression("gpu", "Exists"), {"gpu": ""}, True),
        (expression("gpu", "Exists"), {}, False),
        (expression("gpu", "DoesNotExist"), {}, True),
        (expression("gpu", "DoesNotExist"), {"gpu": "a"}, False),
        (expression("memory-gb", "Gt", "100"), {"memory-gb": "128"}, True),
        (expression("memory-gb", "Gt", "128"), {"memory-gb": "128"}, False),
        (expression("memory-gb", "Lt", "100"), {"memory-gb": "64"}, True),
        (expression("memory-gb", "Lt", "100"), {"memory-gb": "lots"}, False),
        (expression("memory-gb", "Gt", "1", "2"), {"memory-gb": "64"}, False),  # Gt takes exactly one value
        # Go's strconv.ParseInt reads the label: a sign, ASCII digits, 64 bits; nothing else
        (expression("memory-gb", "Gt", "100"), {"memory-gb": "+128"}, True),
        (expression("memory-gb", "Lt", "0"), {"memory-gb": "-1"}, True),
        (expression("memory-gb", "Gt", "100"), {"memory-gb": "1_000"}, False),
        (expression("memory-gb", "Gt", "100"), {"memory-gb": "\u0661\u0662\u0668"}, False),  # Arabic-Indic 128
        (expression("memory-gb", "Gt", "100"), {"memory-gb": "99999999999999999999"}, False),  # beyond int64
    ],
)
def test_node_affinity_operators(requirement: dict[str, Any], labels: dict[str, str], admits: bool):
    pod = spec(affinity=required({"matchExpressions": [requirement]}))
    assert (node_rules.why_not(pod, node(labels=labels)) is None) is admits


def test_node_affinity_terms_are_ored_and_their_requirements_anded():
    pod = spec(affinity=required(
        {"matchExpressions": [expression("zone", "In", "z1"), expression("gpu", "Exists")]},
        {"matchFields": [expression("metadata.name", "In", "special")]},
    ))
    assert node_rules.why_not(pod, node(labels={"zone": "z1", "gpu": "x"})) is None
    assert node_rules.why_not(pod, node(labels={"zone": "z1"})) is not None  # first term half met, second not
    assert node_rules.why_not(pod, node("special")) is None  # second term, by the node's name


def test_empty_terms_match_no_node():
    assert node_rules.why_not(spec(affinity=required()), node()) is not None
    assert node_rules.why_not(spec(affinity=required({})), node()) is not None


def test_taints_that_refuse_pods_must_be_tolerated():
    broken = {"key": "gpu", "value": "broken", "effect": "NoSchedule"}
    evicting = {"key": "maintenance", "value": "", "effect": "NoExecute"}
    preferring = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}
    assert node_rules.why_not(spec(), node(taints=[preferring])) is None  # a preference filters nothing
    assert node_rules.why_not(spec(), node(taints=[broken])) == "node(s) had untolerated taint {gpu: broken}"
    assert node_rules.why_not(spec(), node(taints=[evicting])) is not None
    tolerating = [{"key": "gpu", "operator": "Equal", "value": "broken", "effect": "NoSchedule"},
                  {"key": "maintenance", "operator": "Exists"}]
    assert node_rules.why_not(spec(tolerations=tolerating), node(taints=[broken, evicting])) is None
    wrong_value = [{"key": "gpu", "value": "fine", "effect": "NoSchedule"}]
    assert node_rules.why_not(spec(tolerations=wrong_value), node(taints=[broken])) is not None
    wrong_effect = [{"key": "gpu", "value": "broken", "effect": "NoExecute"}]
    assert node_rules.why_not(spec(tolerations=wrong_effect), node(taints=[broken])) is not None
    everything = [{"operator": "Exists"}]
    assert node_rules.why_not(spec(tolerations=everything), node(taints=[broken, evicting])) is None


def test_a_cordoned_node_takes_only_pods_tolerating_its_taint():
    assert node_rules.why_not(spec(), node(unschedulable=True)) == "node(s) were unschedulable"
    tolerating = [{"key": node_rules.UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    assert node_rules.why_not(spec(tolerations=tolerating), node(unschedulable=True)) is None


def test_a_pod_naming_its_node_goes_there_only():
    assert node_rules.why_not(spec(nodeName="n1"), node("n1")) is None
    assert node_rules.why_not(spec(nodeName="n1"), node("n2")) is not None


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}},
         "spec.affinity.podAntiAffinity (required terms)"),
        ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}},
         "spec.affinity.podAffinity (required terms)"),
        ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
         "spec.topologySpreadConstraints (whenUnsatisfiable: DoNotSchedule)"),
        ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]}, "spec.volumes['data'] (a volume claim)"),
        # kube-scheduler's DynamicResources filter allocates the claim's devices on the nodes that have them
        ({"resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "rdma"}]}, "spec.resourceClaims (dynamic resource allocation)"),
    ],
)
def test_what_the_rules_do_not_model_is_named(fields: dict[str, Any], named: str):
    assert node_rules.unmodelled(spec(**fields)) == named


def test_preferences_and_plain_volumes_are_no_obstacle():
    pod = spec(
        affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}},
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
        volumes=[{"name": "scratch", "emptyDir": {}}],
    )
    assert node_rules.unmodelled(pod) is None


def test_an_item_that_does_not_read_is_left_out_not_the_list():
    good = {"metadata": {"name": "ok"}, "spec": {"taints": []}}
    bad = {"metadata": {"name": "odd"}, "spec": {"taints": "not a list"}}
    assert [n.metadata.name for n in node_rules.nodes_of(json.dumps({"items": [bad, good]}).encode())] == ["ok"]
    pods = {"items": [{"metadata": {"name": "odd"}, "spec": {"tolerations": 7}}, {"metadata": {"name": "ok"}, "spec": {}}]}
    assert [p.metadata.name for p in node_rules.pods_of(json.dumps(pods).encode())] == ["ok"]


def test_a_list_that_does_not_read_is_an_error_naming_it():
    with pytest.raises(InvalidRequest, match="the API server's list did not read"):
        node_rules.nodes_of(b"<html>proxy error</html>")
