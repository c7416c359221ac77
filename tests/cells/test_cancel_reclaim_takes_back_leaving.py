"""``cancel_reclaim`` gives the pod's victims back their standing: ``book_reclaim`` counted them as
leaving (the leader's reclaim deletes them next), and a booking given back before anything was
deleted leaves them running. Before, they stayed counted as leaving, and the next guaranteed
pod's booking over them was held for pods that were never deleted (expiry.py keeps a booking
while its victims leave). A victim the watch has shown terminating since stays leaving."""

from __future__ import annotations

from msgspec.structs import replace

from tests.cells.helpers import pod
from tests.cells.test_booking_kept_while_victims_leave import full_of_opportunistic_pods, victim_on


def test_a_booking_given_back_leaves_its_victims_running() -> None:
    engine, names = full_of_opportunistic_pods()
    g = pod("g", 8, "a")
    engine.apply_pod(g)
    waiting = engine.book_reclaim(g, among=names)
    assert waiting is not None and waiting.victims
    assert all(engine.expiry.leaving(engine.allocator.victims(engine.allocator.by_pod["g"])))
    victims = list(waiting.victims)
    engine.cancel_reclaim("g")
    assert not engine.has_booking(g)
    assert engine.expiry.leaving([engine.allocator.by_pod[uid] for uid in victims]) == []


def test_a_victim_the_watch_showed_terminating_stays_leaving() -> None:
    engine, names = full_of_opportunistic_pods()
    g = pod("g", 8, "a")
    engine.apply_pod(g)
    waiting = engine.book_reclaim(g, among=names)
    assert waiting is not None and waiting.node is not None
    (victim,) = waiting.victims
    engine.apply_pod(replace(victim_on(engine, waiting.node), terminating=True))
    engine.cancel_reclaim("g")
    assert engine.expiry.leaving([engine.allocator.by_pod[victim]]) == [engine.allocator.by_pod[victim]]
