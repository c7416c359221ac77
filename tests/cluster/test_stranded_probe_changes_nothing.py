"""The leader's reclaim asks HiveD what a stranded pod's booking would need before it books
(``reclaim_need``), and a pod it then refuses leaves the engine exactly as it was (review).
Before, ``_book_one`` booked the cells to learn it and gave them back: the booking counted its
victims as leaving and the give-back did not take that back, so the next guaranteed pod booked
over them was held while they "left" (they never did), and the booking and its give-back moved
VC cells through the free lists.

Two refusals: a pod whose preemptionPolicy is Never (told, never reclaimed for), and one whose
cores would not fit beside the opportunistic pod that stays on the node. Each round is compared
with the engine's whole state before it: every GPU's owners, the bookings and the next booking
id, the pods counted as leaving, and each chain's free cells in order."""

from __future__ import annotations

from typing import Any

from scheduler.cells import HivedEngine
from tests.cells.helpers import snapshot
from tests.cluster.test_stranded import AFTER, Cluster, unschedulable


def state(engine: HivedEngine) -> dict[str, Any]:
    alloc = engine.allocator
    free = {chain.name: [[cell.id for cell in buddy.free_cells(level)] for level in range(1, chain.top + 1)] for chain, buddy in alloc.buddies.items()}
    bound = {name: {t: [root.id for root in roots] for t, roots in vc.bound.items()} for name, vc in alloc.vcs.items()}
    return {"cells": snapshot(engine), "next_id": alloc.bookkeeper.next_id, "leaving": dict(engine.expiry._leaving), "free": free, "bound": bound}


def test_a_never_pods_probe_leaves_the_engine_as_it_was() -> None:
    cluster = Cluster()  # VC b's opportunistic pods fill VC a's rack too
    cluster.api.pending = [unschedulable(cluster.g, preemptionPolicy="Never")]
    cluster.look_at(0)
    before = state(cluster.engine)
    assert cluster.look_at(AFTER) == []
    assert [event["reason"] for event in cluster.api.events] == ["CellsNotReclaimed"]  # it was planned, and told
    assert state(cluster.engine) == before


def test_a_pod_that_would_not_fit_beside_the_pods_that_stay_leaves_the_engine_as_it_was() -> None:
    cluster = Cluster(per_node=2, cores=31.5, g_cores=40)
    cluster.look_at(0)
    before = state(cluster.engine)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []
    assert state(cluster.engine) == before
