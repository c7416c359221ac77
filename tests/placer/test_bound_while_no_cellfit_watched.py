"""A Job AlloX started whose pods ran while no cellfit led, and left their node since, is not
suspended again by a restarted cellfit (life28 #1), and a Job none of whose pods of this run was
bound still is (review28 on d33c558).

Its pods-bound record (``cellfit.io/pods-bound``, the run's start) was written only by the leader
that saw a pod bound; when none did (the pods bound while no cellfit led, or the write failed and
cellfit died) and the pods then left their node (node deleted, pod evicted), a restarted cellfit
found a Job none of whose pods was ever bound, its replacement pod unbound past the NotBound limit,
and suspended it again: the Job controller deleted the running training Job's pods. d33c558 read
the Job controller's counts of its pods (ready, succeeded, failed, uncountedTerminatedPods)
instead: they are of every run (a suspension's deleted pods count as failed), so a Job suspended
again once, started again and never bound was let go for ever by a restart within its second run;
and under the documented podFailurePolicy (Ignore on DisruptionTarget) an evicted or pod-GC'd pod
counts nowhere, so the Job it was for was still suspended again.

Now the replica that binds the pod writes the record (scheduler/cluster/cache.py, whichever
replica kube-scheduler's bind call reaches: tests/cluster/test_binder_records_pods_bound.py), and
a restarted controller judges a Job by this run's record alone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from placer.holding import JobPods
from scheduler.constants import ANNOTATION_PODS_BOUND
from tests.cluster.test_binder_records_pods_bound import cluster
from tests.placer.test_restart_remembers_bound import STARTED_AT, ClusterApi, cellfit, running_job, suspended

NOW = 1767225700.0  # 2026-01-01T00:01:40Z, 40 s after STARTED_AT
LATER = NOW + 1800  # far past the 300 s NotBound limit
IGNORE_DISRUPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def job_with(counts: dict[str, Any]) -> dict[str, Any]:
    body = running_job("train")
    body["status"].update(counts)
    return body


def bound_through_a_replica_that_does_not_lead() -> dict[str, Any]:
    """The Job as the API server holds it after its pod was bound by a replica's bind verb while
    no cellfit led (that replica runs no AlloX controller), under the documented podFailurePolicy;
    the pod's node was deleted since, which the Job controller counts nowhere."""
    body = job_with({"ready": 0, "succeeded": 0, "failed": 0})
    body["spec"]["podFailurePolicy"] = IGNORE_DISRUPTION
    body["metadata"]["namespace"] = "ml"
    api, cache, service = cluster(body)
    args = {"PodName": "train-0", "PodNamespace": "ml", "PodUID": "uid-train-0", "Node": "gpu-a"}
    assert json.loads(asyncio.run(service.bind(json.dumps(args).encode())).body)["Error"] == ""
    assert cache._bind_writes.settle(timeout=30)
    cache.stop()
    return api.by_name["train"]


def test_a_job_whose_pod_bound_through_a_replica_that_did_not_lead_is_not_suspended_again_after_a_restart() -> None:
    body = bound_through_a_replica_that_does_not_lead()
    assert body["metadata"]["annotations"][ANNOTATION_PODS_BOUND] == STARTED_AT  # the binder's record
    api = ClusterApi([body])
    cellfit(api, {"uid-train": JobPods(unbound=1)}, now=LATER).admit()  # restarted; its replacement pod waits
    assert suspended(api) == set()
    assert api.told["train"]["reason"] == "NotBound" and "waiting to be placed again" in api.told["train"]["message"]


def test_the_job_is_told_it_runs_once_its_pod_binds_again() -> None:
    api = ClusterApi([bound_through_a_replica_that_does_not_lead()])
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


def test_a_second_restart_keeps_it_running() -> None:
    api = ClusterApi([bound_through_a_replica_that_does_not_lead()])
    cellfit(api, {"uid-train": JobPods(unbound=1)}, now=LATER).admit()
    told = api.told["train"]
    cellfit(api, {"uid-train": JobPods(unbound=1)}, now=LATER + 60).admit()
    assert suspended(api) == set() and api.told["train"] is told


@pytest.mark.parametrize("counts", [
    {"failed": 1},  # an earlier run's pod, deleted by its suspension
    {"uncountedTerminatedPods": {"failed": ["uid-pod-0"]}},
    {"succeeded": 1},
    {"ready": 1},
    {"ready": 0, "succeeded": 0, "failed": 0},
], ids=["failed", "uncounted", "succeeded", "ready", "none"])
def test_without_a_record_of_this_run_a_restarted_cellfit_suspends_it_again_whatever_the_counts(counts: dict[str, Any]) -> None:
    api = ClusterApi([job_with(counts)])
    cellfit(api, {"uid-train": JobPods(unbound=1)}, now=LATER).admit()
    assert suspended(api) == {"train"}
    assert api.told["train"]["reason"] == "SuspendedAgain"


def test_a_second_failed_start_straddling_a_restart_is_still_suspended_again() -> None:
    """review28's scenario: suspended again once (its pending pod, deleted by that suspension,
    counted failed), started again in this controller's sight, its pod never bound; cellfit
    restarts within the run's NotBound window. The restarted controller suspends it again
    instead of leaving it unsuspended, holding nothing, with pending pods, for ever."""
    body = job_with({"failed": 1})
    body["spec"]["suspend"] = True
    body["status"] = {"failed": 1}
    api = ClusterApi([body])
    pods = {"uid-train": JobPods(unbound=1)}
    (start,) = cellfit(api, pods, now=NOW).admit().starts  # process A starts it (in sight)
    assert start.key == "alice/train"
    api.edit("train", lambda job: job["status"].update(startTime="2026-01-01T00:01:40Z"))
    clock = Clock(NOW + 60)  # A is restarted 60 s later
    restarted = cellfit(api, pods, now=clock)
    restarted.admit()
    assert suspended(api) == set()  # within the NotBound limit: it holds its machine
    clock.now = NOW + 1800
    restarted.admit()
    assert suspended(api) == {"train"}
    assert api.told["train"]["reason"] == "SuspendedAgain"


def test_a_run_that_began_in_sight_is_judged_by_what_was_seen_whatever_the_counts() -> None:
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
