"""What a user reads of AlloX's starts and refusals, from user21's hand session on the local
control plane (helper-103's successor): five sampled Jobs on one GPU and three CPU slots.

- ij-0 and ij-1 started on CPU while sampling pods held the only GPU, told only "because no GPU
  was free for it": no end, no holder, nothing to tell them when to expect a GPU;
- ij-3 started on CPU (101 s) with the GPU expected free in 25 s and 27 s there: told AlloX's aim,
  not that waiting would have ended it 49 s sooner, so the aim read as a non sequitur;
- ij-huge's NoMachine said "500 cores and 0 GiB a pod": it asked no memory, and the 0 GiB read as
  part of what was too much."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi, controller, job
from tests.placer.test_review_61 import cpu_job, cpu_only_controller


def placed(api: RecordingApi) -> dict[str, str]:
    return {name: message for name, reason, message in api.events if reason == "Placed"}


def busy_gpu_controller(api: RecordingApi, jobs: list[Any]) -> PlacerController:
    """One GPU on AlloX's node, held by a pod AlloX did not start (a sampling pod): none free."""
    free = Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=0)
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"n1": free},
        capacity=lambda: Resources(cpu_millis=9000, memory_bytes=64 * 2**30, gpus=1), clock=lambda: 1767225700.0,
    )


def test_a_job_started_on_cpu_while_others_pods_hold_every_gpu_is_told_who_holds_them() -> None:
    api = RecordingApi()
    (start,) = busy_gpu_controller(api, [job("w", cpu=100, gpu=27)]).admit().starts
    assert start.kind == "cpu"
    message = placed(api)["w"]
    assert message.startswith("started on cpu: AlloX chose cpu (estimated 100 s; gpu 27 s) because no GPU was free for it")
    # Not "none exists": the holders are named, and why no time to wait is given.
    assert "pods AlloX did not start" in message and "sampling pods" in message
    assert "no end was known" in message


def test_a_cluster_without_gpus_is_not_said_to_have_them_held_by_others() -> None:
    api = RecordingApi()
    placer = controller(api, [job("w", cpu=100, gpu=27)], gpus=0)
    placer.admit()
    assert "pods AlloX did not start" not in placed(api)["w"]


def test_a_job_that_would_have_ended_sooner_waiting_is_told_by_how_much() -> None:
    # The GPU frees in 500 s; w2 there would end at 527 s, on cpu at 540 s: 13 s sooner waiting.
    api = RecordingApi()
    running = job("r", cpu=6000, gpu=600, suspend=False, placement="gpu", started="2026-01-01T00:00:00Z", version="7")
    placer = controller(api, [running, job("w1", cpu=6000, gpu=30, created=1), job("w2", cpu=540, gpu=27, created=2)], gpus=1)
    assert {(s.key, s.kind) for s in placer.admit().starts} == {("alice/w2", "cpu")}
    message = placed(api)["w2"]
    assert "the first expected free in 8 min" in message
    assert "waiting for it would have ended this Job ~13 s sooner" in message
    assert message.endswith("not each Job's own")


def cores_only_job(name: str, *, cores: str) -> Any:
    """A suspended Job whose only configuration asks cores and no memory, with its estimate."""
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": cores}}}),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_no_machine_names_no_memory_the_configuration_did_not_ask_for() -> None:
    api = RecordingApi()
    cpu_only_controller(api, [cores_only_job("huge", cores="500")], cores=64).admit()
    told = dict(api.conditions)["huge"]
    assert told["reason"] == "NoMachine"
    assert "cellfit.io/configurations.cpu.resources, 500 cores a pod" in told["message"]
    assert "GiB" not in told["message"]


def test_no_machine_still_names_the_memory_a_configuration_asked_for() -> None:
    api = RecordingApi()
    cpu_only_controller(api, [cpu_job("typo", cores="1000", created=0)], cores=8).admit()
    assert "1000 cores and 1 GiB a pod" in dict(api.conditions)["typo"]["message"]
