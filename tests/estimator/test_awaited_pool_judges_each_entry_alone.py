"""Listing another pool in estimator.nodesMayJoin does not change whether this one is awaited
(review28 #6): each entry is judged on the label keys allox.nodeSelector and it name. Before,
the keys of every entry were judged for every entry, so with a second pool listed by another
key (an instance type) a configuration selecting pool cpu-big and an instance type awaited no
pool (it never runs, the estimator said), though cpu-big's node carries an instance-type label
with a value no entry lists."""

from __future__ import annotations

from scheduler.kube.joining import awaited_pool

CPU_BIG = {"karpenter.sh/nodepool": "cpu-big"}
P4D = {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
SELECTOR = {"karpenter.sh/nodepool": "cpu-big", "node.kubernetes.io/instance-type": "m5.4xlarge"}


def test_one_entry_listed_the_pool_is_awaited() -> None:
    assert awaited_pool(selector=SELECTOR, spec={}, pool={}, may_join=[CPU_BIG]) == CPU_BIG


def test_another_pool_listed_by_another_key_does_not_change_it() -> None:
    assert awaited_pool(selector=SELECTOR, spec={}, pool={}, may_join=[CPU_BIG, P4D]) == CPU_BIG
    assert awaited_pool(selector=SELECTOR, spec={}, pool={}, may_join=[P4D, CPU_BIG]) == CPU_BIG


def test_a_pod_selecting_the_second_entrys_key_awaits_that_pool() -> None:
    assert awaited_pool(selector=dict(P4D), spec={}, pool={}, may_join=[CPU_BIG, P4D]) == P4D


def test_a_pod_any_node_of_the_pool_runs_awaits_none() -> None:
    pool = {"cellfit.io/allox": "true"}
    assert awaited_pool(selector=dict(pool), spec={}, pool=pool, may_join=[CPU_BIG, P4D]) is None
    assert awaited_pool(selector={}, spec={}, pool=pool, may_join=[CPU_BIG, P4D]) is None
