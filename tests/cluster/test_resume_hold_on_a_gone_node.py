"""A resume hold on a node that no longer exists ends, and is taken off its Job's record.

Found in e2e's full run (session 26): test_allox_admission's trial scenario deletes the node a
best-effort Job's pod was preempted on. The Job's record (``cellfit.io/resume-holds``) kept
naming that node and its next pod stayed pending, so every later cellfit rebuilt the hold from
the record: it kept no pod off (no filter asks about a node that is gone), so it never lapsed, and
its pod pending kept it waited for. It lived for ever, and until 0ea7d4c took AlloX's GPUs.

Now the node's deletion ends every hold on it, and once the watch has listed the nodes a hold on
a node it never showed (rebuilt from a record written before the node went) ends at the next look
(``ClusterCache.look_at_holds``); either way the victim is taken off the Job's record, so no
restart rebuilds it, and a preemptor's hold on such a node gives up as one that lapsed.

Through ClusterCache over the API double of tests/cluster/test_resume_holds_write.py."""

from __future__ import annotations

from typing import Any

from scheduler.constants import ANNOTATION_PREEMPTIONS, ANNOTATION_RESUME_HOLDS
from tests.cluster.test_preemptor_record_write import replica
from tests.cluster.test_resume_holds_write import RECORDED, JobServingApi, resumed_pod, waiter
from tests.support.kube_objects import node


def listed(api: JobServingApi) -> tuple[Any, Any]:
    cache, _, engine = replica(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    return cache, engine


def recorded_on(node_name: str) -> dict[str, str]:
    return {ANNOTATION_PREEMPTIONS: "1", ANNOTATION_RESUME_HOLDS: RECORDED.replace("gpu-a", node_name)}


def test_deleting_the_node_ends_the_resume_hold_on_it_and_takes_it_off_the_job() -> None:
    api = JobServingApi(job_annotations=recorded_on("gpu-a"), nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)],
                        pods=[resumed_pod(), waiter()])
    cache, engine = listed(api)
    assert [(h.node, h.kind) for h in engine.holds.holds()] == [("gpu-a", "resume")]
    cache._forget_node("gpu-a")  # the watch's DELETED event
    cache._writes.shutdown(wait=True)
    assert engine.holds.holds() == []  # before: the hold on gpu-a, for ever
    assert api.job_annotations == {ANNOTATION_PREEMPTIONS: "1"}  # no restart rebuilds it
    cache.stop()


def test_a_hold_rebuilt_on_a_node_the_listed_nodes_lack_ends_at_the_next_look() -> None:
    """The Job's record names gpu-gone, deleted while no cellfit watched."""
    api = JobServingApi(job_annotations=recorded_on("gpu-gone"), nodes=[node("gpu-a", gpus=8)], pods=[resumed_pod(), waiter()])
    cache, engine = listed(api)
    assert [(h.node, h.kind) for h in engine.holds.holds()] == [("gpu-gone", "resume")]  # rebuilt from the record
    cache.look_at_holds()
    cache._writes.shutdown(wait=True)
    assert engine.holds.holds() == []  # before: kept, never lapsing
    assert api.job_annotations == {ANNOTATION_PREEMPTIONS: "1"}
    cache.jobs._list_and_replace()  # type: ignore[union-attr]  # the Job read again: not rebuilt
    assert engine.holds.holds() == []
    cache.stop()


def test_before_the_nodes_are_listed_a_hold_on_a_node_not_shown_yet_is_kept() -> None:
    """The Jobs' list may come before the nodes': the node is not known to be gone yet."""
    api = JobServingApi(job_annotations=recorded_on("gpu-a"), nodes=[], pods=[resumed_pod(), waiter()])
    cache, _, engine = replica(api)
    cache.nodes.synced.clear()  # the nodes' list not read yet
    cache.jobs._list_and_replace()  # type: ignore[union-attr]
    cache.look_at_holds()
    assert [(h.node, h.kind) for h in engine.holds.holds()] == [("gpu-a", "resume")]
    assert api.job_annotations == recorded_on("gpu-a")
    cache.stop()
