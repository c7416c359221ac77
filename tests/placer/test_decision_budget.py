"""``allox.decisionBudgetSeconds``: a decision whose Algorithm 2 walk outlives its budget stops
after the visit it is on; the controller carries out the starts made (the unbounded
decision's first ones), and the next pass, run at once rather than after the debounce or the
resync, decides the machines left. Without it, 1,000 waiting Jobs of 1,000 users at the chart's
alpha 0.1 took ~6 s a decision, 2,000 over 300 s: past allox.solverTimeoutSeconds the solver
process was killed at every pass, and no interchangeable Job ever started.

The budget's clock is a fake one here (one second a question), so where a walk stops does not
depend on the machine's speed; runs of visits in C are turned off so that each visit asks."""

from __future__ import annotations

import importlib
import json
import logging
import threading
from dataclasses import replace
from typing import Any

import pytest

from placer.controller import PlacerController
from scheduler.config import AlloxSettings, parse_settings
from scheduler.core.resources import Resources
from scheduler.errors import ConfigError, KubernetesApiError
from scheduler.matching.admission import AdmissionDecision, decide_starts
from placer.solver_wire import ChildInputs, DecideAnswer, SolverSession, decide_encoded
from tests.placer.test_controller import Jobs, RecordingApi, job

allox = importlib.import_module("scheduler.matching.allox")
NODE = Resources(cpu_millis=40_000, memory_bytes=256 * 2**30, gpus=4)
NODES = {f"n{index}": NODE for index in range(3)}
CAPACITY = Resources(cpu_millis=120_000, memory_bytes=768 * 2**30, gpus=12)


