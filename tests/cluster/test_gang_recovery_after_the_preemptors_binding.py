"""A killed replica's gang preemption is finished by the next replica from the preemptor's record
(gang_recovery.py), once the record is GANG_RECOVERY_AFTER_SECONDS (300 s) old. The preemptor's
binding emptied that record, and the preemptor binds as soon as the member on its node has exited,
within its grace period: replica A answers and is killed before deleting the member on the other
node, replica B lists 10 s later (a young record: looked at again at +300 s), the trial pod binds
at ~+30 s, and at +300 s B found no record: gang-1 ran for ever beside its deleted gang-mate, the
hung job gang recovery exists to prevent (review28 #1, HIGH). Now a binding whose record names a
member elsewhere still running leaves the record on the pod, without what only a pending
preemptor needs (its resumed Jobs); a bound pod's record keeps no hold for it, and it is taken off
once none of those members runs (the watch shows them leave; a relist finds none running).

The API double's state as tests/cluster/test_gang_preemption_recovered.py's crash leaves it; B
binds te-0 through its bind verb, and the double shows the pod as the binding wrote it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.extender.service import ExtenderService
from scheduler.kube import wire
from scheduler.kube.wire import annotation_pointer
from scheduler.preemption import records
from tests.cluster.test_gang_member_preemption_retried import FailingDeletionApi
from tests.cluster.test_gang_preemption_recovered import done, leaving
from tests.cluster.test_gang_recovery_waits_for_deciding_replica import Timers
from tests.cluster.test_preemptor_record_write import PatchingApi, replica, trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.kube_objects import node


class RecoveringApi(FailingDeletionApi, PatchingApi):
    """Deletes pods (recording them) and applies the records' JSON Patches to the pods it lists."""


def record(decided_at: float) -> str:
    return records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",), decided_at=decided_at,
                          resumes={"uid-be-0": "uid-gang"})


def crashed(decided_at: float, *, member_1: dict[str, Any] | None = None) -> RecoveringApi:
    """A killed the moment after its record: gang-0 being deleted by kube-scheduler, gang-1 running."""
    return RecoveringApi(failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)],
                         pods=[leaving(member(0, "gpu-a")), member_1 or member(1, "gpu-b"),
                               trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record(decided_at)})])


def show(cache: ClusterCache, body: dict[str, Any]) -> None:
    cache._apply_pod(wire.POD_DECODER.decode(json.dumps(body).encode()))


def gone(cache: ClusterCache, body: dict[str, Any]) -> None:
    cache._delete_pod(wire.POD_DECODER.decode(json.dumps(body).encode()))


def bind_te_0(api: RecoveringApi, cache: ClusterCache, service: ExtenderService) -> dict[str, Any]:
    """gang-0 exits; te-0 is bound on gpu-a by B's bind verb; the watch shows it as bound."""
    gone(cache, member(0, "gpu-a"))
    bound = {"PodName": "te-0", "PodNamespace": "ml", "PodUID": "uid-te-0", "Node": "gpu-a"}
    assert json.loads(asyncio.run(service.bind(json.dumps(bound).encode())).body)["Error"] == ""
    body = trial_pod(annotations=api.binding_annotations["uid-te-0"])
    body["spec"]["nodeName"] = "gpu-a"
    body["status"]["phase"] = "Running"
    api.pods = [p for p in api.pods if p["metadata"]["name"] not in ("gang-0", "te-0")] + [body]
    show(cache, body)
    return body


def record_cleared(api: RecoveringApi) -> list[Any]:
    """The JSON Patches that took te-0's record off."""
    return [w[2] for w in api.writes if w[1] == "/api/v1/namespaces/ml/pods/te-0/status" and w[3] == "application/json-patch+json"]


