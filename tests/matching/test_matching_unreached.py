"""The vacancy bound's moves of machines that count for no row, skipped (``allox._SKIP_UNREACHED``,
``_Vacancy._reach_of``), leave ``N`` and the decisions as summing them does.

``N(j)`` counts a machine of kind ``other`` waiting ``d`` only where ``n·p_other(j) + d`` is below
``j``'s limit for some ``n >= 1``; a machine waiting at least every row's first reach (``limit -
step``) counts for none. After a burst each start moves a CPU slot (at a CPU slot's class) or a
GPU (at a GPU's), which counts for no row there. Here ``N`` is compared bit for bit with the sum
of every move on random times (whole numbers in half: waits exactly at a row's reach, the strict
comparison's edge; rows past 64 terms; times of 0 and kinds a row cannot run on), and the starts
on random bursts, live states through ``decide`` and the benchmark's burst, both ways.

Visited in ``visiting_order`` (each kind's free machines one after another) a class's ``N`` is
only brought up to date across starts on its own kind, whose moves no row counts (a machine of
the class's kind waiting at least the class's wait): there the skip cannot decide otherwise than
the sum, whatever its reach. It decides something only across starts on another kind, between
two visits of the class: bursts visited with their kinds interleaved (``matched``'s
``machines``) have them, and are compared both ways too. A start moves a free machine (wait 0),
so another kind's moves are skipped where no job is faster on that kind than on the class's
(the reach is at most 0) and summed otherwise: bursts of jobs all faster on a GPU have both,
bursts where each kind is some job's faster by less than its time have only the second, where
a reach off by a step or a skip of partly unreached moves would skip.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from scheduler.matching import allox
from scheduler.matching.admission import decide
from scheduler.matching.allox import _Vacancy
from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import FloatArray, fleet, prepare_on
from tests.matching.native_paths import Ways, live_states_decide_alike, random_bursts_start_alike, switched_both_ways, varied_bursts_start_alike
from tests.matching.test_matching_walk_run import benchmark_state


def both_ways(monkeypatch: pytest.MonkeyPatch) -> Ways:
    """A call made with unreached moves skipped, then with every move summed."""
    return lambda call: switched_both_ways(call, monkeypatch, allox, "_SKIP_UNREACHED")


def counted_sums(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times ``_Vacancy._needs`` summed a kind's moves (``summed``)."""
    seen: Counter[str] = Counter()
    needs = _Vacancy._needs

    def counted(self: _Vacancy, *arguments: Any) -> Any:
        seen["summed"] += 1
        return needs(self, *arguments)

    monkeypatch.setattr(_Vacancy, "_needs", counted)
    return seen


