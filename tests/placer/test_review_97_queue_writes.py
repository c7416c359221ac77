"""What a queued Job's ``Placed`` condition costs the API server: it says the Job's place and its
expected start as a time, so a queue where nothing changes is written once, not pass after pass as
the wait from now shrinks (helper-92 counted 819 writes in 15 minutes for 200 queued Jobs)."""

from __future__ import annotations

import json
import time
from typing import Any

from placer.controller import PlacerController, queued_message, queued_said, start_tolerance_seconds, still_says
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs
from tests.placer.test_review_61 import ServerApi, stored_job

START = 1767225700.0  # 2026-01-01T00:01:40Z
PASS_SECONDS = 30.0


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


class ConditionsApi(ServerApi):
    """The API server's Jobs with each condition written into the Job's status, as the status
    subresource stores it; ``writes`` counts them."""

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        super().__init__(jobs)
        self.writes: list[tuple[str, str]] = []

    def set_job_condition(self, *, name: str, condition: dict[str, Any], **rest: Any) -> None:
        super().set_job_condition(name=name, condition=condition, **rest)
        self.writes.append((name, condition["message"]))
        status = self.jobs[name].setdefault("status", {})
        status["conditions"] = [c for c in status.get("conditions", []) if c["type"] != condition["type"]] + [condition]

    def show_started(self, at: float) -> None:
        """The Job controller's part: a Job unsuspended gets its start time."""
        stamp = _rfc3339(at)
        for body in self.jobs.values():
            if body["spec"]["suspend"] is False:
                body.setdefault("status", {}).setdefault("startTime", stamp)


def _rfc3339(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def placer_over(api: ServerApi, watch: Jobs, clock: FakeClock) -> PlacerController:
    node = Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=0)  # four CPU slots of 2 cores
    return PlacerController(
        api=api, jobs=watch, settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=clock,
    )


def running_job(name: str, *, created: int, seconds: float) -> dict[str, Any]:
    """A Job AlloX started on cpu at START (the Job controller has shown its start)."""
    body = stored_job(name, created=created, seconds=seconds)
    body["metadata"]["annotations"]["cellfit.io/placement"] = "cpu"
    body["spec"]["suspend"] = False
    body["status"] = {"startTime": _rfc3339(START)}
    return body


def a_queue_behind_four_running_jobs(queued: int, *, alike: bool = False) -> tuple[ConditionsApi, Jobs, FakeClock, PlacerController]:
    """Four Jobs of 50 to 95 minutes on the four slots, ``queued`` Jobs of 10 to 33 minutes
    behind them (``alike``: all of 10 minutes, one user's sweep), arrived one a second."""
    running = [running_job(f"run-{i}", created=i, seconds=3000 + 900 * i) for i in range(4)]
    waiting = [stored_job(f"q-{i:03d}", created=0, seconds=600 + (0 if alike else 7 * i)) for i in range(queued)]
    for i, body in enumerate(waiting):
        body["metadata"]["creationTimestamp"] = _rfc3339(START - 3600 + i)
    api = ConditionsApi(running + waiting)
    watch, clock = Jobs(api.watched()), FakeClock()
    placer = placer_over(api, watch, clock)
    assert placer.admit().starts == ()
    return api, watch, clock, placer


def passes_over(api: ConditionsApi, watch: Jobs, clock: FakeClock, placer: PlacerController, *, minutes: float) -> int:
    """The condition writes of a pass every 30 s for ``minutes``, the watch showing every write."""
    before = len(api.writes)
    for _ in range(int(minutes * 60 / PASS_SECONDS)):
        clock.now += PASS_SECONDS
        watch.jobs = api.watched()
        placer.admit()
    return len(api.writes) - before


def test_a_queue_where_nothing_changes_is_written_once_however_long_it_waits() -> None:
    api, watch, clock, placer = a_queue_behind_four_running_jobs(queued=200)
    assert len(dict(api.writes)) == 200
    # 15 minutes of passes: the relative wording ("expected start in ~12 min") wrote 565
    # conditions over this queue, as the wait from now changed its text minute after minute.
    assert passes_over(api, watch, clock, placer, minutes=15) == 0