def test_the_member_left_running_is_preempted_though_the_preemptor_bound_first(monkeypatch: pytest.MonkeyPatch) -> None:
    decided_at = time.time() - 10  # A decided 10 s before B lists: A's own tries may still run
    api = crashed(decided_at)
    cache, service, _ = replica(api)
    assert cache._gang_recheck is not None  # looked at again at decided_at + 300 s
    cache._gang_recheck[0].cancel()  # run by hand below, at that time
    bind_te_0(api, cache, service)
    cache.pods._list_and_replace()
    monkeypatch.setattr(time, "time", lambda: decided_at + cache_module.GANG_RECOVERY_AFTER_SECONDS + 1)
    cache._looked_again()
    done(cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert record_cleared(api) == []  # gang-1 still shows running: the record stays


def bound_after_the_crash(monkeypatch: pytest.MonkeyPatch) -> tuple[RecoveringApi, ClusterCache, str, float]:
    """B has listed A's young record (its look again at +300 s never comes here) and bound te-0:
    the API, B's cache, te-0's record as bound, the decision's time."""
    monkeypatch.setattr(cache_module, "_timer", Timers())
    decided_at = time.time() - 10
    api = crashed(decided_at)
    cache, service, _ = replica(api)
    body = bind_te_0(api, cache, service)
    return api, cache, body["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD], decided_at


def test_the_bound_pods_record_is_the_decision_less_its_resumed_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, text, decided_at = bound_after_the_crash(monkeypatch)
    left = records.decode(text)
    # The victims' Jobs' own records keep their resume holds from the binding on (resume_records.py).
    assert left == records.PreemptorRecord(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",), at=decided_at)


def test_the_record_is_taken_off_once_the_named_member_is_seen_leaving(monkeypatch: pytest.MonkeyPatch) -> None:
    api, cache, left, _ = bound_after_the_crash(monkeypatch)
    show(cache, leaving(member(1, "gpu-b")))  # deleted (by the recovery, or by A's late tries)
    done(cache)
    (patch,) = record_cleared(api)
    assert patch == [{"op": "test", "path": "/metadata/uid", "value": "uid-te-0"},
                     {"op": "test", "path": annotation_pointer(ANNOTATION_PREEMPTOR_HOLD), "value": left},
                     {"op": "remove", "path": annotation_pointer(ANNOTATION_PREEMPTOR_HOLD)}]
    (shown,) = [p for p in api.pods if p["metadata"]["name"] == "te-0"]
    assert ANNOTATION_PREEMPTOR_HOLD not in shown["metadata"]["annotations"]


@pytest.mark.parametrize("member_1", [leaving(member(1, "gpu-b")), None], ids=["member-leaving", "member-gone"])
def test_a_binding_whose_members_elsewhere_run_no_more_empties_the_record(member_1: dict[str, Any] | None,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "_timer", Timers())
    api = crashed(time.time() - 10, member_1=member_1)
    if member_1 is None:
        api.pods = [p for p in api.pods if p["metadata"]["name"] != "gang-1"]
    cache, service, _ = replica(api)
    body = bind_te_0(api, cache, service)
    assert body["metadata"]["annotations"] == {ANNOTATION_PREEMPTOR_HOLD: ""}


def test_a_restart_reading_the_bound_pods_record_keeps_no_room_and_finishes_the_gang() -> None:
    decided_at = time.time() - cache_module.GANG_RECOVERY_AFTER_SECONDS - 60
    left = records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",), decided_at=decided_at)
    bound = trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: left})
    bound["spec"]["nodeName"] = "gpu-a"
    bound["status"]["phase"] = "Running"
    api = RecoveringApi(failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[bound, member(1, "gpu-b")])
    cache, _, engine = replica(api)
    done(cache)
    assert [h for h in engine.holds.holds() if h.kind == "preemptor"] == []
    assert api.deleted == {"ml/gang-1": "uid-be-1"}


def test_a_relist_finding_none_of_the_named_members_running_takes_the_bound_pods_record_off() -> None:
    left = records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",), decided_at=time.time() - 10)
    bound = trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: left})
    bound["spec"]["nodeName"] = "gpu-a"
    bound["status"]["phase"] = "Running"
    api = RecoveringApi(failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)],
                        pods=[bound, leaving(member(1, "gpu-b"))])
    cache, _, _ = replica(api)
    done(cache)
    assert len(record_cleared(api)) == 1 and api.deleted == {}
    (shown,) = [p for p in api.pods if p["metadata"]["name"] == "te-0"]
    assert ANNOTATION_PREEMPTOR_HOLD not in shown["metadata"]["annotations"]

