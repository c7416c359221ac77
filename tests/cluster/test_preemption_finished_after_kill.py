"""user26 #1: cellfit killed right after answering the preempt verb. The replica that answered
writes the preemptor's record (``cellfit.io/preemptor-hold``) first and the victim Job's count
(``cellfit.io/preemptions``), its resume holds (``cellfit.io/resume-holds``) and the Events after
it; killed between them, it lost the count (the Job preempted again past maxPreemptions: 1, its
next pod given the best-effort PriorityClass), the Job's hold record (a second restart after the
trial pod bound kept no room) and the Events, and nothing re-derived them. The record now says
what it owes (records.py ``owed``): a replica that reads it finishes it (a restart's list, the
binding's replica), each write one a second writer leaves as it is; every replica counts the Job
at once.

Through ClusterCache and the extender service over the API double that serves the victim's Job
(tests/cluster/test_resume_holds_write.py); the kill is the API refusing, for good, every call
after the record's write."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.preemptor_records import preempted_event_name
from scheduler.constants import ANNOTATION_PREEMPTIONS, ANNOTATION_PREEMPTOR_HOLD, ANNOTATION_RESUME_HOLDS
from scheduler.errors import KubernetesApiError
from scheduler.kube import wire
from scheduler.kube.names import filter_offered
from scheduler.preemption import records
from tests.cluster.test_preemptor_record_write import BE, preempt, replica, trial_pod, victim_pod
from tests.cluster.test_resume_holds_write import RECORDED, JobServingApi, bound, resumed_pod, shown, waiter
from tests.support.kube_objects import node, pod


class Killed(BaseException):
    """The process is gone: nothing after it runs (not an API error the writer tries again)."""


class ClusterApi(JobServingApi):
    """The victim's Job and the pods as the API server holds them; Events under a name of their own
    are made once (a second create is refused, 409, as the API server refuses it); ``kill_after``
    writes, every call fails for good."""

    def __init__(self, *, kill_after: int | None = None, **lists: Any) -> None:
        super().__init__(**lists)
        self.kill_after = kill_after
        self.named: set[str] = set()

    def _alive(self) -> None:
        if self.kill_after is not None and len([w for w in self.writes if w[0] != "GET"]) >= self.kill_after:
            raise Killed()

    def write_path(self, method: str, path: str, body: Any, *, content_type: str = "application/json") -> bytes:
        self._alive()
        return super().write_path(method, path, body, content_type=content_type)

    def get_job(self, *, namespace: str, name: str) -> Any:
        self._alive()
        return super().get_job(namespace=namespace, name=name)

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        self._alive()
        super().patch_job(namespace=namespace, name=name, operations=operations)

    def create_event(self, **event: Any) -> None:
        self._alive()
        name = event.get("name")
        if name is not None:
            if name in self.named:
                raise KubernetesApiError(f"event {name}: already exists (HTTP 409)", status=409)
            self.named.add(name)
        super().create_event(**event)

    def preempted(self) -> list[str]:
        return [e["pod_name"] for e in self.events if e["reason"] == "Preempted"]


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))


def killed_after_the_record() -> str:
    """Replica A answers the preempt verb and is killed after writing the record: the record it wrote."""
    api = ClusterApi(kill_after=1, nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, _ = replica(api)
    preempt(service, cache)
    (record,) = [w[2]["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] for w in api.writes if w[1].endswith("/pods/te-0/status")]
    assert api.job_annotations == {} and api.events == []  # lost with A, before the fix and after
    return str(record)


def restarted(record: str, *, job_annotations: dict[str, str] | None = None, victim_left: bool = True,
              api: ClusterApi | None = None) -> tuple[ClusterApi, Any, Any, Any]:
    """Replica B, started 10 s later: be-0 leaving (kube-scheduler deleted it) or gone, te-0 pending
    with the record; the Jobs listed after the pods. B's writes done."""
    pods = ([victim_pod(leaving=True)] if victim_left else []) + [trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})]
    api = api or ClusterApi(job_annotations=job_annotations, nodes=[node("gpu-a", gpus=8)], pods=pods)
    cache, service, engine = replica(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    return api, cache, service, engine


def test_a_restart_finishes_the_count_the_resume_hold_and_the_event_the_killed_replica_owed() -> None:
    record = killed_after_the_record()
    owed = records.decode(record).owed  # type: ignore[union-attr]
    assert owed is not None and owed.jobs["uid-be"].count == 1
    api, cache, _, engine = restarted(record)
    assert engine.preemptions_of_job("uid-be") == 1  # counted at once, before the writes land
    cache._writes.shutdown(wait=True)
    assert api.job_annotations == {ANNOTATION_PREEMPTIONS: "1", ANNOTATION_RESUME_HOLDS: RECORDED}  # before: {}
    assert api.preempted() == ["be-0"]
    (told,) = [e for e in api.events if e["reason"] == "Preempted"]
    assert told["message"].startswith("preempted by ml/te-0 on node gpu-a: ")
    assert told["name"] == preempted_event_name("be-0", "uid-be-0")


def test_the_job_is_not_preempted_again_past_max_preemptions_and_its_next_pod_keeps_the_room_after_a_second_restart() -> None:
    record = killed_after_the_record()
    api, cache, _, engine = restarted(record, victim_left=False)  # be-0 exited while cellfit was down
    cache._writes.shutdown(wait=True)
    # be-1, the Job's next pod, runs on gpu-b; another trial pod asks: maxPreemptions 1 keeps be-1 out.
    cache._apply_node(wire.NODE_DECODER.decode(json.dumps(node("gpu-b", gpus=8)).encode()))
    running = pod("be-1", uid="uid-be-1", gpus=8, node_name="gpu-b", phase="Running", priority=750, labels=BE, job_uid="uid-be")
    cache._apply_pod(shown(running))
    other = trial_pod()
    other["metadata"].update(name="te-9", uid="uid-te-9")
    cache._apply_pod(shown(other))
    with cache._lock:
        choice = engine.decide_preemption(engine.pods.get("uid-te-9"), {"gpu-b": ["uid-be-1"]}, {})
    assert choice.victims == {}  # before: {"gpu-b": ["uid-be-1"]}, the Job preempted a second time
    assert choice.refusal is not None and "maxPreemptions" in choice.refusal
    # A second kill and restart after te-0 was bound (its record emptied): the Job's record keeps the room.
    again = ClusterApi(job_annotations=api.job_annotations, nodes=[node("gpu-a", gpus=8)], pods=[resumed_pod(), waiter()])
    _, cache2, _, engine2 = restarted("", api=again)
    assert [(h.node, h.kind, h.pods) for h in engine2.holds.holds()] == [("gpu-a", "resume", ("ml/be-1",))]  # before: []
    with cache2._lock:
        assert filter_offered(engine2, engine2.pods.get("uid-other-0"), ["gpu-a"]).feasible == []


def test_a_second_finisher_and_the_deciding_replicas_own_writes_add_nothing() -> None:
    # A wrote everything; B restarts and reads the record all the same: one count, one hold, one Event.
    api = ClusterApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, _ = replica(api)
    preempt(service, cache)
    (record,) = [w[2]["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] for w in api.writes if w[1].endswith("/pods/te-0/status")]
    assert api.job_annotations == {ANNOTATION_PREEMPTIONS: "1", ANNOTATION_RESUME_HOLDS: RECORDED}
    api.pods[:] = [victim_pod(leaving=True), trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})]
    for _ in range(2):  # two replicas (or two restarts) finish it
        _, cache_b, _, _ = restarted(record, api=api)
        cache_b._writes.shutdown(wait=True)
    assert api.job_annotations == {ANNOTATION_PREEMPTIONS: "1", ANNOTATION_RESUME_HOLDS: RECORDED}
    assert api.preempted() == ["be-0"]
    # A later preemption of the Job (count 2) is not lowered by finishing the first one again.
    api.job["metadata"]["annotations"][ANNOTATION_PREEMPTIONS] = "2"
    _, cache_c, _, _ = restarted(record, api=api)
    cache_c._writes.shutdown(wait=True)
    assert api.job_annotations[ANNOTATION_PREEMPTIONS] == "2"


def test_the_replica_that_binds_the_preemptor_finishes_a_record_it_saw_only_through_its_watch() -> None:
    """Two replicas: B ran before A's decision, so no list of B's reads the record; A is killed
    after it. B's watch counts the Job at once, and its binding of te-0, which empties the
    record, writes what the record owed."""
    record = killed_after_the_record()
    api = ClusterApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, engine = replica(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    cache._apply_pod(shown(trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})))  # A's record, through the watch
    assert engine.preemptions_of_job("uid-be") == 1
    cache._delete_pod(shown(victim_pod(leaving=True)))  # be-0 exits
    binding = {"PodName": "te-0", "PodNamespace": "ml", "PodUID": "uid-te-0", "Node": "gpu-a"}
    assert json.loads(asyncio.run(service.bind(json.dumps(binding).encode())).body)["Error"] == ""
    assert api.binding_annotations["uid-te-0"][ANNOTATION_PREEMPTOR_HOLD] == ""
    cache._apply_pod(shown(bound(trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: ""}))))
    cache._writes.shutdown(wait=True)
    assert api.job_annotations == {ANNOTATION_PREEMPTIONS: "1", ANNOTATION_RESUME_HOLDS: RECORDED}  # before: {}
    assert api.preempted() == ["be-0"]


def test_a_record_of_another_scheduler_or_that_owes_nothing_is_not_finished() -> None:
    record = killed_after_the_record()
    foreign = trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})
    foreign["spec"]["schedulerName"] = "default-scheduler"
    api = ClusterApi(nodes=[node("gpu-a", gpus=8)], pods=[foreign])
    cache, _, engine = replica(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    cache._writes.shutdown(wait=True)
    assert api.job_annotations == {} and api.events == [] and engine.preemptions_of_job("uid-be") == 0
    older = '{"node":"gpu-a","victims":["uid-be-0"],"resumes":{"uid-be-0":"uid-be"}}'  # a version before owed
    api, cache, _, _ = restarted(older)
    cache._writes.shutdown(wait=True)
    assert api.job_annotations == {} and api.preempted() == []