class Ticking:
    """A monotonic clock one second on at each reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def many_users() -> list[Any]:
    """40 users with a Job or two each (estimates of several shapes), more Jobs than machines."""
    jobs = []
    for index in range(60):
        gpu = 10.0 + (index * 7) % 50
        jobs.append(job(f"j{index:02d}", namespace=f"u{index % 40:02d}", gpu=gpu, cpu=gpu * (2 + index % 5), created=index % 60))
    return jobs


def placer_of(settings: AlloxSettings, watch: Jobs, api: RecordingApi, **options: Any) -> PlacerController:
    return PlacerController(api=api, jobs=watch, settings=settings, gpu_resource="nvidia.com/gpu",
                            free_by_node=lambda running: NODES, capacity=lambda: CAPACITY, clock=lambda: 1767225700.0, **options)


def settings_of(text: str) -> AlloxSettings:
    return parse_settings(f"allox: {{alpha: 0.1, mechanism: template, {text}}}\n").allox


def started(api: RecordingApi) -> list[tuple[str, str]]:
    kinds = []
    for name, operations in api.patches:
        kind = next(op["value"] for op in operations if op["path"] == "/metadata/annotations/cellfit.io~1placement")
        kinds.append((name, kind))
    return kinds


def passes_until_settled(placer: PlacerController, *, most: int = 60) -> list[AdmissionDecision]:
    """Passes until one decides every machine (not cut short) and starts nothing."""
    decisions = [placer.admit()]
    while decisions[-1].undecided_machines or decisions[-1].starts:
        assert len(decisions) < most
        decisions.append(placer.admit())
    return decisions


@pytest.fixture(autouse=True)
def every_visit_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allox, "runs", None)


def test_passes_cut_short_start_the_unbounded_decisions_first_jobs_then_the_rest_each_once(caplog: pytest.LogCaptureFixture) -> None:
    whole_api = RecordingApi()
    unbounded = placer_of(settings_of("solverProcess: false"), Jobs(many_users()), whole_api)
    whole = unbounded.admit()
    assert whole.undecided_machines == 0 and len(whole.starts) > 6
    api = RecordingApi()
    placer = placer_of(settings_of("solverProcess: false, decisionBudgetSeconds: 2.5"), Jobs(many_users()), api, monotonic=Ticking())
    with caplog.at_level(logging.INFO, logger="placer.controller"):
        decisions = passes_until_settled(placer)
    first = decisions[0]
    assert first.undecided_machines > 0
    assert 0 < len(first.starts) < len(whole.starts)
    assert first.starts == whole.starts[:len(first.starts)]  # the unbounded decision's first starts
    assert started(api)[:len(first.starts)] == started(whole_api)[:len(first.starts)]  # carried out so
    cut_short = [decision for decision in decisions if decision.undecided_machines]
    assert len(cut_short) > 2 and all(decision.starts for decision in cut_short)  # each started a Job
    names = [name for name, _ in started(api)]
    assert len(names) == len(set(names))  # no Job started twice
    # The passes end where a whole decision starts nothing more, as many Jobs started as an
    # unbounded controller's passes start (a later pass decides the state as it then is, the
    # Jobs started running, not the rest of the stopped walk: which Jobs, a few apart).
    whole_passes = passes_until_settled(unbounded)
    assert len(names) >= len(whole_api.patches) - 1 and len(whole_passes) > 1
    # Said: a log line per pass cut short, and the inspect output.
    said = [record for record in caplog.records if "stopped at its budget" in record.getMessage()]
    assert len(said) == len(cut_short)
    inspected = placer.inspect()
    assert inspected["decisionsCutShort"] == len(cut_short)
    assert inspected["lastDecision"]["undecidedMachines"] == 0 and inspected["lastDecision"]["budgetSeconds"] == 2.5


def test_the_inspect_output_says_a_pass_was_cut_short() -> None:
    placer = placer_of(settings_of("solverProcess: false, decisionBudgetSeconds: 2.5"), Jobs(many_users()), RecordingApi(),
                       monotonic=Ticking())
    decision = placer.admit()
    last = placer.inspect()["lastDecision"]
    assert last["undecidedMachines"] == decision.undecided_machines > 0
    assert json.loads(json.dumps(last)) == last


def test_a_pass_cut_short_is_followed_at_once_not_after_the_resync() -> None:
    # The debounce and the resync an hour: only a pass run at once starts the Jobs the first
    # pass left machines for. Waited for by predicate; a bound only stops a broken test.
    api = RecordingApi()
    settings = settings_of("solverProcess: false, decisionBudgetSeconds: 2.5, resyncSeconds: 3600, debounceSeconds: 0")
    unbounded = placer_of(settings_of("solverProcess: false"), Jobs(many_users()), RecordingApi()).admit()
    placer = placer_of(settings, Jobs(many_users()), api, monotonic=Ticking())
    done = threading.Event()
    original = placer.admit

    def admit() -> AdmissionDecision:
        decision = original()
        if not decision.undecided_machines:
            done.set()
        return decision

    placer.admit = admit  # type: ignore[method-assign]
    placer._wake.set()  # a change: the first pass
    placer.start()
    try:
        assert done.wait(timeout=120), f"{len(api.patches)} Jobs started, {len(unbounded.starts)} expected"
    finally:
        placer.stop()
    assert len(api.patches) > len(unbounded.starts) // 2  # more than the first pass's few
    names = [name for name, _ in api.patches]
    assert len(names) == len(set(names))


def latest(api: RecordingApi) -> dict[str, dict[str, Any]]:
    """Each Job's Placed condition as last written."""
    return {name: condition for name, condition in api.conditions}


