"""A restarted cellfit still knows which Jobs AlloX started had their pods bound (live hand
session): ``_was_bound`` was kept in memory only, so after a restart a Job whose pods ran on
AlloX's nodes and now wait to be placed again (their node deleted, a pod failed and its
replacement pending) read as one none of whose pods was ever bound, and the NotBound rule
suspended it again, backing it off as a failed start. cellfit now records on the Job
(``cellfit.io/pods-bound``, the start of the run in which it saw a pod bound) what it saw, and a
controller rebuilt over the same cluster reads it back; a Job that never bound is still
suspended again, and a record of an earlier run (the Job suspended and started since) proves
nothing of this one."""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from placer.controller import PlacerController
from placer.holding import JobPods
from scheduler.constants import ANNOTATION_PODS_BOUND
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import CONFIGURATIONS
from tests.placer.test_review_61 import ServerApi

NOW = 1767225700.0  # 2026-01-01T00:01:40Z
LATER = NOW + 1800  # 30 minutes on: far past the 300 s NotBound limit
STARTED_AT = "2026-01-01T00:01:00Z"


class ClusterApi(ServerApi):
    """The API server's Jobs, conditions and annotations included, so that a controller built
    again over it reads the cluster as the one before it left it."""

    def annotate_job(self, *, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.jobs[name]["metadata"].setdefault("annotations", {}).update(annotations)
        self._bump(name)

    def set_job_condition(self, *, name: str, condition: dict[str, Any], **_: Any) -> None:
        super().set_job_condition(name=name, condition=condition)
        status = self.jobs[name].setdefault("status", {})
        status["conditions"] = [*(c for c in status.get("conditions") or [] if c["type"] != condition["type"]), condition]


class Watch:
    def __init__(self, api: ClusterApi) -> None:
        self.api = api

    def interchangeable_jobs(self) -> list[Any]:
        return self.api.watched()

    def subscribe(self, on_change: Any) -> None:
        pass


def running_job(name: str, *, started: str = STARTED_AT) -> dict[str, Any]:
    """A Job AlloX started on gpu at ``started``, unsuspended, as the API server holds it."""
    annotations = {
        "cellfit.io/configurations": json.dumps(CONFIGURATIONS),
        "cellfit.io/placement": "gpu",
        "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 3000}, "gpu": {"seconds": 900}}),
    }
    return {
        "metadata": {
            "name": name,
            "namespace": "alice",
            "uid": f"uid-{name}",
            "resourceVersion": "9",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": annotations,
        },
        "spec": {
            "suspend": False,
            "template": {
                "metadata": {"labels": {"cellfit.io/placement": "gpu"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
            },
        },
        "status": {"startTime": started},
    }


def cellfit(api: ClusterApi, pods: Mapping[str, JobPods], *, now: float | Callable[[], float]) -> PlacerController:
    """A cellfit process (its admission controller) over the cluster ``api`` holds, at ``now``
    (or on that clock)."""
    return PlacerController(
        api=api,
        jobs=Watch(api),
        settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=2)},
        capacity=lambda: Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=2),
        clock=now if callable(now) else lambda: now,
        job_pods=lambda owners: {uid: found for uid, found in pods.items() if uid in owners},
        unbound_hold_seconds=300,
    )


def suspended(api: ClusterApi) -> set[str]:
    return {name for name, body in api.jobs.items() if body["spec"]["suspend"]}


def test_a_restarted_cellfit_does_not_suspend_again_a_job_whose_pods_were_bound_before_it_restarted() -> None:
    api = ClusterApi([running_job("ran"), running_job("never")])
    # The first cellfit sees ran's pod on AlloX's node; never's pod is still on its way.
    cellfit(api, {"uid-ran": JobPods(here=1), "uid-never": JobPods(unbound=1)}, now=NOW).admit()
    # It restarts; meanwhile ran's node was deleted and its replacement pod waits to be placed.
    restarted = cellfit(api, {"uid-ran": JobPods(unbound=1), "uid-never": JobPods(unbound=1)}, now=LATER)
    restarted.admit()
    assert suspended(api) == {"never"}
    assert api.told["ran"]["reason"] == "NotBound" and "waiting to be placed again" in api.told["ran"]["message"]
    assert api.told["never"]["reason"] == "SuspendedAgain"
    assert api.jobs["ran"]["metadata"]["annotations"][ANNOTATION_PODS_BOUND] == STARTED_AT
    assert ANNOTATION_PODS_BOUND not in api.jobs["never"]["metadata"]["annotations"]


def test_the_record_is_written_once_per_run() -> None:
    api = ClusterApi([running_job("ran")])
    process = cellfit(api, {"uid-ran": JobPods(here=1)}, now=NOW)
    process.admit()
    version = api.jobs["ran"]["metadata"]["resourceVersion"]
    process.admit()
    cellfit(api, {"uid-ran": JobPods(here=1)}, now=NOW + 5).admit()  # restarted: the Job already says it
    assert api.jobs["ran"]["metadata"]["resourceVersion"] == version


def test_a_record_of_an_earlier_run_does_not_keep_a_job_that_never_bound_since() -> None:
    # Its pods were bound in a run that started at 00:01; suspended and started again at 00:20,
    # none of them was bound since: suspended again, however the restart came.
    body = running_job("again", started="2026-01-01T00:20:00Z")
    body["metadata"]["annotations"][ANNOTATION_PODS_BOUND] = STARTED_AT
    api = ClusterApi([body])
    cellfit(api, {"uid-again": JobPods(unbound=1)}, now=LATER).admit()
    assert suspended(api) == {"again"}


def test_a_job_a_user_unsuspended_by_hand_gets_no_record() -> None:
    body = running_job("by-hand")
    del body["metadata"]["annotations"]["cellfit.io/placement"]  # AlloX never suspends it again: nothing to record
    api = ClusterApi([body])
    cellfit(api, {"uid-by-hand": JobPods(here=1)}, now=NOW).admit()
    assert ANNOTATION_PODS_BOUND not in api.jobs["by-hand"]["metadata"]["annotations"]
