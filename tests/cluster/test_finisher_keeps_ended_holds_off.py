"""A replica that finishes a preemptor's record (records.py ``owed``) at the preemptor's binding
does not write back a resume hold that has ended on it (review27 R1).

Replica B watches from before replica A's decision, so no list of B's settled the record. A
decides and writes everything (the record on te-0, the Job's count and ``cellfit.io/resume-holds``).
be-0 exits, and B binds the Job's next pod be-1 on gpu-b: B's hold ends and B takes uid-be-0 off
the Job's record. Then te-0 binds through B, which finishes the record's owed writes: before, it
wrote ``{"uid-be-0":"gpu-a"}`` back on the Job, which no replica held any more, so nothing took it
off and every restart kept gpu-a's room for the Job's next pending pod.

Through ClusterCache and the extender service over the API double of
tests/cluster/test_preemption_finished_after_kill.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.constants import ANNOTATION_PREEMPTIONS, ANNOTATION_PREEMPTOR_HOLD, ANNOTATION_RESUME_HOLDS
from tests.cluster.test_preemption_finished_after_kill import ClusterApi
from tests.cluster.test_preemptor_record_write import BE, preempt, replica, trial_pod, victim_pod
from tests.cluster.test_resume_holds_write import shown
from tests.support.kube_objects import node, pod


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))


def be_1(**fields: Any) -> dict[str, Any]:
    return pod("be-1", uid="uid-be-1", gpus=8, priority=750, labels=BE, job_uid="uid-be", **fields)


def bind(service: Any, name: str, uid: str, node_name: str) -> None:
    binding = {"PodName": name, "PodNamespace": "ml", "PodUID": uid, "Node": node_name}
    assert json.loads(asyncio.run(service.bind(json.dumps(binding).encode())).body)["Error"] == ""


def test_the_replica_binding_the_preemptor_does_not_write_back_a_hold_that_ended_on_it() -> None:
    api = ClusterApi(nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache_b, service_b, engine_b = replica(api)
    assert cache_b.jobs is not None
    cache_b.jobs._list_and_replace()
    cache_a, service_a, _ = replica(api)
    preempt(service_a, cache_a)
    (record,) = [w[2]["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] for w in api.writes if w[1].endswith("/pods/te-0/status")]
    assert api.job_annotations[ANNOTATION_RESUME_HOLDS] == '{"uid-be-0":"gpu-a"}'
    # B's watch: the record on te-0, the Job's annotations, be-0 leaving then gone, be-1 pending.
    cache_b._apply_pod(shown(trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})))
    cache_b.jobs._list_and_replace()
    cache_b._apply_pod(shown(victim_pod(leaving=True)))
    cache_b._delete_pod(shown(victim_pod(leaving=True)))
    cache_b._apply_pod(shown(be_1()))
    assert [(h.node, h.kind) for h in engine_b.holds.holds() if h.kind == "resume"] == [("gpu-a", "resume")]
    bind(service_b, "be-1", "uid-be-1", "gpu-b")  # te-0's hold keeps it off gpu-a
    cache_b._apply_pod(shown(be_1(node_name="gpu-b", phase="Running")))
    cache_b._writes.submit(lambda: None).result()  # B's write taking uid-be-0 off has landed
    assert ANNOTATION_RESUME_HOLDS not in api.job_annotations
    cache_b.jobs._list_and_replace()
    bind(service_b, "te-0", "uid-te-0", "gpu-a")  # finishes the record's owed writes
    cache_b._writes.shutdown(wait=True)
    assert api.job_annotations == {ANNOTATION_PREEMPTIONS: "1"}  # before: uid-be-0's hold written back
