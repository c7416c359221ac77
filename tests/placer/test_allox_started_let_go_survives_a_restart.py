"""A Job AlloX started (it carries ``cellfit.io/placement``) that was let go: told ``NotBound``
(its pods replaced and waiting to be placed again, none bound; or a trial Job, left pending,
none of whose pods was bound within the NotBound limit) or ``PodsElsewhere`` (its pods on nodes
outside AlloX's). The cellfit that let it go tells it "running on gpu: its pods are bound again"
once a pod binds on AlloX's nodes. 1f5e6f1 read a let-go back from the ``Placed`` condition after
a restart for Jobs unsuspended by hand only: a pod of a Job AlloX started bound while no cellfit
led (a restart, a leader change) left ``NotBound`` or ``PodsElsewhere`` standing on the running
Job, in ``kubectl get job -o yaml`` and in what ``kubectl cellfit why`` reads, for the rest of its
run. A restart before the pod binds already told it (its first pass finds it let go from its pods
and its start time); that, and the let-go itself surviving the restart (no machine held for it
again, nothing told again, not suspended again), are checked too."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from estimator.objects import JOB_DECODER
from placer.holding import JobPods
from scheduler.constants import ANNOTATION_PODS_BOUND
from tests.placer.test_controller import Jobs
from tests.placer.test_hand_unsuspended_awaits_a_machine import NOW, job
from tests.placer.test_hand_unsuspended_let_go_survives_a_restart import Cellfit, with_placed

X_STARTED = "2026-01-01T00:01:30Z"  # x's status.startTime; NOW is 00:01:40
BOUND_AGAIN = ("Started", "running on gpu: its pods are bound again")


def edited(found: Any, edit: Any) -> Any:
    """The Job as the watch shows it once ``edit`` changed its body."""
    body = json.loads(msgspec.json.encode(found))
    edit(body)
    return JOB_DECODER.decode(json.dumps(body).encode())


@dataclass(frozen=True, kw_only=True)
class LetGo:
    """How x, started by AlloX on a GPU at 00:01:30, comes to hold no machine."""

    name: str
    trial: bool = False  # a trial Job (left pending past the NotBound limit, never suspended again)
    bound_first: bool = False  # its pod bound on AlloX's node at NOW (recorded on x), then replaced
    pods: JobPods  # x's pods from then on
    reason: str  # what x is told
    said: str  # and a part of the message

    def x(self, *, bound_recorded: bool) -> Any:
        def edit(body: dict[str, Any]) -> None:
            if self.trial:
                body["metadata"]["labels"] = {"cellfit.io/job-class": "trial"}
            if bound_recorded:  # as the cellfit that saw its pod bound recorded it
                body["metadata"]["annotations"][ANNOTATION_PODS_BOUND] = X_STARTED

        return edited(job("x", created=3, placement="gpu", started=X_STARTED), edit)


LET_GOS = [
    LetGo(name="replaced", bound_first=True, pods=JobPods(unbound=1), reason="NotBound", said="waiting to be placed again"),
    LetGo(name="trial-never-bound", trial=True, pods=JobPods(unbound=1), reason="NotBound", said="within 300 s"),
    LetGo(name="elsewhere", pods=JobPods(elsewhere=1), reason="PodsElsewhere", said="outside AlloX's"),
]


def h1() -> Any:
    return job("h-1", created=1, placement="gpu", started="2026-01-01T00:01:10Z")


def h3(*, started: bool) -> Any:
    """Queued behind h-1; or as the first cellfit started it on the idle GPU at 00:06:41."""
    return job("h-3", created=2, placement="gpu" if started else None, started="2026-01-01T00:06:41Z" if started else None)


def let_go_by_a_first_leader(case: LetGo, pods: dict[str, JobPods]) -> Any:
    """One GPU node of 2 GPUs, h-1 (AlloX's) on one; x's pods as ``case`` has them. The first
    leader passes at NOW, then 301 s later: x holds nothing (its pods elsewhere: from the first
    pass), and h-3 starts on the idle GPU. x as the watch then shows it, its let-go condition
    written."""
    pods.update({"uid-h-1": JobPods(here=1), "uid-x": JobPods(here=1) if case.bound_first else case.pods})
    first = Cellfit(now=NOW, jobs=[h1(), h3(started=False), case.x(bound_recorded=False)], pods=pods)
    starts = first.starts()
    if case.bound_first:
        assert ("x", {ANNOTATION_PODS_BOUND: X_STARTED}) in first.api.annotated
        pods["uid-x"] = case.pods
        first.placer._jobs = Jobs([h1(), h3(started=False), case.x(bound_recorded=True)])
    first.now = NOW + 301
    assert [*starts, *first.starts()] == ["ml/h-3"]
    assert "x" not in [name for name, _ in first.api.patches]  # not suspended again
    (condition,) = first.told("x")[-1:]
    assert (condition["reason"], case.said in condition["message"]) == (case.reason, True)
    return with_placed(case.x(bound_recorded=case.bound_first), condition)


@pytest.mark.parametrize("case", LET_GOS, ids=lambda case: case.name)
def test_its_pod_bound_while_no_leader_ran_is_told_it_runs(case: LetGo) -> None:
    """Between the let-go and the restart (or the standby taking the lead) h-1 ends and x's pod is
    bound on the GPU h-1 left. Before: the new leader said nothing, and x, running, kept saying
    it holds no machine because of pods that were bound by then."""
    pods: dict[str, JobPods] = {}
    x = let_go_by_a_first_leader(case, pods)
    del pods["uid-h-1"]
    pods.update({"uid-h-3": JobPods(here=1), "uid-x": JobPods(here=1)})
    restarted = Cellfit(now=NOW + 361, jobs=[h3(started=True), x], pods=pods)
    decision = restarted.placer.admit()
    assert decision.busy_machines == {"gpu": 2}
    assert restarted.placer.inspect()["lastDecision"]["holdingNoMachine"] == []
    assert [(c["reason"], c["message"]) for c in restarted.told("x")] == [BOUND_AGAIN]


@pytest.mark.parametrize("case", LET_GOS, ids=lambda case: case.name)
def test_the_let_go_survives_a_restart_and_a_pod_bound_later_is_told(case: LetGo) -> None:
    """A restart a minute after the let-go, x's pods where they were: x holds no GPU again (h-1
    and h-3 are the busy ones, not 3 on 2), is told nothing again, and is not suspended again;
    then h-1 ends and x's pod is bound on its GPU, and x is told it runs."""
    pods: dict[str, JobPods] = {}
    x = let_go_by_a_first_leader(case, pods)
    pods["uid-h-3"] = JobPods(here=1)
    restarted = Cellfit(now=NOW + 361, jobs=[h1(), h3(started=True), x], pods=pods)
    assert restarted.placer.admit().busy_machines == {"gpu": 2}
    holding_none = restarted.placer.inspect()["lastDecision"]["holdingNoMachine"]
    assert {row["job"]: row["why"] for row in holding_none} == {"ml/x": "elsewhere" if case.pods.elsewhere else "unbound"}
    assert restarted.told("x") == []
    assert restarted.api.patches == []
    restarted.placer._jobs = Jobs([h3(started=True), x])  # h-1 ends
    del pods["uid-h-1"]
    pods["uid-x"] = JobPods(here=1)
    restarted.now = NOW + 400
    assert restarted.placer.admit().busy_machines == {"gpu": 2}
    assert [(c["reason"], c["message"]) for c in restarted.told("x")] == [BOUND_AGAIN]


def test_a_let_go_of_an_earlier_spell_is_not_told_as_bound_again() -> None:
    """x was let go (PodsElsewhere) in a spell before it was suspended and started again (the
    Job controller reset its start time), its condition as then written still standing: its pod
    bound now is no let-go ending, and x is not told its pods are bound again."""
    pods: dict[str, JobPods] = {}
    x = let_go_by_a_first_leader(LET_GOS[2], pods)
    again = edited(x, lambda body: body["status"].update(startTime="2026-01-01T00:07:00Z"))
    del pods["uid-h-1"]
    pods.update({"uid-h-3": JobPods(here=1), "uid-x": JobPods(here=1)})
    restarted = Cellfit(now=NOW + 361, jobs=[h3(started=True), again], pods=pods)
    assert restarted.placer.admit().busy_machines == {"gpu": 2}
    assert BOUND_AGAIN not in [(c["reason"], c["message"]) for c in restarted.told("x")]