def counted_other_kinds(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Of the starts on another kind than a class's that ``_Vacancy._needed`` took in when
    bringing the class's ``N`` up to date with unreached moves skipped: how many times a kind's
    moves were asked their reach (``asked``) and how many times they were summed (``summed``);
    the rest were skipped."""
    seen: Counter[str] = Counter()
    updating: list[bool] = []
    needed, needs, reach_of = _Vacancy._needed, _Vacancy._needs, _Vacancy._reach_of

    def counted_needed(self: _Vacancy, kind: int, wait: float) -> Any:
        updating.append((kind, wait) in self._need)
        try:
            return needed(self, kind, wait)
        finally:
            updating.pop()

    def counted_needs(self: _Vacancy, kind: int, wait: float, other: int, *arguments: Any) -> Any:
        seen["summed"] += allox._SKIP_UNREACHED and updating[-1] and other != kind
        return needs(self, kind, wait, other, *arguments)

    def counted_reach(self: _Vacancy, kind: int, wait: float, other: int) -> Any:
        seen["asked"] += other != kind
        return reach_of(self, kind, wait, other)

    monkeypatch.setattr(_Vacancy, "_needed", counted_needed)
    monkeypatch.setattr(_Vacancy, "_needs", counted_needs)
    monkeypatch.setattr(_Vacancy, "_reach_of", counted_reach)
    return seen


def random_times(rng: random.Random, *, kinds: int, whole: bool, rows: int) -> FloatArray:
    """Random jobs' times on ``kinds`` kinds (whole numbers where ``whole``: waits that tie with
    limits; a tenth of them a kind the job cannot run on; now and then a row past 64 terms)."""
    times = np.array([[float(rng.randint(0, 6)) if whole else rng.uniform(0.01, 50) for _ in range(kinds)] for _ in range(rows)])
    times[np.array([[rng.random() < 0.1 for _ in range(kinds)] for _ in range(times.shape[0])])] = np.inf
    if rng.random() < 0.2:
        times[rng.randrange(times.shape[0]), rng.randrange(kinds)] = 1e-3  # a row past 64 terms
    return times


def random_machines_and_times(rng: random.Random) -> tuple[_Vacancy, _Vacancy, np.ndarray, int]:
    """Two vacancy bounds over the same random jobs and machines (each its own waits), the
    machines' waits and the kinds' count."""
    kinds = rng.randint(1, 3)
    whole = rng.random() < 0.5
    times = random_times(rng, kinds=kinds, whole=whole, rows=rng.randint(1, 40))
    listed = [f"k{index % kinds}" for index in range(kinds + rng.randint(0, 12))]
    machines = [Machine(name=f"m{index}", kind=kind) for index, kind in enumerate(listed)]
    jobs = [Job(name=f"j{row}", user="u", arrival=0.0, processing_time={f"k{kind}": float(times[row, kind]) for kind in range(kinds)
                                                                        if np.isfinite(times[row, kind])} or {"k0": 1.0})
            for row in range(times.shape[0])]
    every_job = prepare_on(fleet(machines=machines, now=0.0), jobs)
    delay = np.array([float(rng.choice([0, 0, rng.randint(0, 20)])) if whole else rng.choice([0.0, rng.uniform(0, 100)]) for _ in listed])
    live = np.ones(times.shape[0], dtype=np.int64)
    return _Vacancy(every_job, delay, live=live), _Vacancy(every_job, delay, live=live), delay, kinds


@pytest.mark.parametrize("in_c", [True, False])
def test_the_need_with_unreached_moves_skipped_is_the_need_summed_over_every_move(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    monkeypatch.setattr(allox, "native", allox.native if in_c else None)
    rng = random.Random(28101 + in_c)
    skipped = summed = 0
    for _ in range(400):
        skipping, summing, delay, kinds = random_machines_and_times(rng)
        machine_kind = skipping._machine_kind
        classes = sorted({(int(kind), float(wait)) for kind, wait in zip(machine_kind.tolist(), delay.tolist())})
        for _ in range(rng.randint(1, 6)):
            for _ in range(rng.randint(1, 4)):  # starts: a machine waits longer, or (rarely) frees
                position = rng.randrange(delay.shape[0])
                old = float(delay[position])
                if rng.random() < 0.4:
                    # To a row's first reach on the class's kind exactly, or just above or below it.
                    kind, wait = rng.choice(classes)
                    other, row = int(machine_kind[position]), rng.randrange(skipping._times.shape[0])
                    own, step = float(skipping._times[row, kind]), float(skipping._times[row, other])
                    edge = own + (wait - skipping.tolerance) - step
                    new = edge if not np.isfinite(edge) or edge < 0 else float(np.nextafter(edge, rng.choice([-np.inf, np.inf, edge])))
                    new = new if np.isfinite(new) and new >= 0 else old + 1.0
                else:
                    new = old + float(rng.randint(0, 30)) if rng.random() < 0.9 else 0.0
                skipping.moved(position, old, new)
                summing.moved(position, old, new)
                delay[position] = new
            kind, wait = rng.choice(classes)
            with monkeypatch.context() as patched:
                patched.setattr(allox, "_SKIP_UNREACHED", True)
                seen = counted_sums(patched)
                told = skipping._needed(kind, wait)
                skipped += seen["summed"]
            with monkeypatch.context() as patched:
                patched.setattr(allox, "_SKIP_UNREACHED", False)
                seen = counted_sums(patched)
                every = summing._needed(kind, wait)
                summed += seen["summed"]
            assert told.tobytes() == every.tobytes()
    assert summed - skipped > 150 and skipped > 1000  # sums skipped, and sums made, both compared


@pytest.mark.parametrize("in_c", [True, False])
def test_random_bursts_start_the_same_with_unreached_moves_skipped(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    random_bursts_start_alike(random.Random(28102), both_ways(monkeypatch), gpu_bursts=120, bursts=120)


@pytest.mark.parametrize("in_c", [True, False])
def test_interleaved_bursts_start_the_same_with_unreached_moves_skipped(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    """Starts on CPU slots between two visits of GPUs move machines that no job counts at a
    GPU's class (every job is slower on a CPU slot): skipped; starts on GPUs between two visits
    of CPU slots move free GPUs, which the CPU slots' ``N`` counts: summed. Both came, and the
    starts are those of summing every move."""
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    seen = counted_other_kinds(monkeypatch)
    varied_bursts_start_alike(random.Random(28104), both_ways(monkeypatch), bursts=200, interleaved=True, no_time=0.0)
    skipped = seen["asked"] - seen["summed"]
    assert skipped > 300 and seen["summed"] > 500, seen


@pytest.mark.parametrize("in_c", [True, False])
def test_interleaved_bursts_of_close_times_start_the_same_with_unreached_moves_skipped(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    """Each job's kinds within twice each other's time, either the faster: each kind is some
    job's faster by less than its time, so the reach of each other kind is above a free
    machine's wait and below most started jobs' ends (or their second step), and every move of
    another kind must be summed, which a reach a step short, or a skip of moves only some of
    which are unreached, would not."""
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    seen = counted_other_kinds(monkeypatch)
    varied_bursts_start_alike(random.Random(28105), both_ways(monkeypatch), bursts=250, interleaved=True, no_time=0.0, close_times=True)
    assert seen["summed"] == seen["asked"] > 1000, seen


def test_admission_decides_the_same_with_unreached_moves_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    live_states_decide_alike(random.Random(28103), both_ways(monkeypatch), states=10, options=({"alpha": 0.1}, {"alpha": 0.3}, {"alpha": 1.0}))


def test_the_bursts_vacancy_bound_sums_few_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's burst at α = 0.1 (455 starts): the same decision, and of the ~100 times
    the bound takes starts in, only a few sum a kind's moves (the first after the run of GPU
    starts, at the first CPU slots), where every one did before."""
    from tests.benchmarks.bench_admission import BURST_BUSY

    arguments = benchmark_state(BURST_BUSY)
    with monkeypatch.context() as patched:
        patched.setattr(allox, "_SKIP_UNREACHED", False)
        seen = counted_sums(patched)
        summing = decide(**arguments, alpha=0.1)
        every = seen["summed"]
    seen = counted_sums(monkeypatch)
    skipping = decide(**arguments, alpha=0.1)
    assert skipping == summing and len(skipping.starts) == 455
    assert every > 80 and seen["summed"] * 10 < every
