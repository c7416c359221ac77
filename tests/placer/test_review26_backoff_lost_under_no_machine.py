"""review26 #5 (afd49e4): a Job suspended again and backed off on gpu whose cpu configuration no
machine of AlloX's holds (NoMachine; or WaitingForMachine, WaitingForQuota) is not queued on
cpu, so afd49e4's Queued wording does not carry its back-off: its NoMachine condition writes
over the SuspendedAgain one, says nothing of the back-off, and a restarted cellfit (or the
replica taking the lead) no longer knows it and starts the Job on the same GPU room at once,
the start afd49e4 fixed for a Job queued on cpu."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.holding import JobPods
from tests.placer.test_backoff24_suspended_again import starts
from tests.placer.test_holding import NOW, placer_with
from tests.placer.test_placer24_suspend_again import LONG_AGO, SuspendingApi

CONFIGURATIONS = {"cpu": {"resources": {"cpu": "64", "memory": "8Gi"}},  # more cores than AlloX's node has
                  "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}


def q(*, suspend: bool, version: str, started: str | None = None, placed: dict[str, str] | None = None) -> Any:
    body = {"metadata": {"name": "q", "namespace": "alice", "uid": "uid-q", "resourceVersion": version, "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(CONFIGURATIONS), "cellfit.io/placement": "gpu",
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 300}, "gpu": {"seconds": 120}})}},
            "spec": {"suspend": suspend, "template": {"metadata": {"labels": {"job-name": "q"}},
                                                      "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}},
            "status": {**({"startTime": started} if started else {}), **({"conditions": [{"type": "Placed", **placed}]} if placed else {})}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_a_restarted_cellfit_keeps_the_gpu_back_off_of_a_job_told_no_machine_on_cpu() -> None:
    api = SuspendingApi()
    placer = placer_with(api, [q(suspend=False, version="7", started=LONG_AGO)], {"uid-q": JobPods(unbound=1)})
    placer.admit()
    assert [name for name, _ in api.suspends] == ["q"]
    placer._jobs.jobs = [q(suspend=True, version="8")]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 1.5
    assert starts(placer.admit()) == []  # backed off on gpu, cpu fits no node
    last = [c for name, c in api.conditions if name == "q"][-1]
    # The condition the restarted cellfit reads the back-off from:
    restarted = placer_with(SuspendingApi(), [q(suspend=True, version="9", placed={k: last[k] for k in ("status", "reason", "message")})], {})
    restarted._clock = lambda: NOW + 60
    assert starts(restarted.admit()) == [], last  # not on the GPU room it was backed off from, before 00:07


def test_the_no_machine_condition_tells_the_back_off_first() -> None:
    api = SuspendingApi()
    placer = placer_with(api, [q(suspend=False, version="7", started=LONG_AGO)], {"uid-q": JobPods(unbound=1)})
    placer.admit()
    placer._jobs.jobs = [q(suspend=True, version="8")]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 1.5
    placer.admit()
    last = [c for name, c in api.conditions if name == "q"][-1]
    assert last["reason"] == "NoMachine", last
    assert last["message"].startswith("backing off on gpu until "), last
    assert "; meanwhile: AlloX's nodes (allox.nodeSelector) cannot start this Job: cellfit.io/configurations.cpu" in last["message"], last
