"""Running the same call two ways and comparing: on the matching's C extensions and on NumPy
alone, for the tests that compare them (test_matching_native_*.py: a module's ``native`` is the
extension it uses, None for NumPy); and with one of the matching's switches on and off, for the
tests of the paths they switch to (test_matching_here.py, _unreached, _walk_progress,
_alone_told), on the same random instances (random_bursts_start_alike, live_states_decide_alike)
and on bursts drawn to reach a switch's situation (varied_bursts_start_alike)."""

from __future__ import annotations

import operator
import random
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence, TypeVar

import pytest

from scheduler.matching.admission import decide
from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import fleet
from scheduler.matching.visit_order import visiting_order
from tests.matching.test_matching_carry_empty import burst
from tests.matching.test_matching_vacancy import live_state

T = TypeVar("T")


def both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch, *modules: ModuleType, attribute: str = "native") -> tuple[Any, Any]:
    """``call()`` with ``modules``' extensions in use, then with none of them (``attribute``:
    the name a module reads its extension by, for one step, e.g. allox's ``walk``)."""
    return _each_way(call, monkeypatch, [(module, attribute) for module in modules], first=lambda module: module._built,
                     then=lambda _: None)


def switched_both_ways(call: Callable[[], T], monkeypatch: pytest.MonkeyPatch, module: ModuleType, switch: str) -> tuple[T, T]:
    """``call()`` with ``module``'s ``switch`` on (the path it switches to), then off (the path
    it replaces)."""
    return _each_way(call, monkeypatch, [(module, switch)], first=lambda _: True, then=lambda _: False)


def _each_way(call: Callable[[], T], monkeypatch: pytest.MonkeyPatch, names: Sequence[tuple[ModuleType, str]], *,
              first: Callable[[ModuleType], object], then: Callable[[ModuleType], object]) -> tuple[T, T]:
    answers = []
    for value in (first, then):
        with monkeypatch.context() as patched:
            for module, name in names:
                patched.setattr(module, name, value(module))
            answers.append(call())
    return answers[0], answers[1]


Ways = Callable[[Callable[[], Any]], tuple[Any, Any]]


def random_bursts_start_alike(rng: random.Random, ways: Ways, *, gpu_bursts: int, bursts: int) -> None:
    """The starts (job, machine, start, finish, in order) ``ways`` makes each way are the same on
    ``gpu_bursts`` random GPU bursts (α 0.05-1, raised when idle in most), then on ``bursts``
    random bursts (α 0.1-0.3, ties in half)."""
    # Here, not at the top: test_matching_walk_run skips its importer where the walk's C
    # extension is not built, which the native tests of the other extensions must not be.
    from tests.matching.test_matching_walk_run import gpu_burst, starts

    for _ in range(gpu_bursts):
        arguments = gpu_burst(rng)
        scheduler = AlloxScheduler(alpha=rng.choice([0.05, 0.1, 0.2, 0.3, 1.0]), raise_alpha_when_idle=rng.random() < 0.8)
        one, other = ways(lambda: starts(scheduler.on_machine_free(**arguments)))  # noqa: B023
        assert one == other
    for _ in range(bursts):
        arguments, alpha = burst(rng)
        one, other = ways(lambda: starts(AlloxScheduler(alpha=alpha).on_machine_free(**arguments)))  # noqa: B023
        assert one == other


