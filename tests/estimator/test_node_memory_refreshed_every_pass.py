"""960add1 remembered a node's size (and b96142f/e909eb4 its labels) for NODE_RETURN_SECONDS
only when a pass looked it up, i.e. judged a configuration selecting it; a kind whose runs are
placed is not judged (review24 F3). While every kind's runs were placed for longer than that,
nothing was looked up and the memory of BIG lapsed: BIG deleted (its re-creation not watched yet),
the pod GC deleting the cpu run orphaned on it, the next pass judged cpu never to run 45 s after
BIG left the cache. Now every pass looks up again each selector a Job still here asked for, and
the 120 s are measured on a monotonic clock (``elapsed``), not the wall clock."""

from __future__ import annotations

from typing import Any

from estimator.controller import NODE_RETURN_SECONDS
from tests.estimator.test_controller import RecordingApi, controller, job, pending
from tests.estimator.test_estim23_never_runs import estimator, kinds
from tests.estimator.test_estsync23_nodes_synced import BIG, SMALL, cpu_names, never_told, running
from tests.estimator.test_node_recreated_under_its_name import Clock, sampling
from tests.estimator.test_placer24_selector_never_runs import AUTOSCALED_HINT, NODES, affinity_job, labelled, never_runs
from tests.estimator.test_review_62 import DeletingApi


def test_a_node_gone_for_a_moment_after_long_running_samples_is_not_judged_gone_at_once() -> None:
    api, nodes, clock = DeletingApi(), [SMALL, BIG], Clock()
    sampler = sampling(api, nodes, clock)
    sampler.reconcile()  # looks BIG up: both kinds judged, runs created
    placed: list[Any] = [running(p, "big-node" if "-cpu-" in p["metadata"]["name"] else "small-node") for p in api.created]
    sampler._replace_pods(placed)
    for _ in range(30):  # 150 s of passes while every run is placed: no kind judged
        clock.now += 5
        sampler.reconcile()
    assert never_told(api) == []
    nodes[:] = [SMALL]  # BIG deleted (the cache lacks it until its re-creation is watched)
    clock.now += 45
    # the pod GC deleted the cpu runs bound to the missing node; the gpu runs still run
    sampler._replace_pods([p for p in placed if "-cpu-" not in p.metadata.name])
    sampler.reconcile()
    assert never_told(api) == [], "cpu judged never to run 45 s after BIG left the cache"
    # BIG does not come back: judged gone once NODE_RETURN_SECONDS passed since a pass last saw it
    clock.now += NODE_RETURN_SECONDS
    sampler.reconcile()
    assert len(never_told(api)) == 1


class Monotonic:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def test_a_wall_clock_step_does_not_end_the_memory_of_a_node() -> None:
    api, nodes, wall, elapsed = DeletingApi(), [SMALL, BIG], Clock(), Monotonic()
    sampler = controller(api, cpus=1024, share=1.0, gpus=16, nodes=lambda selector: list(nodes), clock=wall, elapsed=elapsed)
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.reconcile()
    created = cpu_names([p["metadata"]["name"] for p in api.created])
    sampler._replace_pods([pending(p) for p in api.created])
    nodes[:] = [SMALL]
    wall.now += 3600  # the wall clock set forward an hour (NTP), 5 s elapsed
    elapsed.now += 5
    sampler.reconcile()
    assert cpu_names(api.deleted) == [] and never_told(api) == []
    elapsed.now += NODE_RETURN_SECONDS
    sampler.reconcile()
    assert cpu_names(api.deleted) == created and len(never_told(api)) == 1


def test_the_selectors_of_a_job_gone_are_forgotten() -> None:
    api, nodes, clock = DeletingApi(), [SMALL, BIG], Clock()
    sampler = sampling(api, nodes, clock)
    sampler.reconcile()
    assert sampler._selector_users and sampler._sizes_seen
    sampler._replace_jobs([])
    sampler.reconcile()
    assert sampler._selector_users == {} and sampler._sizes_seen == {}


def test_a_label_set_gone_for_a_moment_after_long_running_samples_still_meets_the_affinity() -> None:
    """e909eb4's label memory, the same sequence: the template's affinity only the cpu-small node
    meets, every run placed for 150 s, that node out of the cache 45 s: the cpu kind is not told
    'no node meets it'; once the node stayed away NODE_RETURN_SECONDS, it is."""
    now, nodes, api = [1767225600.0], dict(NODES), RecordingApi()
    sampler = estimator(api, nodes=nodes, clock=lambda: now[0], cpus=1024, share=1.0)
    sampler._node_labels = labelled(nodes)
    sampler._replace_jobs([affinity_job("aff", [{"key": "pool", "operator": "In", "values": ["cpu-small"]}])])
    sampler.reconcile()
    assert sorted(kinds(api)) == ["cpu", "gpu"] and never_runs(api) == []
    placed = [running(p, "small" if "-cpu-" in p["metadata"]["name"] else "gpu") for p in api.created]
    sampler._replace_pods(placed)
    for _ in range(30):
        now[0] += 5
        sampler.reconcile()
    del nodes[(("pool", "cpu-small"),)]
    now[0] += 45
    sampler._replace_pods([p for p in placed if "-cpu-" not in p.metadata.name])
    sampler.reconcile()
    assert never_runs(api) == [], "cpu judged never to run 45 s after its node left the cache"
    now[0] += NODE_RETURN_SECONDS
    sampler.reconcile()
    assert never_runs(api) == ["cpu is not sampled: spec.template.spec.affinity.nodeAffinity."
                               "requiredDuringSchedulingIgnoredDuringExecution: no node meets it (by its labels), "
                               "so no node could ever run it" + AUTOSCALED_HINT]
