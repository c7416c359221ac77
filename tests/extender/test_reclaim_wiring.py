"""The leader's reclaim (scheduler/cluster/reclaim.py) is one of each term's drivers under HiveD
with a cluster, counted in ``cellfit_reclaimed_pods_total``; ``reclaim.enabled: false`` and
resource fit leave it out."""

from __future__ import annotations

from scheduler.cluster.reclaim import ReclaimController
from scheduler.config import parse_settings
from scheduler.extender.runtime import Runtime, build_runtime
from tests.support.api_double import ListingApi
from tests.support.hived import CONFIG, NODES

# Only the reclaim among the leader's drivers; one term from start to shutdown.
ALONE = CONFIG + "estimator: {enabled: false}\nnudge: {enabled: false}\nexchange: {enabled: false}\nleaderElection: {enabled: false}\n"


def reclaimers(runtime: Runtime) -> list[ReclaimController]:
    assert runtime.terms is not None
    runtime.terms.begin()
    try:
        return [driver for driver in runtime.terms.drivers if isinstance(driver, ReclaimController)]
    finally:
        runtime.terms.end()


def test_each_term_of_hived_with_a_cluster_runs_the_reclaim():
    runtime = build_runtime(parse_settings(ALONE), api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    assert len(reclaimers(runtime)) == 1
    assert len(reclaimers(runtime)) == 1  # a second term builds its own, counting into the same metric
    assert "cellfit_reclaimed_pods" in {metric.name for metric in runtime.metrics.registry.collect()}


def test_reclaim_disabled_runs_no_reclaim():
    runtime = build_runtime(parse_settings(ALONE + "reclaim: {enabled: false}\n"), api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    assert runtime.terms is None  # nothing else was asked of a leader


def test_resource_fit_runs_no_reclaim():
    settings = parse_settings("policy: {name: resource-fit}\nestimator: {enabled: false}\nexchange: {enabled: false}\n"
                              "leaderElection: {enabled: false}\n")
    runtime = build_runtime(settings, api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    assert reclaimers(runtime) == []
