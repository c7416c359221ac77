"""Leader election on the controllers' Lease, round by round on a shared clock.

The Lease store here keeps what the API server guarantees for a Lease and nothing more: a write
carrying a stale resourceVersion fails with 409, a create of an existing Lease fails with 409,
each stored version gets a new resourceVersion. Two electors campaign against it; the clock is
advanced by hand, so takeover times are exact. The same elector against a real API server, with
replicas killed, is e2e/test_failover.py.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from scheduler.cluster.leadership import LeaderElector, Terms, lease_body, may_take, micro_time, parse_lease
from scheduler.config import LeaderElectionSettings, parse_settings
from scheduler.errors import KubernetesApiError

EPOCH = datetime(2026, 11, 25, 17, 0, 0, tzinfo=timezone.utc)
SETTINGS = LeaderElectionSettings(lease_name="cellfit-controllers", namespace="cellfit-system")


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds

    def wall(self) -> datetime:
        return EPOCH + timedelta(seconds=self.seconds)


class LeaseStore:
    """One namespace's Leases with the API server's optimistic concurrency."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.reachable = True
        self.writes = 0

    def get_lease(self, *, namespace: str, name: str) -> bytes | None:
        self._check()
        lease = self.leases.get(name)
        return json.dumps(lease).encode() if lease is not None else None

    def write_lease(self, *, namespace: str, lease: dict[str, Any]) -> bytes:
        self._check()
        name = lease["metadata"]["name"]
        stored = self.leases.get(name)
        wanted = lease["metadata"].get("resourceVersion")
        if stored is None and wanted:
            raise KubernetesApiError("not found", status=404)
        if stored is not None and wanted != stored["metadata"]["resourceVersion"]:
            raise KubernetesApiError("the object has been modified", status=409)
        self.version += 1
        self.writes += 1
        written = json.loads(json.dumps(lease))
        written["metadata"]["resourceVersion"] = str(self.version)
        self.leases[name] = written
        return json.dumps(written).encode()

    def holder(self) -> str:
        return str(self.leases["cellfit-controllers"]["spec"]["holderIdentity"])

    def _check(self) -> None:
        if not self.reachable:
            raise KubernetesApiError("Kubernetes API unreachable: connection refused")


class Replica:
    def __init__(self, identity: str, store: LeaseStore, clock: Clock) -> None:
        self.events: list[str] = []
        self.elector = LeaderElector(
            api=store,
            settings=SETTINGS.model_copy(update={"identity": identity}),
            on_started=lambda: self.events.append("started"),
            on_stopped=lambda: self.events.append("stopped"),
            monotonic=clock.monotonic,
            wall=clock.wall,
        )


def rounds(clock: Clock, replicas: list[Replica], *, seconds: float, period: float = 2.0) -> None:
    """Every replica campaigns once per ``period`` for ``seconds`` of the clock."""
    end = clock.seconds + seconds
    while clock.seconds < end:
        for replica in replicas:
            replica.elector.campaign_once()
        clock.seconds += period


@pytest.fixture
def world() -> tuple[Clock, LeaseStore, Replica, Replica]:
    clock, store = Clock(), LeaseStore()
    return clock, store, Replica("a", store, clock), Replica("b", store, clock)


def test_the_first_replica_creates_the_lease_and_leads_the_other_stands_by(world: Any) -> None:
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=60)
    assert store.holder() == "a" and a.elector.leading and not b.elector.leading
    assert a.events == ["started"] and b.events == []
    assert b.elector.holder == "a"
    spec = store.leases["cellfit-controllers"]["spec"]
    assert spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == micro_time(EPOCH) and spec["renewTime"] == micro_time(clock.wall() - timedelta(seconds=2))


def test_a_standby_takes_over_once_the_lease_lapsed_as_it_observed_it(world: Any) -> None:
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=10)
    last_renewal = clock.seconds - 2  # a's last round
    # a dies (SIGKILL): no release, no more renewals.
    taken_at = None
    while taken_at is None:
        b.elector.campaign_once()
        if b.elector.leading:
            taken_at = clock.seconds
        clock.seconds += 2
    # b saw a's last renewal at its own round right after it; it waits a whole lease from there.
    assert last_renewal + 15 <= taken_at <= last_renewal + 15 + 2
    assert store.holder() == "b" and b.events == ["started"]
    assert store.leases["cellfit-controllers"]["spec"]["leaseTransitions"] == 1


