"""user26's session: a Job unsuspended by hand (``kubectl patch job h-5 -p
'{"spec":{"suspend":false}}'``) while no GPU was free. Before, AlloX counted it a busy machine from
its unsuspend (``busyMachines {"gpu": 3}`` on 2 GPUs), ending at its unsuspend plus its estimate
(a phantom end), and told h-3 and h-4 they both start when the two busy GPUs free though its
pending pod takes one of them. Now it holds no machine while its pod waits, takes the first GPU
to free ahead of the queue, and its estimate runs from when its pod is bound."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.holding import JobPods
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi

NOW = 1767225700.0  # 2026-01-01T00:01:40Z
GI = 2**30
CONFIGURATIONS = {"cpu": {"resources": {"cpu": "4", "memory": "8Gi"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}


def job(name: str, *, created: int, placement: str | None = None, started: str | None = None, by_hand: bool = False) -> Any:
    annotations = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 600}, "gpu": {"seconds": 120}})}
    requests: dict[str, str] = {"cpu": "500m"}
    labels = {"job-name": name}
    if placement:
        annotations["cellfit.io/placement"] = placement
        labels["cellfit.io/placement"] = placement
    if by_hand:  # its user wrote the GPU configuration into the template and unsuspended it
        requests = {"nvidia.com/gpu": "1", "cpu": "1"}
    body = {"metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "annotations": annotations, "resourceVersion": "5",
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z"},
            "spec": {"suspend": started is None, "template": {"metadata": {"labels": labels},
                                                              "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}},
            "status": {"startTime": started} if started else {}}
    return JOB_DECODER.decode(json.dumps(body).encode())


class World:
    def __init__(self, jobs: list[Any], pods: dict[str, JobPods]) -> None:
        self.now = NOW
        self.pods = pods
        self.api = RecordingApi()
        # One node of 2 GPUs (both running AlloX's Jobs, whose pods count free), no CPU slot beside.
        node = Resources(cpu_millis=3000, memory_bytes=64 * GI, gpus=2)
        self.placer = PlacerController(
            api=self.api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
            free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: self.now,
            job_pods=lambda owners: {uid: found for uid, found in self.pods.items() if uid in owners}, unbound_hold_seconds=300)


def jobs() -> list[Any]:
    return [job("h-1", created=1, placement="gpu", started="2026-01-01T00:01:10Z"),
            job("h-2", created=1, placement="gpu", started="2026-01-01T00:01:10Z"),
            job("h-3", created=2), job("h-4", created=2),
            job("h-5", created=3, started="2026-01-01T00:01:30Z", by_hand=True)]


def test_a_hand_started_job_whose_pod_waits_is_no_third_busy_gpu_and_goes_ahead_of_the_queue() -> None:
    world = World(jobs(), {"uid-h-1": JobPods(here=1), "uid-h-2": JobPods(here=1), "uid-h-5": JobPods(unbound=1)})
    decision = world.placer.admit()
    assert decision.busy_machines == {"gpu": 2}  # before: {"gpu": 3}
    assert decision.starts == ()
    told = {name: c["message"] for name, c in world.api.conditions if c["reason"] == "Queued"}
    # h-1 and h-2 end at 00:03:10 (00:03:40 on the minute grid): h-5's pod takes one GPU, h-3 the
    # other; h-4 after either (before: h-3 and h-4 both at 00:03:40, "starting together").
    assert told == {"h-3": "1st on gpu, expected start at 2026-01-01T00:03:40Z (AlloX)",
                    "h-4": "2nd on gpu, expected start at 2026-01-01T00:05:40Z (AlloX)"}
    (said,) = [c for name, c in world.api.conditions if name == "h-5"]
    assert (said["status"], said["reason"]) == ("True", "Unsuspended")
    assert "its pods wait to be bound; AlloX keeps the first gpu machine to free for them" in said["message"]
    # /v1/inspect/allox lists it apart: neither a busy machine nor queued.
    assert world.placer.inspect()["lastDecision"]["awaitingBinding"] == [{"job": "ml/h-5", "kind": "gpu"}]


def test_its_estimate_runs_from_when_its_pod_is_bound() -> None:
    """Its pod bound 200 s after the unsuspend: it runs to then plus 120 s, not to a phantom end
    80 s ago."""
    world = World(jobs(), {"uid-h-1": JobPods(here=1), "uid-h-2": JobPods(here=1), "uid-h-5": JobPods(unbound=1)})
    world.placer.admit()
    world.now = NOW + 180  # h-1 and h-2 overdue, still running; h-5's pod binds (on a GPU freed meanwhile)
    world.pods["uid-h-5"] = JobPods(here=1)
    world.pods["uid-h-1"] = JobPods()
    jobs_now = [j for j in jobs() if j.metadata.name != "h-1"]
    world.placer._jobs = Jobs(jobs_now)
    decision = world.placer.admit()
    # h-5 took the GPU h-1 left: no Job starts. h-2 is overdue (ends any moment) and h-5 runs
    # from its binding, 00:04:40, to 00:06:40 (before: both overdue, from its unsuspend).
    assert decision.starts == ()
    assert decision.busy_machines == {"gpu": 2}
    queue = {q.key: q.expected_start_seconds for q in decision.queue}
    assert queue == {"ml/h-3": 0.0, "ml/h-4": 120.0}
    (bound,) = [c["message"] for name, c in world.api.conditions if name == "h-5"][1:]
    assert bound == "running on gpu: unsuspended by its user, not by AlloX (the kind its pod template asks for)"


def test_a_gpu_freeing_goes_to_the_hand_started_pod_not_to_the_first_queued_job() -> None:
    """h-5 was unsuspended 400 s ago, its pod Pending behind the two busy GPUs. h-1 ends: for the
    moment before kube-scheduler binds h-5's pod there, AlloX sees its GPU idle. Before, h-5
    (past the 300 s NotBound limit) held nothing and h-3, told 1st, was started on that GPU,
    which h-5's pod then took: h-3's pod waited while h-4 could start before it (user26's third
    finding). Now the idle GPU is h-5's: nothing starts, h-3 stays 1st for the next to free."""
    world = World(jobs(), {"uid-h-1": JobPods(here=1), "uid-h-2": JobPods(here=1), "uid-h-5": JobPods(unbound=1)})
    world.now = NOW + 390  # h-5 unsuspended at 00:01:30: 400 s ago
    world.pods = {"uid-h-2": JobPods(here=1), "uid-h-5": JobPods(unbound=1)}
    world.placer._jobs = Jobs([j for j in jobs() if j.metadata.name != "h-1"])
    decision = world.placer.admit()
    assert decision.starts == ()
    assert [(q.key, q.position) for q in decision.queue] == [("ml/h-3", 1), ("ml/h-4", 2)]


