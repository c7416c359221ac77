"""review27 R4: a Job its user unsuspended by hand whose pod never binds keeps the idle machine of
its kind for the NotBound limit (300 s), then is let go and told ``NotBound``. The let-go lived
in the process's memory only: a restarted cellfit, or the replica taking the lead, kept the idle
GPU for it for another 300 s, the queued Jobs waiting behind it after every restart. It is now
read back from the Job's ``Placed`` condition when written in the Job's present spell of running
(at or after its ``status.startTime``, which the Job controller resets at each unsuspend)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from estimator.objects import JOB_DECODER
from placer.holding import JobPods
from tests.placer.test_controller import Jobs
from tests.placer.test_hand_unsuspended_awaits_a_machine import NOW, World, job

HAND_STARTED = "2026-01-01T00:01:30Z"  # h-5's status.startTime; NOW is 00:01:40


class Cellfit(World):
    """One cellfit process: one GPU node of 2 GPUs, h-1 (AlloX's) on one of them."""

    def __init__(self, *, now: float, jobs: list[Any], pods: dict[str, JobPods]) -> None:
        super().__init__(jobs, pods)
        self.now = now

    def starts(self) -> list[str]:
        return [start.key for start in self.placer.admit().starts]

    def told(self, name: str) -> list[dict[str, Any]]:
        return [condition for named, condition in self.api.conditions if named == name]


def jobs(*, h5_started: str = HAND_STARTED) -> list[Any]:
    return [job("h-1", created=1, placement="gpu", started="2026-01-01T00:01:10Z"), job("h-3", created=2),
            job("h-5", created=3, started=h5_started, by_hand=True)]


def with_placed(found: Any, condition: dict[str, Any]) -> Any:
    """The Job as the watch shows it once ``condition`` is written."""
    body = json.loads(msgspec.json.encode(found))
    body["status"] = {**(body.get("status") or {}), "conditions": [condition]}
    return JOB_DECODER.decode(json.dumps(body).encode())


def let_go_by_a_first_leader(pods: dict[str, JobPods]) -> dict[str, Any]:
    """h-5's pod stays unbound beside the idle GPU: the first leader keeps it for h-5 (h-3 waits),
    and lets it go after the limit, telling h-5 NotBound; that condition, as written."""
    first = Cellfit(now=NOW, jobs=jobs(), pods=pods)
    assert first.starts() == []
    first.now = NOW + 301
    assert first.starts() == ["ml/h-3"]
    (let_go,) = [c for c in first.told("h-5") if c["reason"] == "NotBound"]
    assert let_go["lastTransitionTime"] == "2026-01-01T00:06:41Z"
    return let_go


def test_a_restarted_leader_does_not_keep_the_idle_gpu_again_for_a_job_let_go() -> None:
    pods = {"uid-h-1": JobPods(here=1), "uid-h-5": JobPods(unbound=1)}
    let_go = let_go_by_a_first_leader(pods)
    # A restart (or the standby taking the lead, which never wrote that condition) a minute
    # later: h-3 starts at once (before: it waited 300 s more behind h-5's unbound pod).
    restarted = Cellfit(now=NOW + 361, jobs=[*jobs()[:2], with_placed(jobs()[2], let_go)], pods=pods)
    assert restarted.starts() == ["ml/h-3"]
    assert restarted.told("h-5") == []  # its condition already says why it holds none
    holding_none = restarted.placer.inspect()["lastDecision"]["holdingNoMachine"]
    assert {row["job"]: row["why"] for row in holding_none} == {"ml/h-5": "unbound"}


def test_its_pod_bound_after_the_restart_holds_its_gpu_and_is_told_so() -> None:
    pods = {"uid-h-1": JobPods(here=1), "uid-h-5": JobPods(unbound=1)}
    let_go = let_go_by_a_first_leader(pods)
    h5 = with_placed(jobs()[2], let_go)
    restarted = Cellfit(now=NOW + 361, jobs=[*jobs()[:2], h5], pods=pods)
    assert restarted.starts() == ["ml/h-3"]
    # h-1 ends and h-5's pod is bound on the GPU it left: h-5 holds it, beside h-3.
    restarted.placer._jobs = Jobs([jobs()[1], h5])
    del pods["uid-h-1"]
    pods["uid-h-5"] = JobPods(here=1)
    restarted.now = NOW + 400
    decision = restarted.placer.admit()
    assert decision.busy_machines == {"gpu": 2}
    assert restarted.placer.inspect()["lastDecision"]["holdingNoMachine"] == []
    assert [(c["reason"], c["message"]) for c in restarted.told("h-5")] == [("Started", "running on gpu: its pods are bound again")]


def test_its_pod_bound_while_no_leader_ran_is_told_it_runs() -> None:
    """Bound between the let-go and the restart: the new leader finds it running, its condition
    still saying NotBound, and tells it, as the leader that let it go would have."""
    pods = {"uid-h-1": JobPods(here=1), "uid-h-5": JobPods(unbound=1)}
    let_go = let_go_by_a_first_leader(pods)
    pods["uid-h-5"] = JobPods(here=1)
    restarted = Cellfit(now=NOW + 361, jobs=[*jobs()[:2], with_placed(jobs()[2], let_go)], pods=pods)
    assert restarted.placer.admit().busy_machines == {"gpu": 2}
    assert [c["message"] for c in restarted.told("h-5")] == ["running on gpu: its pods are bound again"]


def test_a_let_go_of_an_earlier_spell_keeps_nothing_from_the_one_now() -> None:
    """h-5 was let go, then suspended and unsuspended again by its user: the Job controller reset
    its start time, and its new spell keeps the idle GPU for the limit as any first one does."""
    pods = {"uid-h-1": JobPods(here=1), "uid-h-5": JobPods(unbound=1)}
    let_go = let_go_by_a_first_leader(pods)
    unsuspended_again = with_placed(jobs(h5_started="2026-01-01T00:08:00Z")[2], let_go)
    restarted = Cellfit(now=NOW + 400, jobs=[*jobs()[:2], unsuspended_again], pods=pods)
    assert restarted.starts() == []  # h-3 waits: the idle GPU is kept for h-5's new spell
    assert restarted.placer.inspect()["lastDecision"]["awaitingBinding"] == [{"job": "ml/h-5", "kind": "gpu"}]


def test_a_let_go_dated_after_now_still_counts() -> None:
    """The leader that wrote it ran a clock ahead of this one's: the condition's time is used
    only to tell its spell (at or after the Job's start), never to time a hold, so h-5 holds
    nothing and is not kept an idle GPU for a fresh 300 s at each restart."""
    pods = {"uid-h-1": JobPods(here=1), "uid-h-5": JobPods(unbound=1)}
    let_go = {**let_go_by_a_first_leader(pods), "lastTransitionTime": "2026-01-01T00:20:00Z"}
    restarted = Cellfit(now=NOW + 361, jobs=[*jobs()[:2], with_placed(jobs()[2], let_go)], pods=pods)
    assert restarted.starts() == ["ml/h-3"]
