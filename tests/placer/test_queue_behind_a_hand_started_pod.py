"""What a queued Job is told (its ``Placed=False``, reason ``Queued``, condition) where a Job its
user unsuspended by hand, its pods not bound yet, takes the first machine of its kind to free
ahead of AlloX's queue (82e475f, ``RunningJob.awaiting``): the expected start counts that claim
(the machine is busy from then for the hand-started Job's estimate). The position numbers
AlloX's queue, which the hand-started Job is not in (``/v1/inspect/allox`` lists it under
``lastDecision.awaitingBinding``, and it is told it goes "ahead of its queue"): the first queued
Job is "1st on gpu" and starts after it. Each case is set beside the same cluster without the
hand-started Job, which tells the queue another time."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from estimator.objects import JOB_DECODER
from placer.holding import JobPods
from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_hand_unsuspended_awaits_a_machine import NOW, job

HAND = job("h-5", created=3, started="2026-01-01T00:01:30Z", by_hand=True)  # its GPU pod Pending, 120 s once bound


def queued_told(jobs: list[Any], pods: dict[str, JobPods], *, gpus: int, now: float = NOW, starts: tuple[str, ...] = ()) -> dict[str, str]:
    """The Queued messages one pass writes, on one node of ``gpus`` GPUs and no CPU slot, where
    it starts ``starts``."""
    api = RecordingApi()
    node = Resources(cpu_millis=3000, memory_bytes=64 * 2**30, gpus=gpus)
    decision = PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: now,
        job_pods=lambda owners: {uid: found for uid, found in pods.items() if uid in owners}, unbound_hold_seconds=300,
    ).admit()
    assert tuple(start.key for start in decision.starts) == starts
    return {name: c["message"] for name, c in api.conditions if c["reason"] == "Queued"}


def parallel(found: Any, pods: int) -> Any:
    body = json.loads(msgspec.json.encode(found))
    body["spec"]["parallelism"] = pods
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_the_idle_gpu_its_pod_waits_beside_is_no_start_for_the_first_queued_job() -> None:
    """One GPU, idle, h-5's pod on its way to it: h-3 starts once h-5's 120 s end (00:03:40),
    not now (without h-5, h-3 is started on it)."""
    alone = queued_told([job("h-3", created=2), job("h-4", created=2)], {}, gpus=1, starts=("ml/h-3",))
    assert alone == {"h-4": "1st on gpu, expected start at 2026-01-01T00:03:40Z (AlloX)"}
    told = queued_told([job("h-3", created=2), job("h-4", created=2), HAND], {"uid-h-5": JobPods(unbound=1)}, gpus=1)
    assert told == {"h-3": "1st on gpu, expected start at 2026-01-01T00:03:40Z (AlloX)",
                    "h-4": "2nd on gpu, expected start at 2026-01-01T00:05:40Z (AlloX)"}


def test_a_gpu_whose_job_runs_past_its_estimate_goes_to_its_pod_first() -> None:
    """One GPU, h-1 on it past its estimate at 00:05:00: h-3 is not told it starts any moment
    (h-1's GPU is h-5's when it frees), but at h-5's end, 120 s from now."""
    h1 = job("h-1", created=1, placement="gpu", started="2026-01-01T00:01:10Z")
    pods = {"uid-h-1": JobPods(here=1)}
    alone = queued_told([h1, job("h-3", created=2)], pods, gpus=1, now=NOW + 200)
    assert alone == {"h-3": "1st on gpu, expected to start any moment, its machine's Job running past its estimate (AlloX)"}
    told = queued_told([h1, job("h-3", created=2), HAND], {**pods, "uid-h-5": JobPods(unbound=1)}, gpus=1, now=NOW + 200)
    assert told == {"h-3": "1st on gpu, expected start at 2026-01-01T00:07:00Z (AlloX)"}


def test_a_queued_job_of_two_pods_waits_for_two_gpus_after_its_pod_took_one() -> None:
    """Two GPUs freeing at 00:03:40 (on the ω grid): h-6 (2 pods at once) starts then without
    h-5; with h-5's pod taking one of them, at h-5's end, 00:05:40."""
    running = [job("h-1", created=1, placement="gpu", started="2026-01-01T00:01:10Z"),
               job("h-2", created=1, placement="gpu", started="2026-01-01T00:01:40Z")]
    pods = {"uid-h-1": JobPods(here=1), "uid-h-2": JobPods(here=1)}
    h6 = parallel(job("h-6", created=2), 2)
    assert queued_told([*running, h6], pods, gpus=2) == {"h-6": "1st on gpu, expected start at 2026-01-01T00:03:40Z (AlloX)"}
    told = queued_told([*running, h6, HAND], {**pods, "uid-h-5": JobPods(unbound=1)}, gpus=2)
    assert told == {"h-6": "1st on gpu, expected start at 2026-01-01T00:05:40Z (AlloX)"}


def test_each_pod_of_a_hand_started_job_of_two_takes_a_gpu_ahead_of_the_queue() -> None:
    """h-5 has 2 pods, both Pending; two GPUs freeing at 00:03:40: they take both, and h-3 and
    h-4 start together at h-5's end (without h-5: at 00:03:40)."""
    running = [job("h-1", created=1, placement="gpu", started="2026-01-01T00:01:10Z"),
               job("h-2", created=1, placement="gpu", started="2026-01-01T00:01:40Z")]
    pods = {"uid-h-1": JobPods(here=1), "uid-h-2": JobPods(here=1)}
    queued = [job("h-3", created=2), job("h-4", created=2)]
    assert queued_told([*running, *queued], pods, gpus=2) == {
        "h-3": "1st on gpu, expected start at 2026-01-01T00:03:40Z (AlloX)",
        "h-4": "2nd on gpu, starting together with the 1st, expected start at 2026-01-01T00:03:40Z (AlloX)"}
    told = queued_told([*running, *queued, parallel(HAND, 2)], {**pods, "uid-h-5": JobPods(unbound=2)}, gpus=2)
    assert told == {"h-3": "1st on gpu, expected start at 2026-01-01T00:05:40Z (AlloX)",
                    "h-4": "2nd on gpu, starting together with the 1st, expected start at 2026-01-01T00:05:40Z (AlloX)"}
