"""Gang recovery (gang_recovery.py) finishes a killed replica's gang preemption from the
preemptor's record once it is GANG_RECOVERY_AFTER_SECONDS (300 s) old. It read the record only
from the pods the cache shows, so the record was lost, and the gang's member on the other node
left running for ever beside its deleted gang-mate (review27 R2, R5), when before those 300 s:

- the trial preemptor, a short run, finished (Succeeded, Failed) or was deleted: the cache
  forgets a finished pod, and the pods list leaves finished ones out;
- the preemptor's hold gave up before its binding (its node gone, lapsed, stuck victims) and took
  its record off the pod.

Now a record that no pod shows any more is kept in memory while a member it names runs, and read
by every later look; a list of every pod (the estimator's) reads a finished preemptor's record.

Replica A answers and is killed before deleting gang-1 on gpu-b; replica B lists at +10 s (a
young record: looked at again at +300 s). The API double's state and B's wiring are
tests/cluster/test_gang_recovery_after_the_preemptors_binding.py's.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache
from scheduler.extender.service import ExtenderService
from scheduler.preemption.engine import FitGppEngine
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.errors import KubernetesApiError
from scheduler.preemption import records
from tests.cluster.test_gang_preemption_recovered import done, leaving, restarted
from tests.cluster.test_gang_recovery_waits_for_deciding_replica import Timers
from tests.cluster.test_gang_recovery_after_the_preemptors_binding import RecoveringApi, bind_te_0, crashed, gone, record_cleared, show
from tests.cluster.test_preemptor_record_write import replica, trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.kube_objects import node


def listed_young(member_1: dict[str, Any] | None = None) -> tuple[RecoveringApi, ClusterCache, ExtenderService, FitGppEngine, float]:
    """B has listed A's record at +10 s; its planned look at +300 s is run by hand. The API, B's
    cache, verbs and engine, and the decision's time."""
    decided_at = time.time() - 10
    api = crashed(decided_at, member_1=member_1)
    cache, service, engine = replica(api)
    assert (cache._gang_recheck is not None) == (member_1 is None)  # planned while gang-1 runs
    if cache._gang_recheck is not None:
        cache._gang_recheck[0].cancel()
    return api, cache, service, engine, decided_at


def at_recheck(monkeypatch: pytest.MonkeyPatch, decided_at: float) -> None:
    """The wall clock at B's planned look: the record 300 s old."""
    monkeypatch.setattr(time, "time", lambda: decided_at + cache_module.GANG_RECOVERY_AFTER_SECONDS + 1)


@pytest.mark.parametrize("end", ["Succeeded", "Failed", "deleted"])
def test_the_member_left_running_is_preempted_though_the_trial_pod_ended_first(end: str, monkeypatch: pytest.MonkeyPatch) -> None:
    api, cache, service, _, decided_at = listed_young()
    body = bind_te_0(api, cache, service)  # ~+30 s: the record stays on te-0, gang-1 runs
    if end == "deleted":
        gone(cache, body)
    else:
        body["status"]["phase"] = end  # ~+150 s: the short trial run ends
        show(cache, body)
    api.pods = [p for p in api.pods if p["metadata"]["name"] != "te-0"]
    at_recheck(monkeypatch, decided_at)
    cache._looked_again()
    done(cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}


def test_a_list_of_every_pod_reads_the_finished_preemptors_record() -> None:
    """A replica (re)started after te-0 finished, listing every pod (the estimator's watch)."""
    old = records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",),
                         decided_at=time.time() - cache_module.GANG_RECOVERY_AFTER_SECONDS - 60)
    finished = {**trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: old}), "status": {"phase": "Succeeded"}}
    finished["spec"]["nodeName"] = "gpu-a"
    api = RecoveringApi(failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[finished, member(1, "gpu-b")])
    cache = restarted(api, estimator=True)
    done(cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert record_cleared(api) == []  # a finished pod's record is not written to


def test_the_member_is_preempted_though_the_preemptors_hold_gave_up_and_took_its_record_off(monkeypatch: pytest.MonkeyPatch) -> None:
    api, cache, _, engine, decided_at = listed_young()
    assert [h.node for h in engine.holds.holds() if h.kind == "preemptor"] == ["gpu-a"]
    cache._forget_node("gpu-a")  # gpu-a deleted within the 300 s: the hold gives up
    cache._writes.submit(lambda: None).result()
    assert len(record_cleared(api)) == 1
    (te_0,) = [p for p in api.pods if p["metadata"]["name"] == "te-0"]
    assert ANNOTATION_PREEMPTOR_HOLD not in te_0["metadata"]["annotations"]
    show(cache, te_0)  # the watch shows te-0 without its record
    at_recheck(monkeypatch, decided_at)
    cache._looked_again()
    done(cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}


def test_a_kept_record_whose_members_left_is_forgotten_and_deletes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    api, cache, service, _, decided_at = listed_young()
    body = bind_te_0(api, cache, service)
    body["status"]["phase"] = "Succeeded"
    show(cache, body)
    assert len(cache._gang_records) == 1
    show(cache, leaving(member(1, "gpu-b")))  # A's late tries, or another replica, deleted gang-1
    at_recheck(monkeypatch, decided_at)
    cache._looked_again()
    done(cache)
    assert api.deleted == {} and cache._gang_records == {}


def test_a_preemptor_that_ends_with_no_member_running_keeps_nothing() -> None:
    api, cache, service, _, _ = listed_young(member_1=leaving(member(1, "gpu-b")))
    body = bind_te_0(api, cache, service)
    body["status"]["phase"] = "Succeeded"
    show(cache, body)
    done(cache)
    assert cache._gang_records == {}


class NamedEventsApi(RecoveringApi):
    """Refuses an Event whose name it holds already (409), as the API server does."""

    def create_event(self, **event: Any) -> None:
        if event.get("name") is not None and any(e.get("name") == event["name"] for e in self.events):
            raise KubernetesApiError(f"event {event['name']} exists: HTTP 409", status=409)
        super().create_event(**event)


def test_every_replica_that_looks_preempts_the_member_and_it_is_told_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two replicas look at the old record at once (each that saw te-0 end kept it: both look at +300 s)."""
    decided_at = time.time() - cache_module.GANG_RECOVERY_AFTER_SECONDS - 1
    shared = crashed(decided_at)
    api = NamedEventsApi(failures=0, status=500, nodes=shared.nodes, pods=shared.pods)
    monkeypatch.setattr(cache_module, "_timer", Timers())
    replicas = [restarted(api) for _ in range(2)]
    for cache in replicas:
        cache._writes.submit(lambda: None).result()
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert [e["pod_name"] for e in api.events if e["reason"] == "Preempted"] == ["gang-1"]
