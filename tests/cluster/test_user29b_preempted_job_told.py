"""A preempted pod's Job is told of it: kubectl describe job shows a PodPreempted Event naming the
pod, its preemptor and why, as the pod's own Preempted Event does. Seen live (user29): be-2,
preempted by carol/t-gpu, showed only SuccessfulCreate Events; the pod's Event was gone with the
pod within seconds, and only kubectl cellfit why explained it.

The three writers of a victim's Event: the replica that answered the preempt verb (FitGpp), one
that finishes a preemptor's record its replica was killed before telling, and the leader's
HiveD reclaim. The Job is the pod's controller's ownerReference, read from the pod the watch
holds: no API read is made for it."""

from __future__ import annotations

from typing import Any

import pytest

import tests.cluster.test_reclaim_victim_job_outcome as reclaim_tests
from tests.cluster.test_reclaim import Api as ReclaimApi
from scheduler.cluster import cache as cache_module
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from tests.cluster.test_preemption_finished_after_kill import ClusterApi, killed_after_the_record, restarted
from tests.cluster.test_preemptor_record_write import WritingApi, preempt, replica, trial_pod, victim_pod
from tests.preemption.test_hived_reclaim_victim_event import IGNORE_RULE, job
from tests.support.kube_objects import node


class ReadCountingApi(WritingApi):
    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.pod_reads = 0

    def get_pod(self, *args: Any, **kwargs: Any) -> Any:
        self.pod_reads += 1
        return super().get_pod(*args, **kwargs)


def told(api: Any, reason: str) -> list[dict[str, Any]]:
    return [e for e in api.events if e["reason"] == reason]


def test_the_job_of_a_pod_fitgpp_preempts_is_told_without_a_read() -> None:
    api = ReadCountingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, _ = replica(api)
    preempt(service, cache)
    (on_pod,) = told(api, "Preempted")
    (on_job,) = told(api, "PodPreempted")
    assert (on_job["kind"], on_job["namespace"], on_job["pod_name"], on_job["pod_uid"]) == ("Job", "ml", "be", "uid-be")
    assert on_job["warning"] is True
    assert on_job["message"] == f"pod be-0 {on_pod['message']}"
    assert on_job["message"].startswith("pod be-0 preempted by ml/te-0 on node gpu-a: the best-effort pod there cheapest to suspend")
    # The same calls as before: the record, then the Job read for its count and its resume holds.
    assert [w[:2] for w in api.writes] == [("PATCH", "/api/v1/namespaces/ml/pods/te-0/status"), ("GET", "job be"), ("GET", "job be")]
    assert api.pod_reads == 0


def test_a_replica_finishing_a_killed_replicas_preemption_tells_the_job_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))
    record = killed_after_the_record()
    api, cache, _, _ = restarted(record)
    cache._writes.shutdown(wait=True)
    (on_job,) = told(api, "PodPreempted")
    assert (on_job["kind"], on_job["pod_name"], on_job["pod_uid"]) == ("Job", "be", "uid-be")
    assert on_job["message"].startswith("pod be-0 preempted by ml/te-0 on node gpu-a: FitGpp's decision, recorded on the preemptor")
    # Another replica reading the same record makes the same two Events, under their names:
    # refused (409), as the API server refuses a second create.
    tried: list[tuple[str, str]] = []

    class Again(ClusterApi):
        def create_event(self, **event: Any) -> None:
            tried.append((event.get("kind", "Pod"), event["reason"]))
            super().create_event(**event)

    again = Again(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(leaving=True), trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})])
    again.named, again.events = api.named, api.events  # one API server
    restarted(record, api=again)[1]._writes.shutdown(wait=True)
    assert tried == [("Pod", "Preempted"), ("Job", "PodPreempted")]
    assert len(told(api, "PodPreempted")) == 1 and len(told(api, "Preempted")) == 1


def test_the_job_of_a_pod_hived_reclaims_is_told() -> None:
    api = ReclaimApi()
    said, _, victim = reclaim_tests.reclaimed_message(job("ob", backoff_limit=6, rules=[IGNORE_RULE]), api=api)
    (on_job,) = told(api, "PodPreempted")
    number = victim.removeprefix("o")
    assert (on_job["kind"], on_job["pod_name"], on_job["pod_uid"]) == ("Job", f"ob-{number}", f"uid-ob-{number}")
    assert on_job["message"] == f"pod {victim} {said}"
