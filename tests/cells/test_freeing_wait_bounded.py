"""HiveD's wait for its VC's cells being freed (freeing.py) is bounded: a pod that stays leaving
(a finalizer, a kubelet that never confirms, a deletion handed out that nobody made) frees its
cell only for its grace period and ``cells.victimExitMarginSeconds`` (60 s) after the first
sweep that found it leaving; past that the preemption it held back goes ahead, the log names the
pod that overstayed, and so does the filter's reason for the preemption. Before, such a pod held
its VC's preemptions back for as long as it stayed: a guaranteed pod waited for ever.

The engine is driven as the watch and kube-scheduler drive it; ``expire_bookings(now)`` is the
sweeper's clock (seconds). Two 8-GPU nodes: vc-a's quota is both, vc-b's opportunistic opp fills
n-b (test_no_preemption_while_vc_cells_free.py's scene)."""

from __future__ import annotations

import logging

import pytest
from msgspec.structs import replace

from scheduler.kube.names import filter_offered
from tests.cells.helpers import pod
from tests.cells.test_no_preemption_while_vc_cells_free import run, scene, terminating

GRACE = 30  # the pods' grace period (PodInfo's default)
MARGIN = 60.0  # cells.victimExitMarginSeconds' default


def test_a_pod_stuck_terminating_holds_the_preemption_back_only_for_its_grace_period_and_the_margin(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine, g1, _ = scene()
    engine.apply_pod(terminating(g1))
    g2 = pod("g2", 8, "vc-a")
    engine.expire_bookings(1000.0)  # the first sweep that finds it leaving starts its time
    engine.expire_bookings(1000.0 + GRACE + MARGIN - 0.1)
    assert engine.select_victims(g2, {"n-b": ["opp"]}, {}) == {}
    with caplog.at_level(logging.WARNING, logger="scheduler.cells.engine"):
        engine.expire_bookings(1000.0 + GRACE + MARGIN)
    (said,) = [r.getMessage() for r in caplog.records if "ns/g1" in r.getMessage()]
    assert said == (
        "pod ns/g1 is still there 90 s after HiveD first saw it leave (its grace period, 30 s, and 60 s, "
        "cells.victimExitMarginSeconds): HiveD no longer waits for the cells it holds on node n-a, and opportunistic "
        "pods may be preempted elsewhere for the guaranteed pods of the virtual cluster whose cells they are"
    )
    assert engine.select_victims(g2, {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}


def test_the_filter_says_which_pod_overstayed_when_it_preempts() -> None:
    engine, g1, _ = scene()
    engine.apply_pod(terminating(g1))
    engine.expire_bookings(0.0)
    engine.expire_bookings(GRACE + MARGIN)
    decision = filter_offered(engine, pod("g2", 8, "vc-a"), ["n-b"])
    (reason,) = decision.failed.values()
    assert reason == (
        "opportunistic pods ns/opp hold the cells HiveD chose for this pod on node n-b: preempting them would free them for it; "
        "HiveD no longer waits for cell n-a of virtual "
        "cluster 'vc-a' on node n-a: the pods leaving it have overstayed their grace period and 60 s, "
        "cells.victimExitMarginSeconds (ns/g1)"
    )


def test_a_deletion_handed_out_that_nobody_made_holds_back_only_for_the_grace_period_and_the_margin() -> None:
    """kube-scheduler took g2's victim on n-a from select_victims, and g2 was deleted before the
    victim was: nobody deletes it, yet it counted as leaving for good."""
    engine, _, _ = scene(g1_gpus=4)
    half = run(engine, pod("opp-half", 4, "vc-b", priority="opportunistic"), ["n-a"])
    assert engine.select_victims(pod("g2", 4, "vc-a"), {"n-a": [half.uid]}, {}) == {"n-a": [half.uid]}
    engine.delete_pod("g2")
    g3 = pod("g3", 4, "vc-a")
    engine.expire_bookings(0.0)
    engine.expire_bookings(GRACE + MARGIN - 0.1)
    assert engine.select_victims(g3, {"n-b": ["opp"]}, {}) == {}
    engine.expire_bookings(GRACE + MARGIN)
    assert engine.select_victims(g3, {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}


def test_its_deletion_seen_later_starts_its_time_again() -> None:
    """A deletion handed out and then made: the pod's time counts from its deletion, as the API
    server's deletionTimestamp does (deletion time plus grace period)."""
    engine, _, _ = scene(g1_gpus=4)
    half = run(engine, pod("opp-half", 4, "vc-b", priority="opportunistic"), ["n-a"])
    engine.select_victims(pod("g2", 4, "vc-a"), {"n-a": [half.uid]}, {})
    engine.delete_pod("g2")
    g3 = pod("g3", 4, "vc-a")
    engine.expire_bookings(0.0)
    engine.expire_bookings(80.0)
    engine.apply_pod(terminating(half))  # deleted now
    engine.expire_bookings(85.0)
    engine.expire_bookings(85.0 + GRACE + MARGIN - 0.1)
    assert engine.select_victims(g3, {"n-b": ["opp"]}, {}) == {}
    engine.expire_bookings(85.0 + GRACE + MARGIN)
    assert engine.select_victims(g3, {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}


def test_a_longer_grace_period_is_waited_for() -> None:
    engine, g1, _ = scene()
    engine.apply_pod(replace(terminating(g1), grace_period_seconds=600))
    g2 = pod("g2", 8, "vc-a")
    engine.expire_bookings(0.0)
    engine.expire_bookings(600 + MARGIN - 0.1)
    assert engine.select_victims(g2, {"n-b": ["opp"]}, {}) == {}
    engine.expire_bookings(600 + MARGIN)
    assert engine.select_victims(g2, {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}
