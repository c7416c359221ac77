"""The preempt verb's FitGpp decision is written on its preemptor (``cellfit.io/preemptor-hold``)
by the replica that answered, in the background and before the Job count and the Events, through
the pod's status subresource and guarded by its UID; a replica that lists the pods afresh (a
restart) keeps the room for the preemptor on the node written, however kube-scheduler left its
nomination; and the pod's binding empties the record. The API is a recording test double; the
restart against a real control plane is e2e/test_fitgpp_restart.py's."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.errors import KubernetesApiError
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import AlwaysReady, ExtenderService
from scheduler.kube import wire
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import schedule
from tests.preemption.test_holds import FakeClock
from tests.preemption.test_hived_preemptor_record import GUARANTEED, NODES as HIVED_NODES, engine as hived_engine, opportunistic
from tests.support.api_double import EventRecordingApi
from tests.support.kube_objects import node, pod

TRIAL = {"cellfit.io/job-class": "trial"}
BE = {"cellfit.io/job-class": "best-effort"}
RECORD = '{"node":"gpu-a","victims":["uid-be-0"],"resumes":{"uid-be-0":"uid-be"}}'  # be-0's Job uid-be resumes on gpu-a
# The decision as this version records it: with what its replica writes after the record (owed).
DECIDED = ('{"node":"gpu-a","victims":["uid-be-0"],"resumes":{"uid-be-0":"uid-be"},"owed":{"jobs":{"uid-be":{"namespace":"ml",'
           '"name":"be","count":1,"holds":{"uid-be-0":"gpu-a"}}},"pods":{"uid-be-0":"ml/be-0"}}}')


class WritingApi(EventRecordingApi):
    """Also records the writes the preemption makes, in order; ``refuse`` answers the record's
    write with that status."""

    def __init__(self, *, refuse: int | None = None, **lists: Any) -> None:
        super().__init__(**lists)
        self.refuse = refuse
        self.writes: list[tuple[str, str, Any, str]] = []

    def write_path(self, method: str, path: str, body: Any, *, content_type: str = "application/json") -> bytes:
        self.writes.append((method, path, body, content_type))
        if self.refuse is not None:
            raise KubernetesApiError(f"{method.lower()} {path}: HTTP {self.refuse}", status=self.refuse)
        return b"{}"

    def get_job(self, *, namespace: str, name: str) -> None:
        self.writes.append(("GET", f"job {name}", None, ""))
        return None  # the Job is gone: no count to write


def trial_pod(*, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body = pod("te-0", uid="uid-te-0", gpus=8, priority=1000, labels=TRIAL, annotations=annotations, job_uid="uid-te")
    body["spec"]["schedulerName"] = "cellfit"
    return body


def victim_pod(*, leaving: bool = False) -> dict[str, Any]:
    body = pod("be-0", uid="uid-be-0", gpus=8, node_name="gpu-a", phase="Running", priority=500, labels=BE, job_uid="uid-be")
    if leaving:  # as kube-scheduler's preemption leaves it
        body["metadata"]["deletionTimestamp"] = "2026-11-28T15:00:00Z"
        body["status"]["conditions"] = [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": "cellfit: preempting to accommodate a higher priority Pod",
            }
        ]
    return body


def replica(api: WritingApi, *, clock: FakeClock | None = None, hold_seconds: float | None = None) -> tuple[ClusterCache, ExtenderService, FitGppEngine]:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=hold_seconds, clock=clock)
    lock = threading.RLock()
    cache = ClusterCache(api=api, engine=engine, lock=lock, gpu_resource="nvidia.com/gpu", pods=engine.pods, jobs=engine)  # type: ignore[arg-type]
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    service = ExtenderService(
        engine=engine,
        lock=lock,
        metrics=ExtenderMetrics(),
        gpu_resource="nvidia.com/gpu",
        cluster=cache,
        readiness=AlwaysReady(),
        preemption=engine,
        pods=engine.pods,
    )
    return cache, service, engine


def preempt(service: ExtenderService, cache: ClusterCache) -> dict[str, Any]:
    body = {"Pod": trial_pod(), "NodeNameToMetaVictims": {"gpu-a": {"Pods": [{"UID": "uid-be-0"}], "NumPDBViolations": 0}}}
    answer: dict[str, Any] = json.loads(service.preempt(json.dumps(body).encode()).body)
    cache._writes.shutdown(wait=True)  # the background writes, done
    return answer


def test_the_replica_that_answered_writes_the_decision_on_the_preemptor_first() -> None:
    api = WritingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, _ = replica(api)
    answer = preempt(service, cache)
    assert answer["NodeNameToMetaVictims"] == {"gpu-a": {"Pods": [{"UID": "uid-be-0"}], "NumPDBViolations": 0}}
    assert api.writes[0] == (
        "PATCH",
        "/api/v1/namespaces/ml/pods/te-0/status",
        {"metadata": {"uid": "uid-te-0", "annotations": {ANNOTATION_PREEMPTOR_HOLD: DECIDED}}},
        "application/merge-patch+json",
    )
    assert api.writes[1][:2] == ("GET", "job be")  # the count after it
    assert [e["reason"] for e in api.events] == ["Preempting", "Preempted", "PodPreempted"]  # the last on be-0's Job


@pytest.mark.parametrize("status", [404, 409])  # the pod gone; another pod by its name (the UID differs)
def test_a_preemptor_gone_or_replaced_is_left_alone_and_the_rest_is_written(status: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))
    api = WritingApi(refuse=status, nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, _ = replica(api)
    preempt(service, cache)
    assert [w[0] for w in api.writes] == ["PATCH", "GET", "GET"]  # tried once; the Job read for its count, then its resume holds
    assert [e["reason"] for e in api.events] == ["Preempting", "Preempted", "PodPreempted"]  # the last on be-0's Job


def test_a_record_the_pod_carries_already_is_not_written_again() -> None:
    api = WritingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    cache, service, _ = replica(api)
    body = {
        "Pod": trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: DECIDED}),
        "NodeNameToMetaVictims": {"gpu-a": {"Pods": [{"UID": "uid-be-0"}], "NumPDBViolations": 0}},
    }
    service.preempt(json.dumps(body).encode())
    cache._writes.shutdown(wait=True)
    assert [w[0] for w in api.writes] == ["GET", "GET"]  # the Job's count and resume holds only


def test_a_replica_listing_the_recorded_pods_keeps_the_room_and_the_binding_empties_the_record() -> None:
    # Restarted while the victim leaves; kube-scheduler cleared the preemptor's nomination.
    api = WritingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(leaving=True), trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: RECORD})])
    cache, service, engine = replica(api)
    assert [(h.node, h.kind, h.pods) for h in engine.holds.holds()] == [("gpu-a", "preemptor", ("ml/te-0",))]
    cache._delete_pod(wire.POD_DECODER.decode(json.dumps(victim_pod(leaving=True)).encode()))  # it exits
    resumed = pod("be-1", uid="uid-be-1", gpus=8, priority=750, labels=BE, job_uid="uid-be")
    cache._apply_pod(wire.POD_DECODER.decode(json.dumps(resumed).encode()))
    with cache._lock:
        kept = filter_offered(engine, engine.pods.get("uid-be-1"), ["gpu-a"])  # type: ignore[arg-type]
    assert list(kept.feasible) == [] and "kept for ml/te-0" in kept.unresolvable["gpu-a"]
    bound = {"PodName": "te-0", "PodNamespace": "ml", "PodUID": "uid-te-0", "Node": "gpu-a"}
    assert json.loads(asyncio.run(service.bind(json.dumps(bound).encode())).body)["Error"] == ""
    assert api.binding_annotations["uid-te-0"] == {ANNOTATION_PREEMPTOR_HOLD: ""}


def test_without_the_record_the_relisted_room_goes_to_the_resumed_pod() -> None:
    """What the record changes: the same restart with nothing on te-0 keeps no room for it."""
    api = WritingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(leaving=True), trial_pod()])
    _, _, engine = replica(api)
    assert engine.holds.holds() == []


def test_the_resource_fit_engine_alone_answers_without_a_record() -> None:
    """``preemption.policy: placement``: victims unexplained, nothing recorded."""
    api = WritingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(), trial_pod()])
    engine = ResourceFitEngine()
    lock = threading.RLock()
    cache = ClusterCache(api=api, engine=engine, lock=lock, gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None)  # type: ignore[arg-type]
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    service = ExtenderService(engine=engine, lock=lock, metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu", cluster=cache, readiness=AlwaysReady())
    preempt(service, cache)
    assert api.writes == []


class RecordingGateway:
    """The ClusterGateway calls the preempt verb makes, recorded (the writes themselves are
    ClusterCache's, above)."""

    def __init__(self) -> None:
        self.preemptions: list[dict[str, Any]] = []

    def record_preemption(self, **call: Any) -> None:
        self.preemptions.append(call)

    def remember_victims(self, uids: Any) -> None:
        list(uids)

    def record_pod_event(self, **_: Any) -> None:
        pass


def test_hiveds_reclaim_answered_by_the_preempt_verb_is_handed_to_the_writer_with_its_record() -> None:
    replica = hived_engine()
    for i in range(8):
        placed = schedule(replica, opportunistic(f"o{i}"), HIVED_NODES)  # type: ignore[arg-type]
        assert placed is not None
        replica.apply_pod(placed)
    g = pod("g", uid="g", gpus=4, priority=GUARANTEED, labels={"cellfit.io/virtual-cluster": "a"})
    g["spec"]["schedulerName"] = "cellfit"
    gateway = RecordingGateway()
    service = ExtenderService(
        engine=replica,
        lock=threading.RLock(),
        metrics=ExtenderMetrics(),
        gpu_resource="nvidia.com/gpu",
        cluster=gateway,  # type: ignore[arg-type]
        readiness=AlwaysReady(),
        preemption=replica,
    )
    offered = {"Pod": g, "NodeNames": HIVED_NODES}
    assert json.loads(service.filter(json.dumps(offered).encode()).body)["NodeNames"] in (None, [])  # g books its cells and waits
    ((victim,),) = replica.inner.pending_preemptions().values()  # type: ignore[attr-defined]
    shown = replica.pods.get(victim)
    assert shown is not None and shown.node_name is not None
    where = shown.node_name
    body = {"Pod": g, "NodeNameToMetaVictims": {where: {"Pods": [{"UID": victim}], "NumPDBViolations": 0}}}
    answer = json.loads(service.preempt(json.dumps(body).encode()).body)
    assert answer["NodeNameToMetaVictims"] == {where: {"Pods": [{"UID": victim}], "NumPDBViolations": 0}}
    (call,) = gateway.preemptions
    # Told as FitGpp's decisions are (tests/preemption/test_hived_reclaim_victim_event.py), but
    # counted against no Job's cellfit.io/preemptions.
    assert call["preemptor"].uid == "g" and len(call["preemptor_messages"]) == 1 and call["job_counts"] == ()
    assert json.loads(call["preemptor_record"]) == {"node": where, "victims": [victim]}


class PatchingApi(WritingApi):
    """Also applies the JSON Patches written to a pod's status to the pods it lists, as the API
    server would: a ``test`` that fails is refused with HTTP 422 and changes nothing."""

    def write_path(self, method: str, path: str, body: Any, *, content_type: str = "application/json") -> bytes:
        super().write_path(method, path, body, content_type=content_type)
        if content_type != "application/json-patch+json":
            return b"{}"
        name = path.split("/")[-2]
        (shown,) = [p for p in self.pods if p["metadata"]["name"] == name]
        for operation in body:
            *parents, leaf = [part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]]
            target = shown
            for part in parents:
                target = target.get(part, {})
            if operation["op"] == "test" and target.get(leaf) != operation["value"]:
                raise KubernetesApiError(f"patch {path}: test failed", status=422)
        for operation in body:
            if operation["op"] == "remove":
                del shown["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD]
        return b"{}"


def resumed_pod(cache: ClusterCache) -> Any:
    """The victim Job's next pod, as the watch shows it."""
    body = pod("be-1", uid="uid-be-1", gpus=8, priority=750, labels=BE, job_uid="uid-be")
    cache._apply_pod(wire.POD_DECODER.decode(json.dumps(body).encode()))
    return cache._pods.get("uid-be-1")


def test_a_rebuilt_hold_that_lapses_clears_its_record_off_the_pod_and_the_next_restart_keeps_no_room() -> None:
    clock = FakeClock()
    # Restarted after the victim exited: the record alone keeps gpu-a for te-0.
    api = PatchingApi(nodes=[node("gpu-a", gpus=8)], pods=[trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: RECORD})])
    cache, _, engine = replica(api, clock=clock, hold_seconds=60)
    resumed = resumed_pod(cache)
    with cache._lock:
        assert list(filter_offered(engine, resumed, ["gpu-a"]).feasible) == []  # kept off: its 60 s start
        clock.now += 61
        assert list(filter_offered(engine, resumed, ["gpu-a"]).feasible) == ["gpu-a"]  # given up
    cache._writes.shutdown(wait=True)
    assert api.writes == [(
        "PATCH",
        "/api/v1/namespaces/ml/pods/te-0/status",
        [
            {"op": "test", "path": "/metadata/uid", "value": "uid-te-0"},
            {"op": "test", "path": "/metadata/annotations/cellfit.io~1preemptor-hold", "value": RECORD},
            {"op": "remove", "path": "/metadata/annotations/cellfit.io~1preemptor-hold"},
        ],
        "application/json-patch+json",
    )]
    assert ANNOTATION_PREEMPTOR_HOLD not in api.pods[0]["metadata"]["annotations"]
    _, _, again = replica(api)  # the next restart
    assert again.holds.holds() == []


