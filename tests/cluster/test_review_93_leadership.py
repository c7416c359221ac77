"""Leader election as an operator breaks it: the controllers' Lease edited or deleted by hand
(``kubectl edit lease``, ``kubectl delete lease``). Two replicas campaign against the Lease store
of tests/unit/test_leadership.py (the API server's optimistic concurrency, nothing more), round
by round on a shared clock; after every replica's round, at most one may lead."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from scheduler.cluster.leadership import LeaderElector, Terms
from tests.unit.test_leadership import SETTINGS, Clock, LeaseStore, Replica, rounds

LEASE = "cellfit-controllers"


@pytest.fixture
def world() -> tuple[Clock, LeaseStore, Replica, Replica]:
    clock, store = Clock(), LeaseStore()
    return clock, store, Replica("a", store, clock), Replica("b", store, clock)


def edit(store: LeaseStore, **spec: Any) -> None:
    """``kubectl edit``: the stored Lease changed by hand, a new resourceVersion."""
    store.version += 1
    lease = json.loads(json.dumps(store.leases[LEASE]))
    lease["spec"].update(spec)
    lease["metadata"]["resourceVersion"] = str(store.version)
    store.leases[LEASE] = lease


def campaign(clock: Clock, replicas: list[Replica], *, seconds: float, leaders: list[set[str]]) -> None:
    """Each replica's round in turn, every 2 s; who leads after each round goes to ``leaders``."""
    end = clock.seconds + seconds
    while clock.seconds < end:
        for replica in replicas:
            replica.elector.campaign_once()
            leaders.append({r.elector.identity for r in replicas if r.elector.leading})
        clock.seconds += 2


@pytest.mark.parametrize("order", ["leader-first", "standby-first"])
def test_a_lease_handed_to_the_standby_by_hand_ends_the_old_leaders_term_at_its_next_round(world: Any, order: str) -> None:
    """The holder edited to the standby's name: the standby takes it as its own (a restarted
    container does so too). The old leader read the Lease naming another and went on leading
    until its renew deadline: two estimators, placers and reclaims for up to 10 s."""
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=10)
    assert a.elector.leading
    edit(store, holderIdentity="b")
    leaders: list[set[str]] = []
    campaign(clock, [a, b] if order == "leader-first" else [b, a], seconds=20, leaders=leaders)
    assert all(len(who) <= 1 for who in leaders[1:]), leaders  # after the old leader's first look
    assert store.holder() == "b" and b.elector.leading and a.events == ["started", "stopped"]


def test_a_lease_deleted_by_hand_is_not_taken_by_the_standby_while_its_holder_lives(world: Any) -> None:
    """The Lease deleted while ``a`` leads: the standby created it at once and led beside ``a``,
    which had not noticed yet. A standby that saw another hold the Lease waits the lease's
    duration from then, as if it were still there; the holder recreates it meanwhile."""
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=10)
    del store.leases[LEASE]
    leaders: list[set[str]] = []
    campaign(clock, [b, a], seconds=40, leaders=leaders)
    assert all(len(who) <= 1 for who in leaders), leaders
    assert store.holder() == "a" and b.events == [] and a.events == ["started"]


def test_a_lease_deleted_by_hand_after_its_holder_died_is_taken_once_its_term_would_have_lapsed(world: Any) -> None:
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=10)
    last_seen = clock.seconds - 2  # b's round after a's last renewal
    del store.leases[LEASE]  # and a is gone (SIGKILL): nobody recreates it
    taken_at = None
    while taken_at is None:
        b.elector.campaign_once()
        taken_at = clock.seconds if b.elector.leading else None
        clock.seconds += 2
    assert last_seen + 15 <= taken_at <= last_seen + 15 + 2


@pytest.mark.parametrize("duration", [0, None], ids=["zero", "removed"])
def test_a_lease_duration_shortened_by_hand_does_not_let_the_standby_take_a_living_leaders_lease(world: Any, duration: Any) -> None:
    """``leaseDurationSeconds`` edited to 0 (or removed): the standby took the Lease at its
    next round as lapsed, while the leader renewed it every 2 s. A replica waits at least its own
    configured lease duration."""
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=10)
    edit(store, leaseDurationSeconds=duration)
    leaders: list[set[str]] = []
    campaign(clock, [b, a], seconds=30, leaders=leaders)
    assert all(len(who) <= 1 for who in leaders), leaders
    assert store.holder() == "a" and b.events == []