def test_a_run_of_passes_cut_short_tells_the_queue_at_its_end_not_at_each_pass() -> None:
    # review28b: each pass cut short planned the queue with the machines it left counted idle
    # now (29 Jobs told "1st on cpu, expected to start any moment", 3 of them started by the
    # next pass), and each pass of the run moved the places: 209 Queued conditions and 64
    # Queued Events written, against 28 and 28 by an unbounded controller's passes.
    whole_api = RecordingApi()
    passes_until_settled(placer_of(settings_of("solverProcess: false"), Jobs(many_users()), whole_api))
    api, observed = RecordingApi(), list[AdmissionDecision]()
    placer = placer_of(settings_of("solverProcess: false, decisionBudgetSeconds: 2.5"), Jobs(many_users()), api, monotonic=Ticking(),
                       on_decision=lambda seconds, decision: observed.append(decision))
    decisions, written = [placer.admit()], [list(api.conditions)]
    while decisions[-1].undecided_machines or decisions[-1].starts:
        assert len(decisions) < 60
        before = len(api.conditions)
        decisions.append(placer.admit())
        written.append(api.conditions[before:])
    cut_short = [index for index, decision in enumerate(decisions) if decision.undecided_machines]
    assert len(cut_short) > 2 and cut_short == list(range(len(cut_short)))  # a run, each followed at once
    for index in cut_short:
        # No queue planned nor told (none was before it): each start told, no Job queued.
        assert decisions[index].queue == observed[index].queue == ()
        assert sorted(name for name, condition in written[index] if condition["reason"] == "Started") == \
            sorted(start.key.split("/")[1] for start in decisions[index].starts)
        assert all(condition["reason"] != "Queued" for _, condition in written[index])
    # The run's end tells every Job left its place, as an unbounded controller's passes do.
    last, told = decisions[-1], latest(api)
    assert last.queue and all(told[queued.key.split("/")[1]]["reason"] == "Queued" for queued in last.queue)
    assert sum(len(rows) for rows in placer.inspect()["queue"].values()) == len(last.queue)
    queued_written = sum(1 for _, condition in api.conditions if condition["reason"] == "Queued")
    queued_events = sum(1 for _, reason, _ in api.events if reason == "Queued")
    whole_written = sum(1 for _, condition in whole_api.conditions if condition["reason"] == "Queued")
    whole_events = sum(1 for _, reason, _ in whole_api.events if reason == "Queued")
    assert queued_written <= whole_written and queued_events <= whole_events


class Switched:
    """A monotonic clock that stands still (no decision is cut short) until ``ticking``."""

    def __init__(self) -> None:
        self.now, self.ticking = 0.0, False

    def __call__(self) -> float:
        self.now += self.ticking
        return self.now


def test_a_pass_followed_at_once_leaves_the_queue_as_told() -> None:
    # One node free: a whole decision tells the queue. Then the other two free up: the passes
    # cut short that start Jobs on them leave the conditions, the inspect output's queue and
    # what the queue gauge counts as that queue told them, less the Jobs started since.
    free, wall, budget = {"n0": NODE}, [1767225700.0], Switched()
    api, observed = RecordingApi(), list[AdmissionDecision]()
    placer = PlacerController(api=api, jobs=Jobs(many_users()), settings=settings_of("solverProcess: false, decisionBudgetSeconds: 2.5"),
                              gpu_resource="nvidia.com/gpu", free_by_node=lambda running: dict(free), capacity=lambda: CAPACITY,
                              clock=lambda: wall[0], monotonic=budget, on_decision=lambda seconds, decision: observed.append(decision))
    told = placer.admit()
    assert not told.undecided_machines and len(told.queue) > 20
    rows = [row for kind in sorted(placer.inspect()["queue"]) for row in placer.inspect()["queue"][kind]]
    free.update(NODES)
    budget.ticking = True
    wall[0] += 10.0
    started = set[str]()
    for _ in range(3):
        before = len(api.conditions)
        decision = placer.admit()
        assert decision.undecided_machines and decision.starts
        assert all(condition["reason"] == "Started" for _, condition in api.conditions[before:])
        started |= {start.key for start in decision.starts}
        assert observed[-1] is decision
        assert decision.queue == tuple(replace(queued, expected_start_seconds=max(queued.expected_start_seconds - 10.0, 0.0))
                                       for queued in told.queue if queued.key not in started)
        inspected = placer.inspect()
        assert inspected["lastDecision"]["queuePlannedAt"] == 1767225700.0 and inspected["lastDecision"]["at"] == wall[0]
        assert [row for kind in sorted(inspected["queue"]) for row in inspected["queue"][kind]] == \
            [{**row, "expectedStartSeconds": round(max(row["expectedStartSeconds"] - 10.0, 0.0), 1)} for row in rows if row["job"] not in started]
    # The run's end tells the queue as it then is.
    decisions = passes_until_settled(placer)
    assert placer.inspect()["lastDecision"]["queuePlannedAt"] == wall[0]
    last, conditions = decisions[-1], latest(api)
    assert all(conditions[queued.key.split("/")[1]]["reason"] == "Queued" for queued in last.queue)


