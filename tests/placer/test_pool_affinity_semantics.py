"""Whether a Job's required node affinity lets its pods onto AlloX's pool (``allox.nodeSelector``)
is judged by kube-scheduler's rules against the pool's labels, which every pool node carries:
terms ORed, a term's requirements ANDed, ``Gt``/``Lt`` comparing integers (a label value that is
no integer matches neither), a term with no requirement matching no node. A requirement on a
label the pool does not name, and ``matchFields`` (``metadata.name``: a pool node's name is not
among its labels, and a node of any name may join the pool), may or may not meet a pool node:
they never prove a conflict. Review: ``Gt``/``Lt`` were ignored, so a Job whose affinity no pool
node can meet was placed and its pods stayed Pending."""

from __future__ import annotations

from typing import Any

import pytest

from placer.rewrite import PoolConflict, apply_configuration, pool_conflict
from tests.placer.test_live23_pool_selector import configured, template

POOL = {"pool": "allox", "gpu-generation": "4"}
TERMS = "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = template({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}})[
        "spec"
    ]
    return spec


def expressions(*requirements: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(requirements)}


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "gpu-generation", "operator": "Gt", "values": ["4"]},
        {"key": "gpu-generation", "operator": "Lt", "values": ["4"]},
        {"key": "pool", "operator": "Gt", "values": ["1"]},  # 'allox' is no integer: it matches neither
        {"key": "pool", "operator": "Lt", "values": ["1"]},
    ],
)
def test_a_comparison_no_pool_node_meets_is_refused_naming_its_expression(requirement: dict[str, Any]) -> None:
    conflict = pool_conflict(required(expressions({"key": "zone", "operator": "Exists"}, requirement)), configured("cpu"), POOL)
    assert conflict is not None
    assert conflict.field == f"{TERMS}[0].matchExpressions[1]"
    assert f"{requirement['key']} {requirement['operator']} {requirement['values'][0]}" in str(conflict)
    assert "pool=allox, gpu-generation=4" in str(conflict)


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "gpu-generation", "operator": "Gt", "values": ["3"]},
        {"key": "gpu-generation", "operator": "Lt", "values": ["5"]},
        {"key": "gpu-generation", "operator": "Gt", "values": ["-1"]},
        {"key": "memory-gib", "operator": "Gt", "values": ["100"]},  # a label the pool does not name
    ],
)
def test_a_comparison_the_pool_meets_or_may_meet_is_no_conflict(requirement: dict[str, Any]) -> None:
    spec = required(expressions(requirement))
    assert pool_conflict(spec, configured("cpu"), POOL) is None
    assert apply_configuration(template(spec), configured("cpu"), pool=POOL)["spec"]["nodeSelector"] == POOL


def test_node_names_never_prove_a_conflict_but_a_label_beside_them_does() -> None:
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-9"]}]}
    assert pool_conflict(required(by_name), configured("cpu"), POOL) is None
    assert pool_conflict(required({**by_name, **expressions({"key": "gpu-generation", "operator": "Lt", "values": ["9"]})}), configured("cpu"), POOL) is None
    excluded = {**by_name, **expressions({"key": "gpu-generation", "operator": "Gt", "values": ["8"]})}
    conflict = pool_conflict(required(excluded), configured("cpu"), POOL)
    assert conflict is not None and conflict.field == f"{TERMS}[0].matchExpressions[0]"


def test_terms_are_ored_a_term_with_no_requirement_matching_no_node() -> None:
    older = expressions({"key": "gpu-generation", "operator": "Lt", "values": ["3"]})
    assert pool_conflict(required(older, expressions({"key": "gpu-generation", "operator": "Gt", "values": ["3"]})), configured("cpu"), POOL) is None
    conflict = pool_conflict(required({}, older), configured("cpu"), POOL)
    assert conflict is not None and conflict.field == TERMS
    assert "each of its 2 terms" in str(conflict) and "gpu-generation Lt 3" in str(conflict)
    (alone,) = [pool_conflict(required({"matchExpressions": []}), configured("cpu"), POOL)]
    assert alone is not None and alone.field == f"{TERMS}[0]"
    assert "no requirement" in str(alone)


def test_the_pooled_selector_refuses_what_pool_conflict_finds() -> None:
    spec = required(expressions({"key": "gpu-generation", "operator": "Gt", "values": ["4"]}))
    with pytest.raises(PoolConflict) as refused:
        apply_configuration(template(spec), configured("cpu"), pool=POOL)
    assert refused.value.field == f"{TERMS}[0].matchExpressions[0]"
