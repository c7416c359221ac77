"""scheduler/kube/joining.py judges whether only a listed pool runs a pod by a node
carrying allox.nodeSelector's labels and the nodesMayJoin entry's, and nothing else. A node an
autoscaler adds also carries the well-known labels every node has (kubernetes.io/os,
kubernetes.io/arch, kubernetes.io/hostname, topology.kubernetes.io/zone, instance type). A pod
template with `nodeSelector: {kubernetes.io/os: linux}` (what many charts and operators write)
and a configuration selecting pool=cpu-big is then judged NOT to wait for the pool: the estimator
calls it never-runs and deletes its sample, and the placer tells it "it never fits" -- the very
review26 #1/#3 outcome nodesMayJoin was made to prevent, for the most ordinary of templates.
"""

from __future__ import annotations

from typing import Any

from scheduler.kube.joining import awaited_pool
from tests.estimator.test_nodes_may_join import job, sampler, told
from tests.estimator.test_placer24_selector_never_runs import never_runs
from tests.estimator.test_estim23_never_runs import kinds
from tests.estimator.test_review_62 import DeletingApi


def test_a_template_selecting_linux_still_waits_for_the_listed_pool() -> None:
    found = awaited_pool(selector={"kubernetes.io/os": "linux", "pool": "cpu-big"}, spec={}, pool={}, may_join=[{"pool": "cpu-big"}])
    assert found == {"pool": "cpu-big"}


def test_a_template_selecting_an_architecture_still_waits_for_the_listed_pool() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                {"key": "pool", "operator": "In", "values": ["cpu-big"]},
                            ]
                        }
                    ]
                }
            }
        }
    }
    assert awaited_pool(selector={}, spec=spec, pool={"cellfit.io/allox": "true"}, may_join=[{"pool": "cpu-big"}]) == {"pool": "cpu-big"}


def test_a_judged_key_still_decides_beside_a_well_known_one() -> None:
    # "pool" is the entry's key: a value no entry lists is no awaited pool, with or without os.
    assert awaited_pool(selector={"kubernetes.io/os": "linux", "pool": "gpu-small"}, spec={}, pool={}, may_join=[{"pool": "cpu-big"}]) is None
    # Only a well-known key: any node of the pool may run it, judged by the nodes there are.
    assert awaited_pool(selector={"kubernetes.io/os": "linux"}, spec={}, pool={"cellfit.io/allox": "true"}, may_join=[{"pool": "cpu-big"}]) is None


def test_an_affinity_term_naming_only_other_keys_may_be_met_by_the_pools_nodes() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["cpu-big"]}]},
                    ]
                }
            }
        }
    }
    assert awaited_pool(selector={}, spec=spec, pool={}, may_join=[{"pool": "cpu-big"}]) is None
    empty: dict[str, Any] = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}}
    assert awaited_pool(selector={}, spec=empty, pool={}, may_join=[{"pool": "cpu-big"}]) is None


def test_the_estimator_samples_a_configuration_whose_affinity_also_names_the_architecture() -> None:
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-big"}])
    estimator._replace_jobs(
        [job("arch", affinity=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}, {"key": "pool", "operator": "In", "values": ["cpu-big"]}])]
    )
    estimator.reconcile()
    assert kinds(api) == ["cpu", "gpu"] and never_runs(api) == []
    assert len(told(api, "ConfigurationAwaitsNode")) == 1