class Failing(RecordingApi):
    """An API server whose every Job patch fails as ``error`` says (conditions and Events go through)."""

    def __init__(self, error: KubernetesApiError) -> None:
        super().__init__()
        self.error, self.tries = error, 0

    def patch_job(self, **_: Any) -> None:
        self.tries += 1
        raise self.error


class Turns:
    """The loop's wake event, each wait for a change (or the resync) said in ``said`` beside the
    passes: the loop ends at its ``waits``-th wait, or after ``most`` passes (a broken test)."""

    def __init__(self, placer: PlacerController, *, waits: int = 2, most: int = 8) -> None:
        self.placer, self.waits, self.most, self.said = placer, waits, most, list[str]()
        original = placer.admit

        def admit() -> AdmissionDecision:
            decision = original()
            self.said.append("pass cut short" if decision.undecided_machines else "pass")
            if self.said.count("pass") + self.said.count("pass cut short") >= most:
                placer._stop.set()
            return decision

        placer.admit = admit  # type: ignore[method-assign]

    def wait(self, timeout: float | None = None) -> bool:
        self.said.append("wait")
        if self.said.count("wait") >= self.waits:
            self.placer._stop.set()
        return True

    def set(self) -> None:
        pass

    def clear(self) -> None:
        pass

    def is_set(self) -> bool:
        return True


def looped(placer: PlacerController, **options: Any) -> list[str]:
    """The controller's loop, run here (no thread, no clock): its waits and passes in order."""
    turns = Turns(placer, **options)
    placer._wake = turns  # type: ignore[assignment]
    placer._run()
    return turns.said


LOOPED = "solverProcess: false, decisionBudgetSeconds: 2.5, resyncSeconds: 3600, debounceSeconds: 0"


@pytest.mark.parametrize("error", [
    KubernetesApiError('Internal error occurred: failed calling webhook "x": connection refused', status=500),
    KubernetesApiError("the server has received too many requests", status=429),
    KubernetesApiError('jobs.batch "j" is forbidden: User "system:serviceaccount:cellfit:cellfit" cannot patch', status=403),
])
def test_a_pass_cut_short_whose_starts_all_failed_waits_as_any_pass(error: KubernetesApiError) -> None:
    # review28b: with every Job patch failing, each pass made the same walk, was cut short with
    # no start carried out and ran the next at once: 51 passes in 5 s, each its whole budget.
    api = Failing(error)
    placer = placer_of(settings_of(LOOPED), Jobs(many_users()), api, monotonic=Ticking())
    assert looped(placer) == ["wait", "pass cut short", "wait"]
    assert api.tries >= 1 and not api.patches
    assert placer.inspect()["decisionsCutShort"] == 1


def test_passes_cut_short_that_start_jobs_are_followed_at_once_until_one_is_not_cut_short() -> None:
    placer = placer_of(settings_of(LOOPED), Jobs(many_users()), RecordingApi(), monotonic=Ticking())
    said = looped(placer, most=60)
    assert said[0] == "wait" and said[-1] == "wait" and said.count("wait") == 2
    passes = said[1:-1]
    assert len(passes) > 2 and set(passes[:-1]) == {"pass cut short"} and passes[-1] == "pass"


