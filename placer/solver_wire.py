"""decide()'s inputs and its decision as msgpack, for the solver process (``allox.solverProcess``).

Pickling them was as costly as deciding: at 1,000 queued Jobs the round trip of a pass's inputs
(the waiting and running Jobs, frozen dataclasses with their demands) and its decision took
22 ms of CPU with a fifth of the machines busy and 43 ms on a full cluster, beside 16-19 and
35-50 ms for decide itself. msgspec writes and reads the same values in 7 and 11 ms, and the
child's ``decide`` gets equal values (tests/placer/test_controller.py compares the decisions).

Most Jobs are the same from one pass to the next (the controller hands ``decide`` the same
objects for Jobs the watch shows unchanged), so a Job the child received last pass is sent as
its key alone, and the child hands ``decide`` the object it decoded then: nothing is written or
read again for it, and what ``decide`` keeps per object between passes (``DecideReuse``) serves
in the child as it does in process. Each request names the pass its keys refer to; a child that
does not hold that pass (a new child, or one whose last pass failed) answers that it needs
everything, and the parent sends it all.

The child answers a pass with its starts (``decide_starts``) and keeps that pass's
``QueuePlan``: the parent carries the starts out, then asks for the queue of the pass by its
number (``queue_encoded``); a child that holds no plan of that pass answers None.
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

import msgspec

from scheduler.gc_freeze import freeze_long_lived
from scheduler.matching.admission import (
    AdmissionDecision,
    AdmissionPolicy,
    DecideReuse,
    Queued,
    QueuePlan,
    RunningJob,
    WaitingJob,
    decide_starts,
)
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity

J = TypeVar("J", WaitingJob, RunningJob)


class DecideInputs(msgspec.Struct, frozen=True, kw_only=True):
    """The keyword arguments the placer controller gives :func:`decide`; a Job given by its key
    alone is the one of that key the child received in pass ``since``."""

    now: float
    waiting: list[WaitingJob | str]
    running: list[RunningJob | str]
    free_nodes: list[NodeResources]
    capacity: Capacity
    alpha: float
    policy: AdmissionPolicy
    reserved_cpu_per_gpu: float
    reserved_memory_per_gpu: float = 0.0
    allox_plus_timeout: float = math.inf
    omega_grid_seconds: float = 60.0
    gpu_pools: dict[str, int] | None = None
    gpu_slots: dict[str, int] | None = None
    pass_number: int = 0
    since: int = 0  # the pass the keys refer to; 0: every Job is sent whole
    # allox.decisionBudgetSeconds: the walk stops once this long has passed since the child took
    # the request (after its first start); None: never.
    budget_seconds: float | None = None


class DecideAnswer(msgspec.Struct, frozen=True):
    """The child's decision (its queue empty: asked for apart); None when it does not hold what
    the keys name (send everything)."""

    decision: AdmissionDecision | None


class QueueAnswer(msgspec.Struct, frozen=True):
    """The queue of the pass asked for; None when the child holds no plan of that pass (a new
    child, or its pass failed)."""

    queue: tuple[Queued, ...] | None


_ENCODER = msgspec.msgpack.Encoder()
_INPUTS = msgspec.msgpack.Decoder(DecideInputs)
_ANSWER = msgspec.msgpack.Decoder(DecideAnswer)
_QUEUE_ANSWER = msgspec.msgpack.Decoder(QueueAnswer)
_DECIDE_ARGUMENTS = ("now", "free_nodes", "capacity", "alpha", "policy", "reserved_cpu_per_gpu", "reserved_memory_per_gpu", "allox_plus_timeout",
                     "omega_grid_seconds", "gpu_pools", "gpu_slots")


@dataclass(slots=True)
class SolverSession:
    """The parent's side: which Jobs the child holds, by key, from the last pass it answered."""

    _pass_number: int = 0
    _held_pass: int = 0
    _held_waiting: dict[str, WaitingJob] = field(default_factory=dict)
    _held_running: dict[str, RunningJob] = field(default_factory=dict)
    _sent: tuple[int, dict[str, WaitingJob], dict[str, RunningJob]] | None = None

    def request(self, inputs: Mapping[str, Any], *, budget_seconds: float | None = None) -> bytes:
        """``decide``'s keyword arguments as the child reads them, and the decision's budget."""
        self._pass_number += 1
        waiting: list[WaitingJob] = inputs["waiting"]
        running: list[RunningJob] = inputs["running"]
        self._sent = (self._pass_number, {job.key: job for job in waiting}, {job.key: job for job in running})
        return _ENCODER.encode(DecideInputs(
            **{name: inputs[name] for name in _DECIDE_ARGUMENTS if name in inputs},
            waiting=_keyed(waiting, self._held_waiting), running=_keyed(running, self._held_running),
            pass_number=self._pass_number, since=self._held_pass, budget_seconds=budget_seconds,
        ))

    def answer(self, payload: bytes) -> AdmissionDecision | None:
        """The decision the child wrote; None when it asked for everything (ask again)."""
        decision = _ANSWER.decode(payload).decision
        if decision is None or self._sent is None:
            self.forget()
            return None
        self._held_pass, self._held_waiting, self._held_running = self._sent
        self._sent = None
        return decision

    @property
    def answered_pass(self) -> int:
        """The pass the child last answered (0: none it still holds): the one whose queue to ask for."""
        return self._held_pass

    @staticmethod
    def queue(payload: bytes) -> tuple[Queued, ...] | None:
        """The queue the child wrote (``queue_encoded``); None when it holds no plan of that pass."""
        return _QUEUE_ANSWER.decode(payload).queue

    def forget(self) -> None:
        """The child holds nothing this side can name (it died, or its pass failed)."""
        self._held_pass, self._held_waiting, self._held_running, self._sent = 0, {}, {}, None


