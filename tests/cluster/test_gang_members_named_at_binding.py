"""The replica that binds a trial preemptor whose record names a gang member elsewhere still
running names that member on its gang's Job (``cellfit.io/gang-preempted``) before it creates the
binding, whichever replica it is.

The gap (fix27a's): in an HA deployment, replica A decides a gang preemption and dies before
deleting the member on the other node; replica B only watched the record arrive (no list read it,
so nobody named the member on its Job), and kube-scheduler calls B's bind verb for the trial pod.
The binding leaves the record on the pod only (bound_records.py). Every replica is down from then
until after the trial pod finished: a list of unfinished pods leaves the pod and its record out,
the Job names nothing, and the member ran for ever beside its deleted gang-mates, holding its GPUs.

The API double (tests/cluster/test_gang_members_recorded_on_their_job.py's) holds the pods, the
gang's Job ml/gang and the JSON Patches written to them; B binds through its bind verb.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

import msgspec
import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache, WatchedJob
from scheduler.constants import ANNOTATION_GANG_PREEMPTED, ANNOTATION_PREEMPTOR_HOLD
from scheduler.preemption import gang_records
from tests.cluster.test_gang_members_recorded_on_their_job import GangJobApi, started
from tests.cluster.test_gang_preemption_recovered import done, leaving
from tests.cluster.test_gang_recovery_after_the_preemptors_binding import bind_te_0, gone, record, show
from tests.cluster.test_gang_recovery_waits_for_deciding_replica import Timers
from tests.cluster.test_preemptor_record_write import replica, trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.kube_objects import node


class BindingApi(GangJobApi):
    """Also says what the Job named when each binding was created."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.named_at_binding: list[dict[str, gang_records.LeftMember]] = []

    async def create_binding(self, *, namespace: str, name: str, uid: str, node_name: str, annotations: dict[str, str]) -> None:
        self.named_at_binding.append(self.named)
        await super().create_binding(namespace=namespace, name=name, uid=uid, node_name=node_name, annotations=annotations)


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> Timers:
    asked = Timers()
    monkeypatch.setattr(cache_module, "_timer", asked)
    return asked


def watched_then_bound(
    decided_at: float, *, member_1_ends: Callable[[ClusterCache], None] | None = None, api_type: type[BindingApi] = BindingApi,
) -> tuple[BindingApi, ClusterCache]:
    """B lists the gang running and te-0 pending before A decides; its watch then shows A's record
    on te-0 (A dies before deleting gang-1) and gang-0 leaving, then gone (and ``member_1_ends``);
    B binds te-0."""
    api = api_type(failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)],
                     pods=[member(0, "gpu-a"), member(1, "gpu-b"), trial_pod()])
    cache, service, _ = replica(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    recorded = trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record(decided_at)})
    api.pods = [p for p in api.pods if p["metadata"]["name"] != "te-0"] + [recorded]
    show(cache, recorded)
    show(cache, leaving(member(0, "gpu-a")))
    if member_1_ends is not None:
        member_1_ends(cache)
    bind_te_0(api, cache, service)
    return api, cache


def test_a_restart_after_the_trial_pod_finished_deletes_the_member_a_watching_replica_bound_for(
    timers: Timers, monkeypatch: pytest.MonkeyPatch,
) -> None:
    decided_at = time.time() - 10
    api, cache = watched_then_bound(decided_at)
    done(cache)
    cache.stop()  # every replica down from here
    api.pods = [member(1, "gpu-b")]  # te-0 finished: a list of unfinished pods leaves it and its record out
    monkeypatch.setattr(time, "time", lambda: decided_at + cache_module.GANG_RECOVERY_AFTER_SECONDS + 1)
    restarted = started(api)
    done(restarted)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert ANNOTATION_GANG_PREEMPTED not in api.job["metadata"]["annotations"]  # deleted: taken off its Job
    assert len([e for e in api.events if e["reason"] == "Preempted" and e["pod_name"] == "gang-1"]) == 1


def test_the_member_is_named_before_the_binding_is_created(timers: Timers) -> None:
    """A replica killed the moment after its binding has named the member already."""
    decided_at = time.time() - 10
    api, cache = watched_then_bound(decided_at)
    done(cache)
    assert api.named_at_binding == [{"uid-be-1": gang_records.LeftMember(by="ml/te-0", node="gpu-a", at=decided_at)}]


def test_the_binding_replica_still_running_finishes_the_gang_once_the_record_is_old_enough(
    timers: Timers, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its Jobs watch shows the member named, and the look at it is planned for when the deciding
    replica's tries are over (before, nothing was planned: the member ran until a relist)."""
    decided_at = time.time() - 10
    api, cache = watched_then_bound(decided_at)
    cache._writes.submit(lambda: None).result()
    cache._apply_job(WatchedJob.decode(msgspec.Raw(json.dumps(api.job).encode())))  # the watch shows the binding's write
    (look,) = [action for delay, action in timers.asked if delay > 0]
    monkeypatch.setattr(time, "time", lambda: decided_at + cache_module.GANG_RECOVERY_AFTER_SECONDS + 1)
    look()
    done(cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}


@pytest.mark.parametrize("member_1_ends", [lambda cache: show(cache, leaving(member(1, "gpu-b"))), lambda cache: gone(cache, member(1, "gpu-b"))],
                         ids=["member-leaving", "member-gone"])
def test_a_binding_whose_members_run_no_more_writes_nothing_on_the_job(member_1_ends: Callable[[ClusterCache], None], timers: Timers) -> None:
    api, cache = watched_then_bound(time.time() - 10, member_1_ends=member_1_ends)
    done(cache)
    assert api.named_at_binding == [{}]
    assert [w for w in api.writes if w[1] == "job gang"] == []
    assert json.dumps(api.job["metadata"]["annotations"]) == "{}"


class SlowJobApi(BindingApi):
    """A Job write that answers only once a binding has been created (an API server slow for the
    moment): the bind verb must not wait for it past its budget."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.bound = threading.Event()

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        self.bound.wait(timeout=5)
        super().patch_job(namespace=namespace, name=name, operations=operations)

    async def create_binding(self, *, namespace: str, name: str, uid: str, node_name: str, annotations: dict[str, str]) -> None:
        await super().create_binding(namespace=namespace, name=name, uid=uid, node_name=node_name, annotations=annotations)
        self.bound.set()


def test_a_slow_job_write_holds_the_binding_up_for_its_budget_only_and_goes_on(
    timers: Timers, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(cache_module, "NAMING_BEFORE_BINDING_SECONDS", 0.0)
    decided_at = time.time() - 10
    api, cache = watched_then_bound(decided_at, api_type=SlowJobApi)
    done(cache)
    assert api.named_at_binding == [{}]  # bound without waiting for the write
    assert api.named == {"uid-be-1": gang_records.LeftMember(by="ml/te-0", node="gpu-a", at=decided_at)}  # which went on
    assert "the writes go on" in caplog.text