def test_a_pass_cut_short_that_refused_its_starts_is_followed_at_once() -> None:
    # A Job refused in a kind is not chosen there again: the next walk differs, and each such
    # pass refuses one more, so they end.
    api = Failing(KubernetesApiError('admission webhook "x" denied the request: no', status=403))
    placer = placer_of(settings_of(LOOPED), Jobs(many_users()), api, monotonic=Ticking())
    said = looped(placer, most=200)
    assert said[:3] == ["wait", "pass cut short", "pass cut short"] and said[-1] == "wait"
    assert not api.patches and any(c.get("reason") == "Refused" for _, c in api.conditions)


def test_the_solver_process_stops_at_the_budget_it_is_sent() -> None:
    # decide_encoded in this process, as the child runs it: a budget spent before the walk's
    # first question stops it there (after its first start), and no budget decides every machine.
    from scheduler.matching.admission import RunningJob, WaitingJob

    waiting = [WaitingJob(key=f"u{index}/j", user=f"u{index}", arrival=0.0, seconds={"gpu": 10.0 + index, "cpu": 40.0 + 3 * index})
               for index in range(40)]
    from scheduler.matching.capacity import NodeResources
    from scheduler.matching.fairness import Capacity

    inputs: dict[str, Any] = {"now": 100.0, "waiting": waiting, "running": list[RunningJob](), "capacity": Capacity(cpu=120.0, gpu=12.0, memory=768.0),
              "free_nodes": [NodeResources(name=f"n{index}", cpu=40.0, gpu=4, memory=256.0) for index in range(3)],
              "alpha": 0.1, "policy": "allox", "reserved_cpu_per_gpu": 1.0}
    whole, _ = decide_starts(**inputs)

    def answered(budget: float | None) -> AdmissionDecision:
        import msgspec

        payload = decide_encoded(SolverSession().request(inputs, budget_seconds=budget), ChildInputs())
        decision = msgspec.msgpack.decode(payload, type=DecideAnswer).decision
        assert decision is not None
        return decision

    spent = answered(0.0)
    assert spent.undecided_machines > 0 and spent.starts == whole.starts[:1]
    assert answered(None) == whole and answered(3600.0) == whole


def test_a_real_solver_process_honours_the_budget() -> None:
    # Through the child (allox.solverProcess), runs of visits in C included: a budget of a
    # nanosecond stops its walk at the first question after its first start.
    api = RecordingApi()
    placer = placer_of(settings_of("solverProcess: true, decisionBudgetSeconds: 0.000000001"), Jobs(many_users()), api)
    try:
        first = placer.admit()
        assert first.undecided_machines > 0 and len(first.starts) >= 1
        assert placer.inspect()["decisionsCutShort"] == 1
    finally:
        placer.stop()


@pytest.mark.parametrize("text", ["decisionBudgetSeconds: 60", "decisionBudgetSeconds: 31", "solverTimeoutSeconds: 10, decisionBudgetSeconds: 6"])
def test_a_budget_past_half_the_solver_timeout_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ConfigError, match="decisionBudgetSeconds .* at most half of solverTimeoutSeconds"):
        parse_settings(f"allox: {{{text}}}\n")


def test_the_budgets_defaults() -> None:
    assert AlloxSettings().decision_budget == 10.0  # the child: it only delays starts
    assert AlloxSettings(solver_process=False).decision_budget == 1.0  # in process: it holds the verbs' interpreter
    assert AlloxSettings(solver_timeout_seconds=8).decision_budget == 2.0  # a quarter of a short timeout
    assert settings_of("decisionBudgetSeconds: 30").decision_budget == 30.0
    # In process the budget is not bound by the child's timeout.
    assert settings_of("solverProcess: false, decisionBudgetSeconds: 120").decision_budget == 120.0
    for bad in ("0", "-1", ".nan", "true"):
        with pytest.raises(ConfigError, match="decisionBudgetSeconds"):
            parse_settings(f"allox: {{decisionBudgetSeconds: {bad}}}\n")
