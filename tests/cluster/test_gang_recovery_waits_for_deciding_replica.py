"""A replica that lists the pods while the replica that decided a gang preemption still acts
leaves the record's members to it: the deciding replica writes the preemptor's record first,
then marks and deletes the gang's member on the other node, tried again over a bounded time. A
record is finished by another replica only once it is GANG_RECOVERY_AFTER_SECONDS old (its
decision's wall-clock time, ``at``), on a later relist or when the replica looks again by itself.

Before (review25 #8), a replica that listed in that window (its start in a rolling update, every
replica relisting after an API outage) preempted the member a second time: two DisruptionTarget
marks and deletions, two Preempted warning Events, the second telling it the replica that
decided had stopped.

tests/cluster/test_gang_preemption_recovered.py's crash and replicas."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.preemption import records
from tests.cluster.test_gang_preemption_recovered import crashed_state, done, preempted_events, restarted


def just_decided(*, seconds_ago: float = 0.0) -> str:
    return records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",),
                          decided_at=time.time() - seconds_ago)


class Timers:
    """The looks again a cache asks for, run when the test says (threading.Timer's place)."""

    def __init__(self) -> None:
        self.asked: list[tuple[float, Callable[[], None]]] = []

    def __call__(self, delay: float, action: Callable[[], None]) -> Timers.Pending:
        self.asked.append((delay, action))
        return Timers.Pending()

    class Pending:
        daemon = False

        def start(self) -> None:
            pass

        def cancel(self) -> None:
            pass


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> Timers:
    asked = Timers()
    monkeypatch.setattr(cache_module, "_timer", asked)
    return asked


def test_a_member_the_deciding_replica_is_deleting_gets_one_preemption(timers: Timers) -> None:
    api = crashed_state(record=just_decided())  # A's record is written; its deletion of gang-1 is queued behind it
    deciding = restarted(api, before_list=["uid-be-1"])  # A: its own decision (its queued writes)
    member = deciding._pods.get("uid-be-1")
    preemptor = next(p for p in deciding._pods.pods() if p.name == "te-0")
    assert member is not None
    other = restarted(api)  # B lists in the window
    deciding.record_preemption(preemptor=preemptor, preemptor_messages=(), victims=[member],
                               victim_message="preempted by ml/te-0 on node gpu-a", job_counts=(), preempt=[member])
    done(deciding)
    done(other)
    told = [message for pod_name, message in preempted_events(api) if pod_name == "gang-1"]
    assert told == ["preempted by ml/te-0 on node gpu-a"]
    assert api.attempts == {"ml/gang-1": 1}


def test_a_young_record_is_finished_by_a_later_relist_once_old_enough(timers: Timers, monkeypatch: pytest.MonkeyPatch) -> None:
    api = crashed_state(record=just_decided(seconds_ago=60))
    cache = restarted(api)
    cache._writes.submit(lambda: None).result()  # what the list queued, done
    assert (api.attempts, preempted_events(api)) == ({}, [])
    monkeypatch.setattr(cache_module, "GANG_RECOVERY_AFTER_SECONDS", 30.0)
    cache.pods._list_and_replace()
    done(cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert len(preempted_events(api)) == 1


def test_a_young_record_is_looked_at_again_once_old_enough_without_a_relist(timers: Timers, monkeypatch: pytest.MonkeyPatch) -> None:
    api = crashed_state(record=just_decided(seconds_ago=60))
    cache = restarted(api)
    ((delay, look_again),) = timers.asked
    assert 0 < delay <= cache_module.GANG_RECOVERY_AFTER_SECONDS - 60  # when the record is old enough
    assert api.attempts == {}
    monkeypatch.setattr(cache_module, "GANG_RECOVERY_AFTER_SECONDS", 30.0)  # the time has come
    look_again()
    done(cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert len(preempted_events(api)) == 1
