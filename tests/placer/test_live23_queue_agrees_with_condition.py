"""``kubectl cellfit queue`` and a queued Job's condition say whom it starts together with alike
(a live session, L3: the queue showed "4 (starts with 3)" while the condition said "starting
together with the 1st to 3rd"). The ω grid, anchored at now, puts machines freeing 30 s apart on
one second on one pass and on two the next: the inspect view (which the queue and ``why`` read)
followed it pass by pass, while the condition, within its tolerance, stayed as told. Both are
right within the tolerance the condition keeps; the view now says what the condition says, and
a condition whose Jobs named no longer start within that tolerance of it is written again."""

from __future__ import annotations

from typing import Any

from placer.controller import told_first
from scheduler.matching.admission import Queued
from tests.placer.test_controller import Jobs, RecordingApi, controller
from tests.placer.test_review_61 import stored_job
from tests.placer.test_review_97_queue_writes import START, ConditionsApi, FakeClock, placer_over, running_job
from tests.placer.test_words22_queued_event_restart import WAITING, with_condition


def a_queue_behind_slots_freeing_30_s_apart() -> tuple[ConditionsApi, Jobs, FakeClock, Any]:
    """Four CPU slots, two freeing in 5 minutes and two 30 s later; four Jobs queued behind them."""
    running = [running_job(f"run-{i}", created=i, seconds=300 + 30 * (i // 2)) for i in range(4)]
    waiting = [stored_job(f"q-{i}", created=10 + i, seconds=600) for i in range(4)]
    api = ConditionsApi(running + waiting)
    watch, clock = Jobs(api.watched()), FakeClock()
    placer = placer_over(api, watch, clock)
    assert placer.admit().starts == ()
    return api, watch, clock, placer


def said(api: ConditionsApi, placer: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Per queued Job, the first position its condition names, and the one the inspect view names."""
    rows = {row["job"].removeprefix("alice/"): row for row in placer.inspect()["queue"]["cpu"]}
    conditions = dict(api.writes)
    return ({name: told_first(conditions[name], position=row["position"]) for name, row in rows.items()},
            {name: row.get("startsWith", row["position"]) for name, row in rows.items()})


def test_the_queue_names_whom_each_starts_with_as_its_condition_does_pass_after_pass() -> None:
    api, watch, clock, placer = a_queue_behind_slots_freeing_30_s_apart()
    for _ in range(8):
        condition, view = said(api, placer)
        assert view == condition
        clock.now += 30
        watch.jobs = api.watched()
        placer.admit()
    assert len(api.writes) == 4  # nor written again as the grid moves


def test_a_condition_whose_jobs_named_no_longer_start_with_it_is_written_again() -> None:
    api = RecordingApi()
    placer = controller(api, [])
    job = with_condition(WAITING)
    told = "4th on cpu, starting together with the 1st to 3rd, expected start at 2026-01-01T00:11:40Z (AlloX)"
    placer._told[job.metadata.uid] = told
    queued = Queued(key="alice/w", kind="cpu", position=4, expected_start_seconds=600.0)
    # The 1st and 2nd start within a minute of it: told as it was.
    assert placer._tell_queued(job, queued, now=START, first=3, starts={1: START + 560, 2: START + 560, 3: START + 600}) == 1
    assert placer._told[job.metadata.uid] == told
    # They start 5 minutes before it now: the condition says whom it starts with as the plan has it.
    assert api.conditions == []
    assert placer._tell_queued(job, queued, now=START, first=3, starts={1: START + 300, 2: START + 300, 3: START + 600}) == 3
    assert [(name, condition["message"]) for name, condition in api.conditions] == [
        ("w", "4th on cpu, starting together with the 3rd, expected start at 2026-01-01T00:11:40Z (AlloX)")]


def test_whom_a_condition_names_reads_back() -> None:
    at = "expected start at 2026-01-01T00:11:40Z (AlloX)"
    assert told_first(f"4th on cpu, starting together with the 1st to 3rd, {at}", position=4) == 1
    assert told_first(f"3rd on gpu of virtual cluster 'a', starting together with the 1st and 2nd, {at}", position=3) == 1
    assert told_first(f"12th on cpu, starting together with the 11th, {at}", position=12) == 11
    assert told_first(f"2nd on cpu, {at}", position=2) == 2
    assert told_first("2nd on cpu, expected start in ~12 min", position=2) == 2
