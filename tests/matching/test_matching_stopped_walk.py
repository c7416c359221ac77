"""Algorithm 2 stopped part way (``stop``, the placer's decision budget): a visit's start
depends only on the visits before it, so a walk stopped before a visit has made exactly the
unstopped walk's starts on the machines it visited, in order, and says how many free machines
it left undecided. Random bursts (α 0.1 to 1, runs of visits in C and every visit in Python),
random live states through admission's ``decide``, and the benchmark's burst of one Job per
user (the instance whose unbounded decision outlived the solver process's timeout).
"""

from __future__ import annotations

import importlib
import random
from typing import Any

import pytest

from scheduler.matching.admission import AdmissionDecision, decide
from scheduler.matching.allox import AlloxScheduler, Matched
from scheduler.matching.visit_order import visiting_order
from tests.matching.test_matching_vacancy import live_state
from tests.matching.test_matching_walk_run import gpu_burst

allox = importlib.import_module("scheduler.matching.allox")


class StopAfter:
    """A stop that turns true at its ``calls``-th question (1: the first), counting them."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked >= self.calls


def starts(matched: Matched) -> list[tuple[str, str, float, float]]:
    return [(a.job.name, a.machine.name, a.start, a.finish) for a in matched.started]


def visited_starts(whole: Matched, arguments: dict[str, Any], undecided: int) -> list[tuple[str, str, float, float]]:
    """The whole walk's starts on the free machines a walk leaving ``undecided`` visited."""
    order = visiting_order(arguments["free_machines"], arguments["pending_jobs"])
    visited = {machine.name for machine in order[:len(order) - undecided]}
    return [start for start in starts(whole) if start[1] in visited]


@pytest.mark.parametrize("in_c", [True, False])
def test_a_stopped_walk_makes_the_whole_walks_first_starts(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    if not in_c:
        monkeypatch.setattr(allox, "runs", None)
    rng = random.Random(28001)
    stopped_somewhere = 0
    for _ in range(150):
        arguments = gpu_burst(rng)
        names = [machine.name for machine in arguments["free_machines"]]
        if len(set(names)) < len(names):
            continue  # a machine listed twice: which of its visits a start was is not told by name
        alpha = rng.choice([0.1, 0.1, 0.2, 1.0])
        scheduler = AlloxScheduler(alpha=alpha)
        whole = scheduler.matched(**arguments)
        assert whole.undecided == 0
        for calls in (1, 2, 3, 7, 20):
            stop = StopAfter(calls)
            part = scheduler.matched(**arguments, stop=stop)
            assert starts(part) == starts(whole)[:len(part.started)]  # the first ones, in order
            assert starts(part) == visited_starts(whole, arguments, part.undecided)
            assert (part.undecided > 0) == (stop.asked >= calls)
            if part.undecided:
                stopped_somewhere += 1
                assert part.started  # never stopped before a start: each pass cut short starts a Job
            if alpha == 1.0:
                assert part.undecided == 0  # one matching serves every machine: no walk to stop
    assert stopped_somewhere > 100


def test_a_stop_that_never_says_so_changes_nothing() -> None:
    rng = random.Random(28002)
    asked: list[int] = []

    def never() -> bool:
        asked.append(1)
        return False

    for _ in range(60):
        arguments = gpu_burst(rng)
        scheduler = AlloxScheduler(alpha=rng.choice([0.1, 0.3]))
        decided = scheduler.matched(**arguments, stop=never)
        assert starts(decided) == starts(scheduler.matched(**arguments)) and decided.undecided == 0
    assert len(asked) > 100  # it was asked, and changed nothing


def test_decide_stopped_starts_the_whole_decisions_first_jobs() -> None:
    rng = random.Random(28003)
    stopped_somewhere = 0
    for pools in (False, True):
        for _ in range(25):
            state = live_state(rng, pools=pools)
            for alpha in (0.1, 1.0):
                whole: AdmissionDecision = decide(**state, alpha=alpha)  # type: ignore[arg-type]
                assert whole.undecided_machines == 0
                for calls in (1, 2, 5):
                    part = decide(**state, alpha=alpha, stop=StopAfter(calls))  # type: ignore[arg-type]
                    assert part.starts == whole.starts[:len(part.starts)]
                    if part.undecided_machines:
                        stopped_somewhere += 1
                        assert alpha < 1.0
                        # Every Job not started waits: in the queue, or held as before.
                        left = {job.key for job in state["waiting"]} - {start.key for start in part.starts}  # type: ignore[attr-defined]
                        told = {queued.key for queued in part.queue} | set(part.unplaceable) | set(part.waiting_for_pool)
                        assert left == told
                    else:
                        assert part == whole
    assert stopped_somewhere > 10


def test_one_job_per_user_is_decided_in_bounded_steps() -> None:
    """The benchmark's burst with each Job its own user (the livelock's shape, 500 of them here):
    stopped after a few questions each, passes that decide again with the started Jobs running
    start every Job the whole decision does, each once. A later pass is a decision of its own
    (the started Jobs now running), not the rest of the stopped walk: here it starts one Job
    more than the whole decision (401 of 500, against 400)."""
    import dataclasses

    from scheduler.matching.admission import RunningJob
    from tests.benchmarks.bench_admission import CAPACITY, NOW, instance

    _, _, waiting, running, nodes = instance(500)
    waiting = [dataclasses.replace(job, user=f"u{index}") for index, job in enumerate(waiting)]
    running = [dataclasses.replace(job, user=f"u{index}") for index, job in enumerate(running)]
    state: dict[str, Any] = {"now": NOW, "free_nodes": nodes, "capacity": CAPACITY, "alpha": 0.1, "omega_grid_seconds": 0.0}
    whole = decide(waiting=waiting, running=running, **state)
    started: list[str] = []
    passes = 0
    while True:
        passes += 1
        left = [job for job in waiting if job.key not in started]
        part = decide(waiting=left, running=running, stop=StopAfter(5), **state)
        assert not {start.key for start in part.starts} & set(started)  # no Job started twice
        assert part.starts or not part.undecided_machines  # a pass cut short started a Job
        started += [start.key for start in part.starts]
        by_key = {job.key: job for job in waiting}
        running = [*running, *(RunningJob(key=start.key, user=by_key[start.key].user, kind=start.kind, started=NOW,
                                          seconds=by_key[start.key].seconds, demand=by_key[start.key].demand)
                               for start in part.starts)]
        if not part.undecided_machines:
            break
    assert passes > 2
    assert len(started) == len(set(started))
    assert {start.key for start in whole.starts} <= set(started)