def test_a_sweep_of_alike_jobs_keeps_its_places_in_the_order_they_arrived() -> None:
    # One user's 200 Jobs of one estimate: the plan's matching breaks their ties one way or
    # another pass after pass (786 writes in 15 minutes); they wait in the order they came.
    api, watch, clock, placer = a_queue_behind_four_running_jobs(queued=200, alike=True)
    told = dict(api.writes)
    assert [told[f"q-{i:03d}"].split(",")[0] for i in range(3)] == ["1st on cpu", "2nd on cpu", "3rd on cpu"]
    assert passes_over(api, watch, clock, placer, minutes=15) == 0


def test_a_sweep_starts_in_the_order_it_was_told() -> None:
    api, watch, clock, placer = a_queue_behind_four_running_jobs(queued=20, alike=True)
    del api.jobs["run-0"]  # it finished: its slot is free
    clock.now += PASS_SECONDS
    watch.jobs = api.watched()
    (start,) = placer.admit().starts
    assert start.key == "alice/q-000" and api.jobs["q-000"]["spec"]["suspend"] is False
    told = dict(api.writes)
    assert [told[f"q-{i:03d}"].split(",")[0] for i in (1, 2)] == ["1st on cpu", "2nd on cpu"]
    assert {q["job"] for rows in placer.inspect()["queue"].values() for q in rows} == {f"alice/q-{i:03d}" for i in range(1, 20)}


def test_a_restarted_cellfit_writes_none_of_the_conditions_it_would_write_again() -> None:
    api, watch, clock, _ = a_queue_behind_four_running_jobs(queued=20)
    clock.now += 7 * 60
    watch.jobs = api.watched()
    before = len(api.writes)
    placer_over(api, watch, clock).admit()  # a new process: nothing told in memory
    assert len(api.writes) == before


def test_a_job_whose_place_changes_is_told_at_once() -> None:
    api, watch, clock, placer = a_queue_behind_four_running_jobs(queued=20)
    first = dict(api.writes)
    # The Job ahead of every other is deleted: each one behind it moves up.
    del api.jobs["q-000"]
    watch.jobs = api.watched()
    placer.admit()
    moved = {name: message for name, message in api.writes[len(first):]}
    assert set(moved) == set(first) - {"q-000"}
    assert all(queued_said(moved[name]) != queued_said(first[name]) for name in moved)


def test_an_expected_start_that_moves_beyond_the_tolerance_is_written_again() -> None:
    api, watch, clock, placer = a_queue_behind_four_running_jobs(queued=4)
    first = dict(api.writes)
    # The running Jobs' user writes estimates two hours longer: every queued Job's expected start
    # moves by more than a quarter of its wait, its place stays.
    for i in range(4):
        api.jobs[f"run-{i}"]["metadata"]["annotations"]["cellfit.io/estimate"] = json.dumps({"cpu": {"seconds": 3000 + 900 * i + 7200}})
        api.edit(f"run-{i}", lambda body: None)
    watch.jobs = api.watched()
    before = len(api.writes)
    placer.admit()
    moved = dict(api.writes[before:])
    assert set(moved) == set(first)
    for name, message in moved.items():
        (place, starts_at), (told_place, told_at) = queued_said(message), queued_said(first[name])  # type: ignore[misc]
        assert place == told_place and starts_at - told_at >= 7200 - 60


def test_the_condition_reads_back_as_its_place_and_start() -> None:
    message = queued_message(place="2nd on gpu of virtual cluster 'vision'", starts_at=START + 720.4)
    assert message == "2nd on gpu of virtual cluster 'vision', expected start at 2026-01-01T00:13:40Z (AlloX)"
    assert queued_said(message) == ("2nd on gpu of virtual cluster 'vision'", START + 720)
    assert queued_said("2nd on gpu, expected start in ~12 min (AlloX)") is None  # an older cellfit's: written anew
    # A minute, or a quarter of the wait: the ω grid's own resolution (scheduler/matching/admission.py).
    assert start_tolerance_seconds(wait_seconds=100, grid_seconds=60) == 60
    assert start_tolerance_seconds(wait_seconds=100, grid_seconds=300) == 300
    assert start_tolerance_seconds(wait_seconds=3600, grid_seconds=60) == 900
    place = "2nd on gpu of virtual cluster 'vision'"
    assert still_says(message, place=place, starts_at=START + 780, tolerance_seconds=60)
    assert not still_says(message, place=place, starts_at=START + 781, tolerance_seconds=60)
    assert not still_says(message, place="1st on gpu of virtual cluster 'vision'", starts_at=START + 720, tolerance_seconds=60)