class ClockedStop(threading.Event):
    """The elector's stop event in the test's thread: each wait passes its timeout on the clock
    at once, and answers "stop" once the term has ended."""

    def __init__(self, clock: Clock, ended: list[float]) -> None:
        super().__init__()
        self._clock = clock
        self._ended = ended

    def wait(self, timeout: float | None = None) -> bool:
        if self._ended:
            return True
        self._clock.seconds += timeout or 0.0
        return False


def test_a_renew_deadline_close_to_the_lease_still_ends_the_term_before_the_lease_lapses() -> None:
    """``renewDeadlineSeconds: 14.8`` with a 15 s lease is accepted (retry < renew < lease). The
    watchdog looked every quarter of the retry period (0.5 s), so a leader whose renewals hung
    ended its term at 15.0 s after its last renewal was sent: a standby that read that renewal
    at once may take the Lease then, and both led. The watchdog looks often enough to end the
    term between the deadline and the lease."""
    clock, store = Clock(), LeaseStore()
    ended: list[float] = []
    settings = SETTINGS.model_copy(update={"identity": "a", "renew_deadline_seconds": 14.8})
    elector = LeaderElector(api=store, settings=settings, on_started=lambda: None, on_stopped=lambda: ended.append(clock.seconds),
                            monotonic=clock.monotonic, wall=clock.wall)
    elector.campaign_once()  # took the Lease: its write was sent at 0
    assert elector.leading
    elector._stop = ClockedStop(clock, ended)  # then every renewal hangs: only the watchdog acts
    elector._watch_deadline()
    assert len(ended) == 1 and settings.renew_deadline_seconds < ended[0] < settings.lease_duration_seconds, ended


def test_controllers_that_fail_to_start_are_started_again_at_the_next_round(world: Any) -> None:
    """Building a term's drivers failed (an API call in a driver's construction, a defect): the
    replica went on holding and renewing the Lease as the leader with no controller running, so
    no replica ran the estimator, the placer or the reclaim until it restarted. The term ends
    at once, and the next round begins it again."""
    clock, store, a, _ = world
    attempts: list[str] = []

    def start() -> None:
        attempts.append("start")
        if len(attempts) == 1:
            raise RuntimeError("the estimator's first list failed")

    elector = LeaderElector(api=store, settings=SETTINGS.model_copy(update={"identity": "a"}), on_started=start,
                            on_stopped=lambda: attempts.append("stop"), monotonic=clock.monotonic, wall=clock.wall)
    elector.campaign_once()
    assert not elector.leading and attempts == ["start", "stop"]
    clock.seconds += 2
    elector.campaign_once()
    assert elector.leading and attempts == ["start", "stop", "start"]


def test_a_driver_whose_stop_fails_does_not_keep_the_others_running() -> None:
    """Terms.end stopped the drivers last-built first and gave up at the first stop() that
    raised: the drivers built before it (the estimator, the placer) ran on after the term ended,
    beside the next leader's."""
    log: list[str] = []

    class Named:
        def __init__(self, name: str, *, fails: bool = False) -> None:
            self.name, self.fails = name, fails

        def start(self) -> None:
            log.append(f"start {self.name}")

        def stop(self) -> None:
            log.append(f"stop {self.name}")
            if self.fails:
                raise RuntimeError(f"{self.name} could not stop")

    terms = Terms(lambda: [Named("estimator"), Named("placer"), Named("reclaim", fails=True)])
    terms.begin()
    terms.end()
    assert log == ["start estimator", "start placer", "start reclaim", "stop reclaim", "stop placer", "stop estimator"]
    assert not terms.drivers


def test_the_deadline_watchdog_outlives_a_term_end_that_fails() -> None:
    """The watchdog thread ended the term and its on_stopped raised: the exception ended the
    thread, and no later term of this replica had a renew deadline enforced while a renewal hung."""
    clock, store = Clock(), LeaseStore()
    ended: list[float] = []

    def stopped() -> None:
        ended.append(clock.seconds)
        raise RuntimeError("a driver could not stop")

    elector = LeaderElector(api=store, settings=SETTINGS.model_copy(update={"identity": "a"}), on_started=lambda: None,
                            on_stopped=stopped, monotonic=clock.monotonic, wall=clock.wall)
    elector.campaign_once()
    elector._stop = ClockedStop(clock, ended)
    elector._watch_deadline()  # returns once the term has ended, as a stop would
    assert not elector.leading and len(ended) == 1
