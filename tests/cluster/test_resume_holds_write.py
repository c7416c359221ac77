"""The resume holds FitGpp gives a victim's Job are written on the Job (``cellfit.io/resume-holds``)
by the replica that answered the preempt verb, after the preemptor's record and the Job's count,
and taken off by the replica where the hold ends; a replica that lists the cluster afresh (a
restart) after the preemptor was bound keeps the room for the Job's next pod from it. Before, the
only trace of an exited victim was the preemptor's record, which its binding empties.

Through ClusterCache and the extender service over an API double that serves the pods and the
victim's Job (its reads, JSON Patches and resourceVersion); the restart against a real control
plane is e2e/test_fitgpp_restart.py's."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.preemptor_records import RESUME_WRITE_CONFLICTS, write_resume_holds
from scheduler.constants import ANNOTATION_PREEMPTIONS, ANNOTATION_RESUME_HOLDS
from scheduler.errors import KubernetesApiError
from scheduler.kube import wire
from scheduler.kube.names import filter_offered
from scheduler.preemption.resume_records import JobRef
from tests.cluster.test_preemptor_record_write import BE, WritingApi, preempt, replica, trial_pod, victim_pod
from tests.preemption.test_holds import FakeClock
from tests.support.json_patch import patched
from tests.support.kube_objects import node, pod

JOB = JobRef(uid="uid-be", namespace="ml", name="be")
RECORDED = '{"uid-be-0":"gpu-a"}'


class JobServingApi(WritingApi):
    """:class:`WritingApi` that also holds the victims' Job ``be`` as the API server does: reads
    answer it, JSON Patches change it and its resourceVersion; ``others`` plays another writer
    between a read and each of the next writes."""

    def __init__(self, *, job_annotations: dict[str, str] | None = None, **lists: Any) -> None:
        self.job: dict[str, Any] = {"metadata": {"name": "be", "namespace": "ml", "uid": "uid-be", "resourceVersion": "1"}}
        if job_annotations is not None:
            self.job["metadata"]["annotations"] = dict(job_annotations)
        self.others = 0
        super().__init__(jobs=[self.job], **lists)

    @property
    def job_annotations(self) -> dict[str, str]:
        return dict(self.job["metadata"].get("annotations") or {})

    def get_job(self, *, namespace: str, name: str) -> Any:
        self.writes.append(("GET", f"job {name}", None, ""))
        return msgspec.convert(self.job, wire.Job) if name == "be" else None

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        self.writes.append(("PATCH", f"job {name}", operations, "application/json-patch+json"))
        if self.others:
            self.others -= 1
            self._bump()
        self.job = patched(self.job, operations)
        self._bump()
        self.jobs[:] = [self.job]

    def _bump(self) -> None:
        self.job["metadata"]["resourceVersion"] = str(int(self.job["metadata"]["resourceVersion"]) + 1)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))


def shown(body: dict[str, Any]) -> wire.Pod:
    return wire.POD_DECODER.decode(json.dumps(body).encode())


def bound(body: dict[str, Any], *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body["spec"]["nodeName"] = "gpu-a"
    body["status"]["phase"] = "Running"
    if annotations is not None:
        body["metadata"]["annotations"] = {**(body["metadata"].get("annotations") or {}), **annotations}
    return body


def resumed_pod() -> dict[str, Any]:
    return pod("be-1", uid="uid-be-1", gpus=8, priority=750, labels=BE, job_uid="uid-be")


def waiter() -> dict[str, Any]:
    return pod("other-0", uid="uid-other-0", gpus=8, priority=500, labels=BE, job_uid="uid-other")


def test_the_replica_that_answered_records_the_victims_resume_hold_on_its_job_after_the_count() -> None:
    api = JobServingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, _ = replica(api)
    preempt(service, cache)
    assert api.job_annotations == {ANNOTATION_PREEMPTIONS: "1", ANNOTATION_RESUME_HOLDS: RECORDED}
    assert [(w[0], w[1]) for w in api.writes] == [
        ("PATCH", "/api/v1/namespaces/ml/pods/te-0/status"),  # the preemptor's record first
        ("GET", "job be"), ("PATCH", "job be"),  # the count
        ("GET", "job be"), ("PATCH", "job be"),  # the resume hold
    ]


def test_a_replica_restarted_after_the_preemptor_was_bound_keeps_the_room_for_the_resumed_pod() -> None:
    """user25 #4's limit: cellfit restarted after the victim exited and the trial pod was bound
    (its record emptied), the victim Job's next pod pending and another pod waiting."""
    decided = JobServingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, _ = replica(decided)
    preempt(service, cache)
    # The cluster once te-0 has run and ended: be-0 gone, te-0 finished, be-1 and other-0 pending.
    api = JobServingApi(job_annotations=decided.job_annotations, nodes=[node("gpu-a", gpus=8)], pods=[resumed_pod(), waiter()])
    cache, _, engine = replica(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    assert [(h.node, h.kind, h.pods) for h in engine.holds.holds()] == [("gpu-a", "resume", ("ml/be-1",))]
    with cache._lock:
        kept = filter_offered(engine, engine.pods.get("uid-other-0"), ["gpu-a"])  # type: ignore[arg-type]
        resumed = filter_offered(engine, engine.pods.get("uid-be-1"), ["gpu-a"])  # type: ignore[arg-type]
    assert list(kept.feasible) == [] and "kept for ml/be-1, of a best-effort Job preempted there" in kept.unresolvable["gpu-a"]
    assert list(resumed.feasible) == ["gpu-a"]


def test_the_replica_that_binds_the_resumed_pod_takes_the_hold_off_the_job_once_the_watch_shows_it() -> None:
    api = JobServingApi(job_annotations={ANNOTATION_PREEMPTIONS: "1", ANNOTATION_RESUME_HOLDS: RECORDED},
                        nodes=[node("gpu-a", gpus=8)], pods=[resumed_pod(), waiter()])
    cache, service, engine = replica(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    binding = {"PodName": "be-1", "PodNamespace": "ml", "PodUID": "uid-be-1", "Node": "gpu-a"}
    assert json.loads(asyncio.run(service.bind(json.dumps(binding).encode())).body)["Error"] == ""
    cache._apply_pod(shown(bound(resumed_pod())))
    cache._writes.shutdown(wait=True)
    assert ANNOTATION_RESUME_HOLDS not in api.job_annotations
    assert engine.holds.holds() == []


def test_a_hold_that_gives_up_is_taken_off_the_job() -> None:
    clock = FakeClock()
    api = JobServingApi(job_annotations={ANNOTATION_RESUME_HOLDS: RECORDED}, nodes=[node("gpu-a", gpus=8)], pods=[resumed_pod(), waiter()])
    cache, _, engine = replica(api, clock=clock, hold_seconds=60)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    other = engine.pods.get("uid-other-0")
    assert other is not None
    with cache._lock:
        assert list(filter_offered(engine, other, ["gpu-a"]).feasible) == []  # kept off: the hold's clock starts
        clock.now += 61  # kube-scheduler never places be-1 there
        assert list(filter_offered(engine, other, ["gpu-a"]).feasible) == ["gpu-a"]
    cache._writes.shutdown(wait=True)
    assert ANNOTATION_RESUME_HOLDS not in api.job_annotations


def test_the_write_keeps_the_holds_the_job_names_already_and_takes_off_only_those_ended() -> None:
    api = JobServingApi(job_annotations={ANNOTATION_RESUME_HOLDS: '{"uid-be-7":"gpu-b"}'}, nodes=[])
    write_resume_holds(api, job=JOB, added={"uid-be-0": "gpu-a"}, ended=())
    assert api.job_annotations[ANNOTATION_RESUME_HOLDS] == '{"uid-be-0":"gpu-a","uid-be-7":"gpu-b"}'
    write_resume_holds(api, job=JOB, added={}, ended=("uid-be-7",))
    assert api.job_annotations[ANNOTATION_RESUME_HOLDS] == RECORDED
    write_resume_holds(api, job=JOB, added={}, ended=("uid-be-0",))
    assert ANNOTATION_RESUME_HOLDS not in api.job_annotations
    patches = [w for w in api.writes if w[0] == "PATCH"]
    write_resume_holds(api, job=JOB, added={}, ended=("uid-be-0",))  # said already: nothing written
    assert [w for w in api.writes if w[0] == "PATCH"] == patches


def test_a_job_without_annotations_gets_them_and_a_record_that_does_not_read_is_replaced() -> None:
    api = JobServingApi(nodes=[])
    write_resume_holds(api, job=JOB, added={"uid-be-0": "gpu-a"}, ended=())
    assert api.job_annotations == {ANNOTATION_RESUME_HOLDS: RECORDED}
    api = JobServingApi(job_annotations={ANNOTATION_RESUME_HOLDS: "not json"}, nodes=[])
    write_resume_holds(api, job=JOB, added={"uid-be-0": "gpu-a"}, ended=())
    assert api.job_annotations == {ANNOTATION_RESUME_HOLDS: RECORDED}


@pytest.mark.parametrize("job", [JobRef(uid="uid-be", namespace="ml", name="gone"), JobRef(uid="uid-another", namespace="ml", name="be")])
def test_a_job_gone_or_replaced_under_its_name_is_left_alone(job: JobRef) -> None:
    api = JobServingApi(nodes=[])
    write_resume_holds(api, job=job, added={"uid-be-0": "gpu-a"}, ended=())
    assert [w[0] for w in api.writes] == ["GET"]


def test_another_writer_in_between_is_read_again_and_one_each_time_gives_up() -> None:
    api = JobServingApi(nodes=[])
    api.others = 1
    write_resume_holds(api, job=JOB, added={"uid-be-0": "gpu-a"}, ended=())
    assert api.job_annotations[ANNOTATION_RESUME_HOLDS] == RECORDED
    assert [w[0] for w in api.writes] == ["GET", "PATCH", "GET", "PATCH"]
    api = JobServingApi(nodes=[])
    api.others = RESUME_WRITE_CONFLICTS
    with pytest.raises(KubernetesApiError) as refused:
        write_resume_holds(api, job=JOB, added={"uid-be-0": "gpu-a"}, ended=())
    assert refused.value.status == 409 and "job ml/be" in str(refused.value)

