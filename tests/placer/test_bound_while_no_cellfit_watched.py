"""A Job AlloX started whose pods ran while no cellfit watched, and left their node since, is
not suspended again by a restarted cellfit (life28 #1). Its pods-bound record
(``cellfit.io/pods-bound``) is written by the leader that sees a pod bound; when none did (the
pods bound while no cellfit led, or the write failed and cellfit died) and the pods then left
their node (node deleted, pod evicted), a restarted cellfit found a Job none of whose pods was
ever bound, its replacement pod unbound past the NotBound limit, and suspended it again: the
Job controller deleted the running training Job's pods and it went back to AlloX's queue.

The Job controller's counts say a pod of it ran or ended (``ready``, ``succeeded``, ``failed``,
``uncountedTerminatedPods``); a cellfit that did not see the run begin (the Job was not
suspended in any of its passes) now lets such a Job go, told so, instead of suspending it.
A Job whose counts are empty is still suspended again after a restart (no pod of it ever
ended, so none was bound and left), and so is one whose run began in the controller's sight
(the counts of an earlier run, its pods deleted by a suspension, say nothing of this one)."""

from __future__ import annotations

from typing import Any

import pytest

from placer.holding import JobPods
from scheduler.constants import ANNOTATION_PODS_BOUND
from tests.placer.test_restart_remembers_bound import STARTED_AT, ClusterApi, cellfit, running_job, suspended

NOW = 1767225700.0  # 2026-01-01T00:01:40Z, 40 s after STARTED_AT
LATER = NOW + 1800  # far past the 300 s NotBound limit


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def job_with(counts: dict[str, Any]) -> dict[str, Any]:
    body = running_job("train")
    body["status"].update(counts)
    return body


@pytest.mark.parametrize("counts", [
    {"failed": 1},  # its pod on the deleted node, or evicted, counted failed
    {"uncountedTerminatedPods": {"failed": ["uid-pod-0"]}},  # ended, not counted yet
    {"succeeded": 1},  # one pod of it completed, the next waits to be placed
    {"ready": 1},  # the Job controller still counts a pod ready
])
def test_a_restarted_cellfit_lets_go_a_job_whose_pods_ran_unseen_instead_of_suspending_it(counts: dict[str, Any]) -> None:
    api = ClusterApi([job_with(counts)])
    # Restarted: the Job's pod ran while no cellfit led, its node was deleted, its replacement
    # waits to be placed; no pods-bound record.
    cellfit(api, {"uid-train": JobPods(unbound=1)}, now=LATER).admit()
    assert suspended(api) == set()
    assert api.told["train"]["reason"] == "NotBound"
    assert "may have run since its start while no cellfit watched" in api.told["train"]["message"]
    assert "AlloX does not suspend it again" in api.told["train"]["message"]


def test_the_let_go_job_is_told_it_runs_once_its_pod_binds_and_its_run_is_recorded() -> None:
    api = ClusterApi([job_with({"failed": 1})])
    pods = {"uid-train": JobPods(unbound=1)}
    clock = Clock(LATER)
    process = cellfit(api, pods, now=clock)
    process.admit()
    told = api.told["train"]
    process.admit()  # nothing new: not told again, not suspended
    assert api.told["train"] is told and suspended(api) == set()
    pods["uid-train"] = JobPods(here=1)
    clock.now += 10
    process.admit()
    assert api.told["train"]["reason"] == "Started" and "bound again" in api.told["train"]["message"]
    assert api.jobs["train"]["metadata"]["annotations"][ANNOTATION_PODS_BOUND] == STARTED_AT


def test_a_second_restart_keeps_it_let_go() -> None:
    api = ClusterApi([job_with({"failed": 1})])
    cellfit(api, {"uid-train": JobPods(unbound=1)}, now=LATER).admit()
    told = api.told["train"]
    cellfit(api, {"uid-train": JobPods(unbound=1)}, now=LATER + 60).admit()
    assert suspended(api) == set() and api.told["train"] is told


def test_a_job_none_of_whose_pods_ever_ended_is_still_suspended_again_after_a_restart() -> None:
    api = ClusterApi([job_with({"ready": 0, "succeeded": 0, "failed": 0})])
    cellfit(api, {"uid-train": JobPods(unbound=1)}, now=LATER).admit()
    assert suspended(api) == {"train"}
    assert api.told["train"]["reason"] == "SuspendedAgain"


def test_a_run_that_began_in_sight_is_judged_by_what_was_seen_whatever_the_counts() -> None:
    # Suspended again once: its pods, deleted by the suspension, count as failed. This cellfit
    # sees it suspended, starts it, and none of its pods is bound within the limit.
    body = job_with({"failed": 1})
    body["spec"]["suspend"] = True
    body["status"] = {"failed": 1}
    api = ClusterApi([body])
    clock = Clock(NOW)
    process = cellfit(api, {"uid-train": JobPods(unbound=1)}, now=clock)
    (start,) = process.admit().starts
    assert start.key == "alice/train" and suspended(api) == set()
    api.edit("train", lambda job: job["status"].update(startTime="2026-01-01T00:01:40Z"))  # the Job controller starts it
    clock.now = LATER
    process.admit()
    assert suspended(api) == {"train"}
    assert api.told["train"]["reason"] == "SuspendedAgain"