def test_a_restarted_replica_with_the_same_identity_takes_its_lease_back_at_once(world: Any) -> None:
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=10)
    restarted = Replica("a", store, clock)  # the pod's name survives a container restart
    restarted.elector.campaign_once()
    assert restarted.elector.leading and restarted.events == ["started"]
    assert store.leases["cellfit-controllers"]["spec"]["leaseTransitions"] == 0


def test_a_clean_shutdown_releases_and_the_standby_leads_at_its_next_round(world: Any) -> None:
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=10)
    a.elector.stop()  # never started as a thread: stop ends the term and releases
    assert a.events == ["started", "stopped"]
    assert store.holder() == ""
    b.elector.campaign_once()
    assert b.elector.leading and store.holder() == "b"


def test_a_leader_that_cannot_renew_ends_its_term_before_the_lease_lapses(world: Any) -> None:
    clock, store, a, b = world
    rounds(clock, [a, b], seconds=10)
    last_renewal = clock.seconds - 2
    store.reachable = False  # a partition: nobody reaches the API
    ended_at = None
    while ended_at is None:
        a.elector.campaign_once()
        if not a.elector.leading:
            ended_at = clock.seconds
        clock.seconds += 2
    assert ended_at - last_renewal > SETTINGS.renew_deadline_seconds
    assert ended_at - last_renewal < SETTINGS.lease_duration_seconds  # before any standby could start
    assert a.events == ["started", "stopped"]
    # The API comes back before anyone else took the Lease: a renews it, a new term begins.
    store.reachable = True
    rounds(clock, [a, b], seconds=4)
    assert a.events == ["started", "stopped", "started"] and store.holder() == "a" and b.events == []


def test_of_two_replicas_writing_the_same_version_one_wins(world: Any) -> None:
    clock, store, a, b = world
    rounds(clock, [a], seconds=2)
    a_record = parse_lease(store.get_lease(namespace="cellfit-system", name="cellfit-controllers") or b"")
    released = lease_body(a_record, name="cellfit-controllers", namespace="cellfit-system", identity="a",
                          lease_duration_seconds=15, now=clock.wall(), release=True)
    store.write_lease(namespace="cellfit-system", lease=released)
    stale = parse_lease(store.get_lease(namespace="cellfit-system", name="cellfit-controllers") or b"")
    for identity in ("b", "c"):  # both read the released Lease, both write on that version
        body = lease_body(stale, name="cellfit-controllers", namespace="cellfit-system", identity=identity,
                          lease_duration_seconds=15, now=clock.wall())
        try:
            store.write_lease(namespace="cellfit-system", lease=body)
        except KubernetesApiError as error:
            assert error.status == 409 and identity == "c"
    assert store.holder() == "b"


def test_may_take_follows_the_local_observation_not_the_record_times() -> None:
    record = parse_lease(json.dumps({"metadata": {"resourceVersion": "3"}, "spec": {
        "holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2020-01-01T00:00:00.000000Z"}}).encode())
    # An ancient renewTime does not matter: 15 s must pass after this replica saw the record.
    assert not may_take(record, identity="b", observed_at=100.0, now=114.9)
    assert may_take(record, identity="b", observed_at=100.0, now=115.0)
    assert may_take(record, identity="a", observed_at=100.0, now=100.0)
    assert may_take(None, identity="b", observed_at=0.0, now=0.0)


def test_settings_keep_retry_below_renew_below_lease() -> None:
    assert parse_settings("").leader_election == LeaderElectionSettings()
    with pytest.raises(Exception, match="retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds"):
        parse_settings("leaderElection: {leaseDurationSeconds: 10, renewDeadlineSeconds: 10}")


def test_terms_build_fresh_drivers_and_stop_them_last_first() -> None:
    log: list[str] = []

    class Driver:
        def __init__(self, name: str) -> None:
            self.name = name

        def start(self) -> None:
            log.append(f"start {self.name}")

        def stop(self) -> None:
            log.append(f"stop {self.name}")

    built: list[list[Driver]] = []

    def build() -> list[Driver]:
        built.append([Driver(f"estimator{len(built)}"), Driver(f"placer{len(built)}")])
        return built[-1]

    terms = Terms(build)
    terms.begin()
    terms.begin()  # already in a term: nothing more
    terms.end()
    terms.end()
    terms.begin()
    assert log == ["start estimator0", "start placer0", "stop placer0", "stop estimator0", "start estimator1", "start placer1"]
    assert terms.started == 2 and built[1][0] is not built[0][0]
