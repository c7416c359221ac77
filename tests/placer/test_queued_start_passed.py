"""user26: a Queued condition read "expected start at 01:19:13Z" at 01:19:20, a time gone by,
because a Job running past its estimate keeps the queue's first expected "now" and the condition
is written again only when that moves by more than a minute. A Job expected to start now is told
it starts any moment, and why, without a time; a told time that has passed is not kept."""

from __future__ import annotations

from typing import Any

from placer.controller import PlacerController, queued_said, still_says
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi, job

NOW = 1767225700.0  # 2026-01-01T00:01:40Z


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def placer(api: RecordingApi, jobs: list[Any], clock: Clock) -> PlacerController:
    node = Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1)
    return PlacerController(api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False),
                            gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=clock)


def queued(api: RecordingApi, name: str) -> list[str]:
    return [c["message"] for who, c in api.conditions if who == name and c["reason"] == "Queued"]


def test_a_job_whose_machine_runs_past_its_estimate_is_told_it_starts_any_moment_not_a_passed_time() -> None:
    """a runs on the one GPU since 00:01:10, 40 s estimated: it ends at 00:01:50. b (cpu 1000 s)
    waits for it: told 00:02:40 (the minute grid). At 00:02:47 a still runs: b is told it starts
    any moment, its machine's Job running past its estimate (before: 00:02:40 stood, in the past)."""
    api, clock = RecordingApi(), Clock()
    running = job("a", gpu=40, cpu=1000, suspend=False, placement="gpu", started="2026-01-01T00:01:10Z", version="3")
    jobs = [running, job("b", gpu=20, cpu=1000, created=1, version="4")]
    live = placer(api, jobs, clock)
    live.admit()
    assert queued(api, "b") == ["1st on gpu, expected start at 2026-01-01T00:02:40Z (AlloX)"]
    clock.now = NOW + 67
    live.admit()
    assert queued(api, "b")[1:] == ["1st on gpu, expected to start any moment, its machine's Job running past its estimate (AlloX)"]
    # Said once: the next pass, still overdue, writes nothing.
    clock.now = NOW + 80
    live.admit()
    assert len(queued(api, "b")) == 2


def test_a_told_time_that_has_passed_is_not_kept_within_the_tolerance() -> None:
    told = "1st on gpu, expected start at 2026-01-01T00:02:40Z (AlloX)"
    at = queued_said(told)
    assert at is not None
    # 7 s after the time told, a new expected start 20 s on is within the minute's tolerance,
    # but the time told has passed.
    assert still_says(told, place="1st on gpu", starts_at=at[1] + 20, tolerance_seconds=60)
    assert not still_says(told, place="1st on gpu", starts_at=at[1] + 20, tolerance_seconds=60, now=at[1] + 7)
    assert still_says(told, place="1st on gpu", starts_at=at[1] + 20, tolerance_seconds=60, now=at[1] - 7)


def test_the_any_moment_message_reads_back_with_its_place_and_back_off() -> None:
    said = queued_said("backing off on cpu until 2026-01-01T00:07:00Z after none of its pods was bound within 300 s "
                       "(suspended again 1 time); 2nd on gpu, starting together with the 1st, expected to start any moment, "
                       "its machine's Job running past its estimate (AlloX)")
    assert said is not None and said[0] == "2nd on gpu"
