"""decide()'s inputs and decision through the solver process's msgpack: the child decides on
equal values, and the decision that comes back, with the queue asked for after it, equals the
one made in process; Jobs the child holds from the last pass go as their keys, a child that
holds other Jobs asks for all, and one that holds no plan of the pass asked for says so."""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import pytest

import msgspec

from placer.solver_wire import ChildInputs, DecideInputs, SolverSession, decide_encoded, queue_encoded
from scheduler.matching.admission import RunningJob, WaitingJob, decide
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand


def random_inputs(rng: random.Random) -> dict[str, Any]:
    seed = rng.randrange(1000)
    now = 1_800_000_000.0
    demand = {"cpu": Demand(cpu=8, memory=16), "gpu": Demand(gpu=1, cpu=1, memory=8)}
    pools = {"vision": rng.randint(0, 3), "nlp": rng.randint(0, 3)} if seed % 2 else None
    waiting = [WaitingJob(key=f"ns/w{j}", user=f"u{j % 3}", arrival=now - rng.uniform(0, 600),
                          seconds={"cpu": rng.uniform(600, 6000), "gpu": rng.uniform(60, 600)}, demand=demand,
                          pods=rng.choice([1, 1, 1, 2]), pool=rng.choice([None, "vision", "nlp"]) if pools else None)
               for j in range(rng.randint(0, 30))]
    running = [RunningJob(key=f"ns/r{j}", user=f"u{j % 3}", kind=rng.choice(["cpu", "gpu"]), started=now - rng.uniform(0, 600),
                          seconds={"cpu": rng.uniform(600, 6000), "gpu": rng.uniform(60, 600)}, demand=demand)
               for j in range(rng.randint(0, 6))]
    inputs = {"now": now, "waiting": waiting, "running": running,
              "free_nodes": [NodeResources(name=f"n{i}", cpu=37.0, gpu=4, memory=512.0) for i in range(2)],
              "capacity": Capacity(cpu=74, gpu=8, memory=1024), "alpha": rng.choice([0.3, 1.0]),
              "policy": rng.choice(["allox", "allox+"]), "reserved_cpu_per_gpu": 1.0, "allox_plus_timeout": math.inf,
              "omega_grid_seconds": rng.choice([0.0, 60.0]), "gpu_pools": pools}
    return inputs


def through_child(session: SolverSession, child: ChildInputs, inputs: dict[str, Any]) -> Any:
    """The parent's request, the child's answer (asked again in full if the child says so), then
    the queue of that pass asked for, as the controller does once the starts are carried out."""
    for _ in range(2):
        decision = session.answer(decide_encoded(session.request(inputs), child))
        if decision is not None:
            assert decision.queue == ()  # the queue comes apart
            queue = session.queue(queue_encoded(session.answered_pass, child))
            assert queue is not None
            return dataclasses.replace(decision, queue=queue)
    raise AssertionError("the child asked for everything twice")


def sent(session: SolverSession, inputs: dict[str, Any]) -> DecideInputs:
    """What a request would carry (it counts as a request sent)."""
    return msgspec.msgpack.decode(session.request(inputs), type=DecideInputs)


@pytest.mark.parametrize("seed", range(6))
def test_the_decision_through_msgpack_is_the_decision_in_process(seed: int) -> None:
    inputs = random_inputs(random.Random(seed))
    assert through_child(SolverSession(), ChildInputs(), inputs) == decide(**inputs)


@pytest.mark.parametrize("seed", range(6))
def test_jobs_the_child_holds_go_as_keys_and_it_decides_as_in_process_pass_after_pass(seed: int) -> None:
    rng = random.Random(100 + seed)
    session, child = SolverSession(), ChildInputs()
    inputs = random_inputs(rng)
    assert through_child(session, child, inputs) == decide(**inputs)
    for _ in range(6):
        # The controller's next pass: most Jobs the same objects, some changed, gone or new.
        waiting = [job if rng.random() < 0.8 else dataclasses.replace(job, arrival=job.arrival - 1.0) for job in inputs["waiting"] if rng.random() < 0.9]
        waiting += random_inputs(rng)["waiting"][: rng.randint(0, 3)]
        waiting = list({job.key: job for job in waiting}.values())
        inputs = {**inputs, "waiting": waiting, "now": inputs["now"] + 5.0}
        request = sent(SolverSession(), inputs)
        assert all(not isinstance(job, str) for job in request.waiting)  # a new session sends everything whole
        keyed = {job for job in sent(dataclasses.replace(session), inputs).waiting if isinstance(job, str)}
        held = session._held_waiting
        assert keyed == {job.key for job in waiting if held.get(job.key) is job}
        assert through_child(session, child, inputs) == decide(**inputs)


def test_a_child_that_holds_other_jobs_asks_for_all_and_a_failed_pass_is_not_named_again(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    session, child = SolverSession(), ChildInputs()
    inputs = random_inputs(rng)
    while not inputs["waiting"]:
        inputs = random_inputs(rng)
    through_child(session, child, inputs)
    assert isinstance(sent(dataclasses.replace(session), inputs).waiting[0], str)
    fresh = ChildInputs()  # the solver process died and another started
    assert msgspec.msgpack.decode(decide_encoded(session.request(inputs), fresh)).get("decision") is None
    assert through_child(session, fresh, inputs) == decide(**inputs)

    def failing(**_: Any) -> None:
        raise ValueError("a defect")

    with monkeypatch.context() as patched:
        patched.setattr("placer.solver_wire.decide_starts", failing)
        with pytest.raises(ValueError):
            decide_encoded(session.request(inputs), fresh)
    session.forget()  # the controller forgets what the child holds when a pass fails
    assert all(not isinstance(job, str) for job in sent(dataclasses.replace(session), inputs).waiting)
    # A request naming the pass before the failed one is answered "send everything" too.
    stale = SolverSession()
    through_child(stale, ChildInputs(), inputs)
    assert msgspec.msgpack.decode(decide_encoded(stale.request(inputs), fresh)).get("decision") is None


def test_a_child_answers_the_queue_only_of_the_pass_it_planned_last() -> None:
    rng = random.Random(11)
    inputs = random_inputs(rng)
    while not inputs["waiting"]:
        inputs = random_inputs(rng)
    session, child = SolverSession(), ChildInputs()
    assert session.answer(decide_encoded(session.request(inputs), child)) is not None
    answered = session.answered_pass
    assert session.queue(queue_encoded(answered, ChildInputs())) is None  # a new child: no plan
    assert session.queue(queue_encoded(answered - 1, child)) is None  # a pass it planned no queue of
    later = {**inputs, "now": inputs["now"] + 5.0}
    assert session.answer(decide_encoded(session.request(later), child)) is not None
    assert session.queue(queue_encoded(answered, child)) is None  # the next pass's plan replaced it
    assert session.queue(queue_encoded(session.answered_pass, child)) == decide(**later).queue
