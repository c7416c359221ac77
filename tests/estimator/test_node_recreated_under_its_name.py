"""A node deleted and re-created under its name (a VM replaced, a kubelet re-registering) leaves
the watch cache without it between its two watch events. A pass of the estimator in that gap
judged a configuration only that node holds never to run: its unbound samples were deleted, and
with the other configuration's samples done the Job was settled on that one alone, which the
node's return did not undo (settled Jobs are not judged again). Now a node size the estimator
saw within ``NODE_RETURN_SECONDS`` still counts: the judgement waits that long for the node to
come back, and is made once it has not (the node left for good)."""

from __future__ import annotations

from typing import Any

from estimator.controller import NODE_RETURN_SECONDS
from tests.estimator.test_controller import controller, finished, job, pending
from tests.estimator.test_estsync23_nodes_synced import BIG, SMALL, cpu_names, never_told
from tests.estimator.test_review_62 import DeletingApi


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def sampling(api: DeletingApi, nodes: list[Any], clock: Clock) -> Any:
    sampler = controller(api, cpus=1024, share=1.0, gpus=16, nodes=lambda selector: list(nodes), clock=clock)
    sampler._replace_jobs([job("big", cpu="200")])
    return sampler


def test_a_pass_between_the_nodes_delete_and_its_return_neither_deletes_samples_nor_settles_the_job() -> None:
    api, nodes, clock = DeletingApi(), [SMALL, BIG], Clock()
    sampler = sampling(api, nodes, clock)
    for _ in range(6):  # every run created: gpu's finish, cpu's wait unbound
        sampler.reconcile()
        sampler._replace_pods([finished(p, 10.0) if "-gpu-" in p["metadata"]["name"] else pending(p) for p in api.created])
        clock.now += 1
    nodes[:] = [SMALL]  # the big node deleted; its re-creation not watched yet
    sampler.reconcile()
    clock.now += 5
    nodes[:] = [SMALL, BIG]  # back under its name
    sampler.reconcile()
    (view,) = [j for j in sampler.inspect()["jobs"] if j["name"] == "big"]
    assert cpu_names(api.deleted) == [] and never_told(api) == []
    assert view["state"] == "sampling" and "cpu not sampled" not in str(view["message"]), view


def test_a_node_that_does_not_come_back_is_judged_gone_after_the_wait() -> None:
    api, nodes, clock = DeletingApi(), [SMALL, BIG], Clock()
    sampler = sampling(api, nodes, clock)
    sampler.reconcile()
    created = cpu_names([p["metadata"]["name"] for p in api.created])
    sampler._replace_pods([pending(p) for p in api.created])
    nodes[:] = [SMALL]
    sampler.reconcile()
    assert cpu_names(api.deleted) == [] and never_told(api) == []
    clock.now += NODE_RETURN_SECONDS + 1
    sampler.reconcile()
    assert cpu_names(api.deleted) == created
    assert len(never_told(api)) == 1


def test_a_configuration_no_node_seen_ever_held_is_judged_at_once() -> None:
    api, clock = DeletingApi(), Clock()
    sampler = sampling(api, [SMALL], clock)
    sampler.reconcile()
    assert cpu_names([p["metadata"]["name"] for p in api.created]) == [] and len(never_told(api)) == 1
