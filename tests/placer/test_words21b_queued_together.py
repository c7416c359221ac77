"""Queued Jobs of one kind that start at the same time are told so (user21's item 11): with three
CPU slots freeing together, ij-5 and ij-6 were told "1st on cpu, expected start at 08:33:34Z" and
"2nd on cpu, expected start at 08:33:34Z", and "2nd" read as "after the 1st". The place stays the
Queued Event's once-key (the kind) and what the condition is compared by (the place and the
time): saying whom a Job starts with writes nothing more."""

from __future__ import annotations

from typing import Any

from placer.controller import queued_message, queued_said, starting_together, still_says
from scheduler.matching.admission import Queued
from scheduler.wording import together_with
from tests.placer.test_controller import Jobs
from tests.placer.test_review_61 import stored_job
from tests.placer.test_review_97_queue_writes import START, ConditionsApi, FakeClock, passes_over, placer_over, running_job


def a_queue_behind_four_slots_freeing_together(queued: int) -> tuple[ConditionsApi, Jobs, FakeClock, Any]:
    """Four CPU slots, each running a Job of 50 minutes started together; ``queued`` Jobs of 10
    minutes behind them, one user's, arrived one a second."""
    running = [running_job(f"run-{i}", created=i, seconds=3000) for i in range(4)]
    waiting = [stored_job(f"q-{i}", created=10 + i, seconds=600) for i in range(queued)]
    api = ConditionsApi(running + waiting)
    watch, clock = Jobs(api.watched()), FakeClock()
    placer = placer_over(api, watch, clock)
    assert placer.admit().starts == ()
    return api, watch, clock, placer


def told(api: ConditionsApi) -> dict[str, str]:
    return dict(api.writes)


def test_jobs_starting_when_the_same_slots_free_are_told_they_start_together() -> None:
    api, _, _, _ = a_queue_behind_four_slots_freeing_together(queued=5)
    at = "expected start at 2026-01-01T01:01:16Z (AlloX)"  # 50 min after START, rounded up on the ω grid
    assert told(api)["q-0"] == f"1st on cpu, {at}"
    assert told(api)["q-1"] == f"2nd on cpu, starting together with the 1st, {at}"
    assert told(api)["q-2"] == f"3rd on cpu, starting together with the 1st and 2nd, {at}"
    assert told(api)["q-3"] == f"4th on cpu, starting together with the 1st to 3rd, {at}"
    # The 5th waits for one of them to end: after them, so nothing more is said.
    assert told(api)["q-4"].startswith("5th on cpu, expected start at 2026-01-01T01:11:16Z")
    # The Queued Event says it too, as kubectl describe job shows it.
    events = {name: message for name, reason, message in api.events if reason == "Queued"}
    assert events["q-1"] == (f"queued by AlloX: 2nd on cpu, starting together with the 1st, {at.removesuffix(' (AlloX)')} (kubectl cellfit why job/q-1 -n alice for its current place)")


def test_the_inspect_view_says_whom_each_starts_with() -> None:
    _, _, _, placer = a_queue_behind_four_slots_freeing_together(queued=5)
    rows = {row["job"]: row for row in placer.inspect()["queue"]["cpu"]}
    assert "startsWith" not in rows["alice/q-0"] and "startsWith" not in rows["alice/q-4"]
    assert [rows[f"alice/q-{i}"]["startsWith"] for i in (1, 2, 3)] == [1, 1, 1]


def test_saying_whom_a_job_starts_with_writes_no_more_conditions_nor_events() -> None:
    api, watch, clock, placer = a_queue_behind_four_slots_freeing_together(queued=5)
    events = len(api.events)
    assert passes_over(api, watch, clock, placer, minutes=15) == 0
    assert len(api.events) == events


def test_the_condition_reads_back_its_place_and_time_with_or_without_whom_it_starts_with() -> None:
    at = START + 3000
    plain = queued_message(place="2nd on gpu of virtual cluster 'vision'", starts_at=at)
    together = queued_message(place="2nd on gpu of virtual cluster 'vision'", starts_at=at, together="the 1st")
    assert together == ("2nd on gpu of virtual cluster 'vision', starting together with the 1st, "
                        "expected start at 2026-01-01T00:51:40Z (AlloX)")
    assert queued_said(plain) == queued_said(together) == ("2nd on gpu of virtual cluster 'vision'", at)
    # A Job told it starts with the 1st is told nothing new when only that changes (within the
    # tolerance its time is held to): its place and time are what is compared.
    assert still_says(together, place="2nd on gpu of virtual cluster 'vision'", starts_at=at, tolerance_seconds=60)


def test_runs_are_per_kind_and_vc_and_to_the_second() -> None:
    queue = [Queued(key="a", kind="cpu", position=1, expected_start_seconds=60.0),
             Queued(key="b", kind="cpu", position=2, expected_start_seconds=60.2),
             Queued(key="c", kind="cpu", position=3, expected_start_seconds=120.0),
             Queued(key="d", kind="cpu", position=4, expected_start_seconds=120.0),
             Queued(key="e", kind="gpu", position=1, expected_start_seconds=60.0, pool="vision"),
             Queued(key="f", kind="gpu", position=1, expected_start_seconds=60.0, pool="nlp")]
    assert starting_together(queue, now=START) == {"a": 1, "b": 1, "c": 3, "d": 3, "e": 1, "f": 1}


def test_whom_a_job_starts_with_in_words() -> None:
    assert together_with(1, 1) == "" and together_with(3, 3) == ""
    assert together_with(2, 1) == "the 1st"
    assert together_with(3, 1) == "the 1st and 2nd"
    assert together_with(12, 2) == "the 2nd to 11th"
