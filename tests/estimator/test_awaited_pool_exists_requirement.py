"""A pod whose required node affinity asks only that a listed pool's key exist
(``karpenter.sh/nodepool Exists``: any Karpenter node) awaits no pool: the nodes up now carry the
key with other values and run it (review29, LOW). Before, the check that no node outside the
entry runs the pod imagined only a node without the key, so the estimator sampled and the placer
started it as waiting for the first listed pool to join, and AlloX's size judgment was skipped."""

from __future__ import annotations

from typing import Any

from scheduler.kube.joining import awaited_pool

CPU_BIG = {"karpenter.sh/nodepool": "cpu-big"}
GPU_BIG = {"karpenter.sh/nodepool": "gpu-big"}


def affinity(operator: str, *values: str) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": "karpenter.sh/nodepool", "operator": operator}
    if values:
        requirement["values"] = list(values)
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [requirement]}]}}}}


def test_a_requirement_any_value_of_the_key_meets_awaits_no_pool() -> None:
    assert awaited_pool(selector={}, spec=affinity("Exists"), pool={"allox": "yes"}, may_join=[CPU_BIG, GPU_BIG]) is None


def test_a_requirement_only_the_entrys_value_meets_awaits_it() -> None:
    assert awaited_pool(selector={}, spec=affinity("In", "cpu-big"), pool={"allox": "yes"}, may_join=[CPU_BIG, GPU_BIG]) == CPU_BIG
    assert awaited_pool(selector={}, spec=affinity("NotIn", "gpu-big"), pool={"allox": "yes"}, may_join=[CPU_BIG, GPU_BIG]) is None
