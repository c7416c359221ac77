"""A gang preemption whose answering replica was killed (``kill -9``) after writing its decision
on the preemptor (``cellfit.io/preemptor-hold``, written first) and before its background
deletions: kube-scheduler deleted the gang's member on the node it picked, and the member on the
other node ran on for ever, its gang-mates gone, with no Preempted Event. The record names that
member (``elsewhere``, scheduler/preemption/records.py); a replica that lists the pods afresh
(the restart) now marks it DisruptionTarget, deletes it (guarded by its UID) and writes its
Preempted Event; a member already leaving, a record of an older replica (no ``elsewhere``) and
this replica's own decisions (their writes queued) are left alone, and a later relist does not
preempt it again.

The crash is the API double's state as the killed replica left it, listed by a fresh cache (as
``cellfit serve`` builds it, with and without the estimator's watch of every pod); the gang is
tests/preemption/test_gang_members_elsewhere_deleted.py's: two 8-GPU pods of Job ml/gang on gpu-a
and gpu-b, FitGpp's preemptor ml/te-0 waiting for gpu-a."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.fit import ResourceFitEngine
from scheduler.preemption import FitGppSettings, records
from scheduler.preemption.engine import FitGppEngine
from tests.cluster.test_gang_member_preemption_retried import FailingDeletionApi
from tests.cluster.test_preemptor_record_write import trial_pod, victim_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.kube_objects import node

# Decided long ago (wall-clock seconds): the deciding replica's own tries are over.
DECIDED_AT = 1_790_000_000.0
RECORD = records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",), decided_at=DECIDED_AT)


def leaving(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as kube-scheduler's (or cellfit's) preemption leaves it: marked, being deleted."""
    leaving_victim = victim_pod(leaving=True)
    body["metadata"]["deletionTimestamp"] = leaving_victim["metadata"]["deletionTimestamp"]
    body["status"]["conditions"] = leaving_victim["status"]["conditions"]
    return body


def crashed_state(*, record: str = RECORD, member_1: dict[str, Any] | None = None) -> FailingDeletionApi:
    """The cluster as the killed replica left it: the record on the preemptor, gang-0 being deleted
    by kube-scheduler, gang-1 still running on gpu-b."""
    return FailingDeletionApi(
        failures=0,
        status=500,
        nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)],
        pods=[leaving(member(0, "gpu-a")), member_1 or member(1, "gpu-b"), trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})],
    )


def restarted(api: FailingDeletionApi, *, estimator: bool = False, before_list: list[str] | None = None) -> ClusterCache:
    """A fresh replica's cache that has listed the nodes and the pods (the ``kill -9``'s restart);
    ``before_list``: UIDs it has chosen as victims itself before the list."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = ClusterCache(
        api=api,  # type: ignore[arg-type]
        engine=engine,
        lock=threading.RLock(),
        gpu_resource="nvidia.com/gpu",
        pods=engine.pods,
        jobs=engine,
        interchangeable_jobs=estimator,
    )
    cache.remember_victims(before_list or ())
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    return cache


def done(cache: ClusterCache) -> None:
    cache._writes.shutdown(wait=True)  # the background writes, done
    cache._bind_writes.settle()  # and those the bind verb started


def preempted_events(api: FailingDeletionApi) -> list[tuple[str, str]]:
    return [(e["pod_name"], e["message"]) for e in api.events if e["reason"] == "Preempted"]


@pytest.mark.parametrize("estimator", [False, True], ids=["pods-watch", "all-pods-watch"])
def test_the_restarted_replica_preempts_the_recorded_member_left_running_and_tells_it(estimator: bool) -> None:
    api = crashed_state()
    done(restarted(api, estimator=estimator))
    assert api.deleted == {"ml/gang-1": "uid-be-1"}  # gang-0 is kube-scheduler's, being deleted already
    (mark,) = [w for w in api.writes if w[0] == "PATCH" and w[1].endswith("/pods/gang-1/status")]
    (condition,) = mark[2]["status"]["conditions"]
    assert mark[2]["metadata"] == {"uid": "uid-be-1"}
    assert (condition["type"], condition["reason"]) == ("DisruptionTarget", "PreemptionByScheduler")
    ((pod_name, message),) = preempted_events(api)
    assert pod_name == "gang-1"
    # gang-1 ran on gpu-b: it is told its own node, and gpu-a as where its gang was preempted.
    assert message.startswith("preempted with its gang ml/gang: the trial pod ml/te-0 takes the gang's room on node gpu-a; this pod "
                              "ran on node gpu-b and goes with every pod of the gang ml/gang, as a gang runs whole or not at all;")
    assert condition["message"] == f"cellfit: {message}"


def test_a_later_relist_does_not_preempt_the_member_again() -> None:
    api = crashed_state()
    cache = restarted(api)
    cache.pods._list_and_replace()  # the double's watch is quiet: the member still shows running
    done(cache)
    assert api.attempts == {"ml/gang-1": 1}
    assert len(preempted_events(api)) == 1


def test_a_recovery_whose_deletion_fails_for_a_moment_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "PREEMPT_PAUSES_SECONDS", (0.0, 0.0, 0.0, 0.0))
    api = crashed_state()
    api.failures = 2
    done(restarted(api))
    assert (api.attempts, api.deleted) == ({"ml/gang-1": 3}, {"ml/gang-1": "uid-be-1"})
    assert len(preempted_events(api)) == 1


@pytest.mark.parametrize(
    "api",
    [
        pytest.param(crashed_state(member_1=leaving(member(1, "gpu-b"))), id="member-already-leaving"),
        pytest.param(crashed_state(record=records.encode(node="gpu-a", victims=("uid-be-0",))), id="record-without-elsewhere"),
        pytest.param(crashed_state(record=records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",))),
                     id="record-naming-no-gang"),
        pytest.param(crashed_state(record=""), id="record-emptied-by-the-binding"),
        pytest.param(crashed_state(record='{"node":"gpu-a"}'), id="record-that-does-not-read"),
    ],
)
def test_nothing_is_preempted_where_the_record_leaves_nothing_to_finish(api: FailingDeletionApi) -> None:
    done(restarted(api))
    assert (api.attempts, preempted_events(api)) == ({}, [])


def test_the_replicas_own_decision_is_left_to_its_queued_writes() -> None:
    api = crashed_state()
    done(restarted(api, before_list=["uid-be-1"]))
    assert (api.attempts, preempted_events(api)) == ({}, [])