def varied_bursts_start_alike(rng: random.Random, ways: Ways, *, bursts: int, interleaved: bool, no_time: float,
                              free_of_a_kind: int | None = None, close_times: bool = False) -> None:
    """The starts ``ways`` makes each way are the same on ``bursts`` random bursts (α 0.1-0.3,
    ties in half), where ``interleaved``: the free machines visited in a random order of kinds
    (``matched``'s ``machines``), so that starts on one kind come between two visits of another,
    which ``visiting_order`` (each kind's machines one after another) never has; and where a
    fraction ``no_time`` of the jobs takes no time on one of its kinds (a job started there
    leaves its machine free, with the machines of its kind that wait as it does); at most
    ``free_of_a_kind`` free machines of each kind (the others left out); where ``close_times``,
    each job's kinds take within twice each other's time, either the faster (so that a start's
    new wait is often past every job's margin between two kinds, and a free machine's not)."""
    from tests.matching.test_matching_walk_run import starts

    for _ in range(bursts):
        arguments, alpha = burst(rng)
        jobs: list[Job] = arguments["pending_jobs"]
        for at, job in enumerate(jobs):
            if close_times:
                fastest = min(job.processing_time.values())
                faster = rng.choice(sorted(job.processing_time))
                times = {kind: fastest if kind == faster else fastest * (rng.choice([1.0, 2.0]) if fastest.is_integer() else rng.uniform(1.0, 1.9))
                         for kind in job.processing_time}
                job = jobs[at] = Job(name=job.name, user=job.user, arrival=job.arrival, processing_time=times)
            if rng.random() < no_time:
                jobs[at] = Job(name=job.name, user=job.user, arrival=job.arrival,
                               processing_time={**job.processing_time, rng.choice(sorted(job.processing_time)): 0.0})
        free: list[Machine] = arguments["free_machines"]
        if free_of_a_kind is not None:
            free = [machine for at, machine in enumerate(free)
                    if sum(other.kind == machine.kind for other in free[:at]) < free_of_a_kind]
        busy: dict[Machine, float] = arguments["busy_until"]
        if interleaved:
            by_kind = {kind: [machine for machine in free if machine.kind == kind] for kind in sorted({machine.kind for machine in free})}
            free = []
            while any(by_kind.values()):
                free.append(by_kind[rng.choice([kind for kind, left in by_kind.items() if left])].pop(0))
        else:
            free = visiting_order(free, jobs)
        names = {machine.name for machine in free}
        machines = fleet(machines=[*free, *(machine for machine in busy if machine.name not in names)], now=0.0,
                         busy_until={machine.name: until for machine, until in busy.items()})
        one, other = ways(lambda: starts(AlloxScheduler(alpha=alpha).matched(  # noqa: B023
            now=0.0, free_machines=free, pending_jobs=jobs, busy_until=busy, machines=machines).started))  # noqa: B023
        assert one == other


def live_states_decide_alike(rng: random.Random, ways: Ways, *, states: int, options: Sequence[Mapping[str, Any]],
                             alike: Callable[[Any, Any], bool] = operator.eq) -> None:
    """Admission's decisions ``ways`` makes each way are ``alike`` (equal by default) on
    ``states`` random live states without pools, then as many with, each under every one of
    ``options`` (decide's α, policy)."""
    for pools in (False, True):
        for _ in range(states):
            state = live_state(rng, pools=pools)
            for chosen in options:
                one, other = ways(lambda: decide(**state, **chosen))  # type: ignore[arg-type]  # noqa: B023
                assert alike(one, other)


def assert_decisions_alike(rng: random.Random, monkeypatch: pytest.MonkeyPatch, *modules: ModuleType, attribute: str = "native") -> None:
    """Algorithm 2's starts on random bursts (α 0.1-0.3, ties in half), then admission's
    decisions on live states with and without pools (α 1 and 0.1, AlloX+), the same both ways."""
    for _ in range(40):
        arguments, alpha = burst(rng)
        in_c, in_numpy = both_ways(lambda: AlloxScheduler(alpha=alpha).on_machine_free(**arguments), monkeypatch, *modules, attribute=attribute)
        assert [(a.job.name, a.machine.name, a.start) for a in in_c] == [(a.job.name, a.machine.name, a.start) for a in in_numpy]
    live_states_decide_alike(rng, lambda call: both_ways(call, monkeypatch, *modules, attribute=attribute), states=8,
                             options=({"alpha": 1.0}, {"alpha": 0.1}, {"policy": "allox+", "alpha": 0.1}))