def test_a_trial_job_is_told_when_the_gpu_frees_after_the_hand_started_pod_had_it() -> None:
    """One GPU, r on it freeing in 20 s; h unsuspended by hand 180 s ago, its pod Pending. A
    trial Job with no best-effort Job to preempt waits for the first busy GPU to free after h's
    pod: 20 + 120 s. Before: "in ~0 s", h's phantom end 60 s ago."""
    from tests.placer.test_trial_preemptible_capacity import job as trial_job

    api = RecordingApi()
    r = trial_job("r", cpu=600, gpu=120, job_class="guaranteed", running=True)
    h = job("h", created=1, started="2026-01-01T00:00:20Z", by_hand=True)
    t = trial_job("t", cpu=6000, gpu=35, job_class="trial", created=2)
    node = Resources(cpu_millis=5000, memory_bytes=64 * GI, gpus=1)
    PlacerController(
        api=api, jobs=Jobs([r, h, t]), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: NOW + 100, preemption_grace=lambda: None,
        job_pods=lambda owners: {uid: found for uid, found in {"uid-r": JobPods(here=1), "uid-h": JobPods(unbound=1)}.items()
                                 if uid in owners}, unbound_hold_seconds=300,
    ).admit()
    (message,) = [message for name, reason, message in api.events if reason == "Placed" and name == "t"]
    assert "starting when the first busy GPU frees, in ~2 min" in message, message  # 140 s
    assert "in ~0 s" not in message
