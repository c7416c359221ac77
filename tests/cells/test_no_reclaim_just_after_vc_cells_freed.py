"""No opportunistic pod is reclaimed for a guaranteed pod a moment after its VC's own pod left
its cells (user24b, item 6: 2 of 5 live runs).

The freeing wait (freeing.py, 35d5540) ended the instant cellfit's watch showed the VC's leaving
pod gone; kube-scheduler's cache still counted it on its node for a moment, so it offered only
the opportunistic pod's node, and HiveD reclaimed that pod while the cells just freed stayed
idle. Now, for freeing.FREED_CELL_WAIT_SECONDS after the pod is gone (on the engine's clock:
the driver's), a guaranteed pod of that VC which HiveD would place
on the freed node without a victim gets no victim elsewhere, and is told why; after that, or
once those cells are no longer free for it, HiveD reclaims as before.

Two 8-GPU V100 nodes; vc-a's quota is both, its guaranteed g1 fills n-a, vc-b's opportunistic
opp fills n-b (tests/cells/test_no_preemption_while_vc_cells_free.py's scene).
"""

from __future__ import annotations

import time
from typing import Callable

from scheduler.cells import HivedEngine
from scheduler.cells.freeing import FREED_CELL_WAIT_SECONDS
from scheduler.core.model import PodInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import pod
from tests.cells.test_no_preemption_while_vc_cells_free import run, scene, terminating

WAITS = ("HiveD waits for the cells of virtual cluster 'vc-a' on node n-a, which pods of it freed just now (ns/g1): "
         "kube-scheduler places this pod there once its cache shows them gone; no opportunistic pod is preempted for it "
         "meanwhile (for 5 s)")


class Clock:
    """The driver's seconds, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def g1_left(clock: Callable[[], float] = time.monotonic) -> tuple[HivedEngine, PodInfo]:
    engine, g1, opp = scene(clock=clock)
    engine.apply_pod(terminating(g1))
    engine.delete_pod("g1")  # cellfit's watch: gone; kube-scheduler's cache still counts it on n-a
    return engine, opp


def test_the_preempt_verb_reclaims_nothing_just_after_the_vcs_pod_left() -> None:
    engine, _ = g1_left()
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {}
    assert "g2" not in engine.allocator.by_pod and not engine.expiry.is_leaving("opp")


def test_the_filter_and_the_preemption_refusal_say_why() -> None:
    engine, _ = g1_left()
    decision = filter_offered(engine, pod("g2", 8, "vc-a"), ["n-b"])
    assert not decision.feasible
    assert set(decision.unresolvable.values()) == {WAITS}
    assert engine.freeing_wait(pod("g2", 8, "vc-a")) == WAITS


def test_fitgpp_takes_no_victim_and_answers_the_wait() -> None:
    engine, opp = g1_left()
    made = FitGppEngine(engine, settings=FitGppSettings())
    choice = made.decide_preemption(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {})
    assert choice.victims == {}
    assert choice.refusal == WAITS


def test_the_pod_gets_the_freed_cells_once_offered() -> None:
    engine, _ = g1_left()
    assert run(engine, pod("g2", 8, "vc-a"), ["n-a", "n-b"]).node_name == "n-a"


def test_after_the_window_the_reclaim_goes_ahead() -> None:
    clock = Clock()
    engine, _ = g1_left(clock)  # at 100 s
    clock.now = 100.0 + FREED_CELL_WAIT_SECONDS - 0.5
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {}
    clock.now = 100.0 + FREED_CELL_WAIT_SECONDS
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}


def test_the_window_is_the_engines_clock_not_a_sweep() -> None:
    """The simulator sweeps no bookings: the wait ends on the clock alone, as live, so both
    decide alike (tests/simulator/test_live_parity.py)."""
    clock = Clock()
    engine, _ = g1_left(clock)
    clock.now += FREED_CELL_WAIT_SECONDS
    assert engine.freeing_wait(pod("g2", 8, "vc-a")) is None


def test_a_second_pod_leaving_starts_the_window_again() -> None:
    clock = Clock()
    engine, g1, opp = scene(g1_gpus=4, clock=clock)
    g0 = run(engine, pod("g0", 4, "vc-a"), ["n-a"])
    for leaving in (g1, g0):
        engine.apply_pod(terminating(leaving))
    engine.delete_pod("g1")
    clock.now += FREED_CELL_WAIT_SECONDS - 1
    engine.delete_pod("g0")
    clock.now += FREED_CELL_WAIT_SECONDS - 1
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {}
    assert "ns/g0, ns/g1" in (engine.freeing_wait(pod("g2", 8, "vc-a")) or "")


def test_cells_taken_meanwhile_hold_nothing_back() -> None:
    engine, _ = g1_left()
    run(engine, pod("g3", 8, "vc-a"), ["n-a"])  # another pod of vc-a took the freed cells
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}


def test_a_pod_whose_bind_failed_starts_no_wait() -> None:
    clock = Clock()
    engine, _ = g1_left(clock)
    clock.now += FREED_CELL_WAIT_SECONDS  # g1's cells are no longer just freed
    g3 = pod("g3", 8, "vc-a")
    engine.reserve(g3, "n-a")
    engine.unreserve(g3.uid)  # its bind failed: it held n-a's cells only as a reservation
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}


def test_the_leaders_booking_books_nothing_just_after_the_vcs_pod_left() -> None:
    engine, _ = g1_left()
    g2 = pod("g2", 8, "vc-a")
    engine.apply_pod(g2)
    assert engine.reclaim_need(g2, among=["n-b"]) is None
    assert engine.book_reclaim(g2, among=["n-b"]) is None
    assert "g2" not in engine.allocator.by_pod and not engine.expiry.is_leaving("opp")
