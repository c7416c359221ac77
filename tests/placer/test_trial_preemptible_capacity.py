"""Trial Jobs against one best-effort Job: each trial start that counts on FitGpp preempting a
best-effort pod takes that pod, so the next trial Job (in the same pass or a later one, while its
victim is still leaving or its pod waits nominated) sees what is really left, and what it is told
says which case applies (the defect: two trial Jobs on the one GPU were both told FitGpp would
preempt for them; the second's pod then pended with "Preemption is not helpful" and no word why)."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.holding import JobPods
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.matching.admission import BestEffortGpus
from tests.placer.test_controller import Jobs, RecordingApi

CONFIGURATIONS = {"cpu": {"resources": {"cpu": "4", "memory": "8Gi"}},
                  "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
NOW = 1767225700.0  # 2026-01-01T00:01:40Z
STARTED = "2026-01-01T00:01:40Z"


def job(name: str, *, cpu: float, gpu: float, job_class: str, created: int = 0, running: bool = False) -> Any:
    """A suspended Job (or, ``running``, one started on the GPU configuration at NOW)."""
    annotations = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": cpu}, "gpu": {"seconds": gpu}})}
    if running:
        annotations["cellfit.io/placement"] = "gpu"
    labels = {"cellfit.io/job-class": job_class}
    body = {"metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "annotations": annotations, "labels": labels,
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z"},
            "spec": {"suspend": not running,
                     "template": {"metadata": {"labels": {"job-name": name, **labels}},
                                  "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}},
            "status": {"startTime": STARTED} if running else {}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def best_effort() -> Any:
    """The best-effort Job on the one GPU, an hour from its end."""
    return job("be", cpu=7200, gpu=3600, job_class="best-effort", running=True)


def trial(name: str, *, created: int, cpu: float = 10 * 60, running: bool = False) -> Any:
    return job(name, cpu=cpu, gpu=35, job_class="trial", created=created, running=running)


def placer(api: RecordingApi, jobs: list[Any], *, pods: dict[str, JobPods], victims: BestEffortGpus | None = None,
           grace: float | None = None) -> PlacerController:
    """One GPU and one CPU slot; ``pods`` per Job UID as the cluster cache holds them."""
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1)},
        capacity=lambda: Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1),
        clock=lambda: NOW,
        preemption_grace=lambda: grace,
        **({} if victims is None else {"best_effort_gpus": lambda: victims}),
        job_pods=lambda owners: {uid: found for uid, found in pods.items() if uid in owners},
    )


def placed(api: RecordingApi) -> dict[str, str]:
    return {name: message for name, reason, message in api.events if reason == "Placed"}


def kinds(api: RecordingApi) -> dict[str, str]:
    return {name: next(op["value"] for op in ops if op["path"] == "/metadata/annotations/cellfit.io~1placement")
            for name, ops in api.patches}


BOUND = {"uid-be": JobPods(here=1)}


def test_two_trial_jobs_in_one_pass_share_one_best_effort_job_only_once():
    api = RecordingApi()
    # The session's case: no CPU slot is worth it (10 min), the one GPU held by a best-effort
    # Job whose pod checkpoints in 30 s.
    placer(api, [best_effort(), trial("t1", created=1), trial("t2", created=2)], pods=BOUND,
           victims=BestEffortGpus(graces=(30.0,))).admit()
    assert kinds(api) == {"t1": "gpu", "t2": "gpu"}
    told = placed(api)
    assert "counting the checkpoint of the best-effort Job its pod preempts" in told["t1"] and "done in ~65 s" in told["t1"]
    # t2 gets the GPU when t1 is done with it (30 s + 35 s), and is told so, not that a
    # preemption is coming for it.
    assert "its pod preempts" not in told["t2"]
    assert "no best-effort Job is left to preempt" in told["t2"]
    assert "when the first busy GPU frees, in ~65 s" in told["t2"] and "done in ~100 s" in told["t2"]


def test_three_trial_jobs_in_one_pass_the_third_takes_the_cpu_slot_when_it_ends_sooner():
    api = RecordingApi()
    # CPU runs of 2 min: t1 ends at ~65 s on the preempted GPU, t2 at ~100 s after t1, t3 would
    # end at ~135 s after t2: the CPU slot (120 s) is sooner.
    jobs = [best_effort(), *(trial(f"t{i}", created=i, cpu=120) for i in (1, 2, 3))]
    placer(api, jobs, pods=BOUND, grace=30.0).admit()
    assert kinds(api) == {"t1": "gpu", "t2": "gpu", "t3": "cpu"}
    told = placed(api)
    assert "counting the checkpoint of the best-effort Job its pod preempts" in told["t1"]
    assert "its pod preempts" not in told["t2"] and "when the first busy GPU frees, in ~65 s" in told["t2"]
    assert "trial Job, done in ~2 min; on gpu it would be done in ~2 min, after the first busy GPU frees" in told["t3"]


def test_a_trial_job_started_in_an_earlier_pass_keeps_its_best_effort_job_while_its_pod_waits():
    # Pass 2: t1 was started on the GPU counting on the one best-effort pod, whose preemption has
    # not begun (t1's pod is not bound yet); the cache still shows that pod preemptible.
    api = RecordingApi()
    jobs = [best_effort(), trial("t1", created=1, running=True), trial("t2", created=2)]
    placer(api, jobs, pods={**BOUND, "uid-t1": JobPods(unbound=1)}, victims=BestEffortGpus(graces=(30.0,))).admit()
    told = placed(api)
    assert kinds(api) == {"t2": "gpu"}
    assert "its pod preempts" not in told["t2"] and "no best-effort Job is left to preempt" in told["t2"]
    # The same with the single grace period the extender hands over when it does not count pods.
    api = RecordingApi()
    placer(api, jobs, pods={**BOUND, "uid-t1": JobPods(unbound=1)}, grace=30.0).admit()
    assert "its pod preempts" not in placed(api)["t2"]


def test_a_victim_still_leaving_is_the_waiting_trial_pods_and_another_best_effort_pod_is_left():
    # t1's pod is nominated; its victim is terminating (leaving), so the second best-effort pod
    # is still FitGpp's to preempt for t2.
    api = RecordingApi()
    jobs = [best_effort(), trial("t1", created=1, running=True), trial("t2", created=2)]
    placer(api, jobs, pods={**BOUND, "uid-t1": JobPods(unbound=1)}, victims=BestEffortGpus(graces=(30.0,), leaving=1)).admit()
    assert "counting the checkpoint of the best-effort Job its pod preempts" in placed(api)["t2"]
    # Without the second one, nothing is left for t2.
    api = RecordingApi()
    placer(api, jobs, pods={**BOUND, "uid-t1": JobPods(unbound=1)}, victims=BestEffortGpus(leaving=1)).admit()
    assert "no best-effort Job is left to preempt" in placed(api)["t2"]


def test_a_gpu_held_by_another_trial_job_is_waited_for_not_preempted():
    # t1 runs on the one GPU (bound); no best-effort pod holds a GPU: FitGpp preempts nothing.
    api = RecordingApi()
    jobs = [trial("t1", created=1, running=True), trial("t2", created=2)]
    placer(api, jobs, pods={"uid-t1": JobPods(here=1)}, victims=BestEffortGpus()).admit()
    told = placed(api)
    assert kinds(api) == {"t2": "gpu"}
    assert "its pod preempts" not in told["t2"]
    assert "when the first busy GPU frees, in ~35 s" in told["t2"] and "done in ~70 s" in told["t2"]


def test_a_trial_job_started_on_an_idle_gpu_owes_no_best_effort_job_while_its_pod_is_on_its_way():
    # Two GPUs, one idle, one held by the best-effort Job. t1 takes the idle one; the next pass
    # comes before its pod is bound (the unsuspend wakes it): t2 may still count on FitGpp.
    api = RecordingApi()
    jobs = [best_effort(), trial("t1", created=1)]
    pods = {**BOUND}
    live = PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=6000, memory_bytes=64 * 2**30, gpus=2)},
        capacity=lambda: Resources(cpu_millis=6000, memory_bytes=64 * 2**30, gpus=2),
        clock=lambda: NOW, best_effort_gpus=lambda: BestEffortGpus(graces=(30.0,)),
        job_pods=lambda owners: {uid: found for uid, found in pods.items() if uid in owners},
    )
    live.admit()
    assert "trial Job, on a free GPU, done in ~35 s" in placed(api)["t1"]
    jobs.append(trial("t2", created=2))
    live.admit()
    assert "counting the checkpoint of the best-effort Job its pod preempts" in placed(api)["t2"]
