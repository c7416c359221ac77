"""The replica that decided a gang preemption deletes the members on other nodes itself, and
remembers them as its victims, so that a look at the records (gang_recovery.py) leaves them to
its queued writes. When those deletions gave up (the API server failing over all of
PREEMPT_PAUSES_SECONDS), the members stayed its victims: every later relist and look passed them
over, and with one replica nothing ever deleted gang-1, left running beside its deleted
gang-mate (review27 R6). Now a member given up is its victim no more, and looked at again once
the record is old enough (GANG_RECOVERY_AFTER_SECONDS), even when its preemptor finished before.
"""

from __future__ import annotations

import json
import time

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from tests.cluster.test_gang_member_preemption_retried import FailingDeletionApi, gang_api
from tests.cluster.test_gang_preemption_recovered import leaving
from tests.cluster.test_gang_recovery_after_the_preemptors_binding import show
from tests.cluster.test_gang_recovery_waits_for_deciding_replica import Timers
from tests.cluster.test_preemptor_record_write import replica, trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "PREEMPT_PAUSES_SECONDS", (0.0, 0.0, 0.0, 0.0))
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))


def decided_and_given_up(monkeypatch: pytest.MonkeyPatch) -> tuple[FailingDeletionApi, ClusterCache, Timers, str]:
    """The one replica answers the preempt verb for te-0, taking the gang; every try of gang-1's
    deletion fails. The API, the cache, its planned looks and te-0's record."""
    timers = Timers()
    monkeypatch.setattr(cache_module, "_timer", timers)
    api = gang_api(failures=len(cache_module.PREEMPT_PAUSES_SECONDS) + 1, status=503)
    cache, service, _ = replica(api)
    body = {"Pod": trial_pod(), "NodeNameToMetaVictims": {"gpu-a": {"Pods": [{"UID": "uid-be-0"}], "NumPDBViolations": 0}}}
    service.preempt(json.dumps(body).encode())
    cache._writes.submit(lambda: None).result()  # the decision's writes done
    assert api.deleted == {}  # given up: gang-1 still runs
    (record,) = [w[2]["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] for w in api.writes if w[1].endswith("/pods/te-0/status")]
    api.failures = 0  # the API server answers again
    api.attempts.clear()
    return api, cache, timers, record


def later(monkeypatch: pytest.MonkeyPatch) -> None:
    at = time.time() + cache_module.GANG_RECOVERY_AFTER_SECONDS + 5
    monkeypatch.setattr(time, "time", lambda: at)


def test_a_relist_preempts_the_member_whose_deletion_this_replica_gave_up(monkeypatch: pytest.MonkeyPatch) -> None:
    api, cache, _, record = decided_and_given_up(monkeypatch)
    api.pods = [leaving(member(0, "gpu-a")), member(1, "gpu-b"), trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})]
    later(monkeypatch)
    cache.pods._list_and_replace()
    cache._writes.submit(lambda: None).result()
    assert api.deleted == {"ml/gang-1": "uid-be-1"}


def test_the_planned_look_preempts_it_though_the_trial_pod_ended_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    api, cache, timers, record = decided_and_given_up(monkeypatch)
    (delay, look), *_ = timers.asked
    # Not before the record is old enough, nor before GANG_RETRY_AFTER_SECONDS.
    assert delay >= cache_module.GANG_RETRY_AFTER_SECONDS
    ended = {**trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record}), "status": {"phase": "Succeeded"}}
    ended["spec"]["nodeName"] = "gpu-a"
    show(cache, ended)  # te-0 bound and finished: the cache forgets it
    api.pods = [p for p in api.pods if p["metadata"]["name"] != "te-0"]
    later(monkeypatch)
    look()
    cache._writes.submit(lambda: None).result()
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