def test_a_later_record_another_replica_wrote_is_not_cleared_by_a_lapse_here() -> None:
    clock = FakeClock()
    api = PatchingApi(nodes=[node("gpu-a", gpus=8)], pods=[trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: RECORD})])
    cache, _, engine = replica(api, clock=clock, hold_seconds=60)
    later = '{"node":"gpu-b","victims":["uid-other"]}'
    api.pods[0]["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] = later  # written since, not watched yet
    resumed = resumed_pod(cache)
    with cache._lock:
        filter_offered(engine, resumed, ["gpu-a"])
        clock.now += 61
        assert list(filter_offered(engine, resumed, ["gpu-a"]).feasible) == ["gpu-a"]
    cache._writes.shutdown(wait=True)
    assert [w[3] for w in api.writes] == ["application/json-patch+json"]  # tried once: refused, not retried
    assert api.pods[0]["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] == later


def test_a_replica_that_rebuilt_the_hold_from_the_record_is_told_once_its_watch_has_seen_the_victim_go() -> None:
    """After a restart while the victim leaves: the requeue signal's cue (on_victims_gone) comes
    when the watch shows the victim the record names gone, as it does for a victim the verb chose."""
    api = WritingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(leaving=True), trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: RECORD})])
    cache, _, engine = replica(api)
    told: list[str] = []
    cache.on_victims_gone = lambda: told.append("victims gone")
    assert [(h.node, h.kind) for h in engine.holds.holds()] == [("gpu-a", "preemptor")]
    cache._delete_pod(wire.POD_DECODER.decode(json.dumps(victim_pod(leaving=True)).encode()))  # it exits
    assert told == ["victims gone"]
