"""Review of the cluster view (helper-67): the controllers' Lease kept only while it is safe to
lead, and the watch cache's state against what a fresh list builds."""

from __future__ import annotations

import json
import threading
from typing import Any

from scheduler.cluster.leadership import LeaderElector
from scheduler.config import LeaderElectionSettings
from scheduler.errors import KubernetesApiError
from tests.unit.test_leadership import Clock  # monotonic and wall time advanced by hand

SETTINGS = LeaderElectionSettings(lease_name="cellfit-controllers", namespace="cellfit-system", identity="a")


class SlowLeases:
    """One Lease with the API server's optimistic concurrency; a write may take ``write_seconds``
    of the clock to answer (committed as it arrives: the double advances the clock), and reads
    may hang until released."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.write_seconds = 0.0
        self.reachable = True
        self.hang = False
        self.hanging = threading.Event()  # a read is hanging now
        self.released = threading.Event()  # hanging reads answer (unreachable)

    def get_lease(self, *, namespace: str, name: str) -> bytes | None:
        if self.hang:
            self.hanging.set()
            self.released.wait(30)
            raise KubernetesApiError("Kubernetes API did not answer")
        if not self.reachable:
            raise KubernetesApiError("Kubernetes API unreachable: connection refused")
        return None if self.lease is None else json.dumps(self.lease).encode()

    def write_lease(self, *, namespace: str, lease: dict[str, Any]) -> bytes:
        if not self.reachable:
            raise KubernetesApiError("Kubernetes API unreachable: connection refused")
        stored_version = None if self.lease is None else self.lease["metadata"]["resourceVersion"]
        if lease["metadata"].get("resourceVersion") != stored_version:
            raise KubernetesApiError("the object has been modified", status=409)
        self.version += 1
        self.lease = json.loads(json.dumps(lease))
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        answer = json.dumps(self.lease).encode()
        self.clock.seconds += self.write_seconds  # committed on arrival, answered this much later
        return answer


def elector(clock: Clock, leases: SlowLeases, events: list[str], *, settings: LeaderElectionSettings = SETTINGS) -> LeaderElector:
    return LeaderElector(
        api=leases, settings=settings,
        on_started=lambda: events.append("started"), on_stopped=lambda: events.append("stopped"),
        monotonic=clock.monotonic, wall=clock.wall,
    )


def test_a_renewal_answered_late_counts_from_when_it_was_sent_not_answered() -> None:
    """The write commits when it reaches the server; a standby that reads the Lease then may take
    it a lease duration later. A leader that counted its deadline from the late answer led on
    past that moment (two leaders: two estimators, two placers)."""
    clock = Clock()
    leases = SlowLeases(clock)
    events: list[str] = []
    leader = elector(clock, leases, events)
    leader.campaign_once()
    assert leader.leading
    clock.seconds += SETTINGS.retry_period_seconds
    sent_at = clock.seconds
    leases.write_seconds = 6.0  # a congested API server answers the renewal 6 s late
    leader.campaign_once()
    leases.write_seconds = 0.0
    leases.reachable = False  # then nothing reaches it
    while leader.leading:
        clock.seconds += SETTINGS.retry_period_seconds
        leader.campaign_once()
    # A standby that read the renewal as it was committed may take the Lease at sent_at + duration.
    assert clock.seconds < sent_at + SETTINGS.lease_duration_seconds
    assert events == ["started", "stopped"]


def test_a_leader_whose_renewal_hangs_ends_its_term_by_the_deadline() -> None:
    """The API server stops answering (a black-holed connection) mid-term: the renewal's read
    hangs for the client's timeout and its retries. The term must end by the renew deadline all
    the same, not when the call gives up, by which time a standby may have led for a while."""
    clock = Clock()
    leases = SlowLeases(clock)
    events: list[str] = []
    stopped = threading.Event()
    settings = SETTINGS.model_copy(update={"retry_period_seconds": 0.01})
    leader = LeaderElector(
        api=leases, settings=settings,
        on_started=lambda: events.append("started"),
        on_stopped=lambda: (events.append("stopped"), stopped.set()),
        monotonic=clock.monotonic, wall=clock.wall,
    )
    leader.campaign_once()
    assert leader.leading
    leases.hang = True
    leader.start()
    try:
        assert leases.hanging.wait(10)
        clock.seconds += settings.renew_deadline_seconds + 0.5  # still hanging past the deadline
        assert stopped.wait(10), "the term outlived the renew deadline while the renewal hung"
        assert not leader.leading and events == ["started", "stopped"]
    finally:
        leases.released.set()
        leader.stop()