def _keyed(jobs: list[J], held: Mapping[str, J]) -> list[J | str]:
    return [job.key if held.get(job.key) is job else job for job in jobs]


@dataclass(slots=True)
class ChildInputs:
    """The child's side: the Jobs of the last pass it was sent, what ``decide`` keeps, and the
    queue plan of the last pass it answered (its number and the plan), until the next pass."""

    pass_number: int = 0
    waiting: dict[str, WaitingJob] = field(default_factory=dict)
    running: dict[str, RunningJob] = field(default_factory=dict)
    reuse: DecideReuse = field(default_factory=DecideReuse)
    plan: tuple[int, QueuePlan] | None = None


_CHILD = ChildInputs()


def decide_encoded(payload: bytes, held: ChildInputs | None = None) -> bytes:
    """In the solver process: the inputs read, the starts decided, the decision written and the
    queue's plan kept for :func:`queue_encoded` (``held``: the child's own, by default this
    process's)."""
    taken = time.monotonic()  # the budget counts from here: reading the inputs is the decision's too
    held = _CHILD if held is None else held
    held.plan = None  # a pass that fails or is refused leaves no plan of an older pass to ask for
    inputs = _INPUTS.decode(payload)
    if inputs.since and inputs.since != held.pass_number:
        return _ENCODER.encode(DecideAnswer(None))
    try:
        waiting = [held.waiting[job] if isinstance(job, str) else job for job in inputs.waiting]
        running = [held.running[job] if isinstance(job, str) else job for job in inputs.running]
    except KeyError:
        return _ENCODER.encode(DecideAnswer(None))
    # Held before deciding: a pass that raises leaves pass_number moved on, so the parent's next
    # request (naming the pass before) is answered "send everything".
    held.pass_number = inputs.pass_number
    held.waiting = {job.key: job for job in waiting}
    held.running = {job.key: job for job in running}
    decision, plan = decide_starts(waiting=waiting, running=running, reuse=held.reuse, stop=_stop_at(taken, inputs.budget_seconds),
                                   **{name: getattr(inputs, name) for name in _DECIDE_ARGUMENTS})
    held.plan = (inputs.pass_number, plan)
    answer = _ENCODER.encode(DecideAnswer(decision))
    _freeze_after_first_decision()
    return answer


def _stop_at(taken: float, budget_seconds: float | None) -> Callable[[], bool] | None:
    """The walk's ``stop``: True once ``budget_seconds`` have passed since ``taken`` (monotonic)."""
    if budget_seconds is None:
        return None
    deadline = taken + budget_seconds
    return lambda: time.monotonic() >= deadline


def exit_with_parent(parent_pid: int, *, poll_seconds: float = 1.0) -> None:
    """The solver process's initializer: end it once the process that started it is gone. A
    ProcessPoolExecutor worker holds both ends of its call queue, so when its parent dies without
    shutting the pool down (SIGKILL, the OOM killer, outside a container that takes its children
    with it) it never reads an end of file and waits for a pass for ever, holding the Jobs it
    kept."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_seconds)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _freeze_after_first_decision() -> None:
    """In the solver process, once: what its first decision loaded (modules, the kept Jobs,
    ``DecideReuse``) is frozen out of garbage collections, so that a full collection during a
    later pass walks only what passes since made (scheduler/gc_freeze.py). Nothing in a process that is not a child (tests,
    the parent's fallback)."""
    if gc.get_freeze_count() or multiprocessing.parent_process() is None:
        return
    freeze_long_lived(what="the solver process's first decision")


def queue_encoded(pass_number: int, held: ChildInputs | None = None) -> bytes:
    """In the solver process: the queue of pass ``pass_number``, planned from the plan
    :func:`decide_encoded` kept, written; None when the child holds no plan of that pass."""
    held = _CHILD if held is None else held
    if held.plan is None or held.plan[0] != pass_number:
        return _ENCODER.encode(QueueAnswer(None))
    return _ENCODER.encode(QueueAnswer(held.plan[1].queue()))
