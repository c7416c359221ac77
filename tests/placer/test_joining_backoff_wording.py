"""c5f2255 gives a Job whose configuration only a pool of estimator.nodesMayJoin runs
estimator.pendingLimitSeconds (1800 s) before suspending it again, and its SuspendedAgain Event
says so ("within 1800 s (estimator.pendingLimitSeconds) (no node of pool=cpu-big joined ...").
The back-off is honoured (held up), but the next pass's Placed condition, the one the user and
`kubectl cellfit why` read while it is backed off, says "cpu start failed: no pod was bound
within 300 s", the NotBound limit it was not held to, and nothing of the pool that never joined.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import _BACKED_OFF_MESSAGE, _BACKING_OFF_SAID, PlacerController
from placer.holding import JobPods
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs
from tests.placer.test_holding import NOW
from tests.placer.test_placer24_suspend_again import SuspendingApi

GI = 2**30
SMALL = Resources(cpu_millis=16_000, memory_bytes=64 * GI, gpus=0)
CONFIGURATIONS = {"cpu": {"resources": {"cpu": "32", "memory": "8Gi"}, "nodeSelector": {"pool": "cpu-big"}}}


def scale(*, suspend: bool, version: str, started: float | None = None, placed: dict[str, str] | None = None) -> Any:
    annotations = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS), "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 300}})}
    if not suspend:
        annotations["cellfit.io/placement"] = "cpu"
    status: dict[str, Any] = (
        {} if started is None else {"startTime": datetime.datetime.fromtimestamp(started, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    )
    if placed is not None:
        status["conditions"] = [{"type": "Placed", "status": "False", **placed}]
    body = {
        "metadata": {
            "name": "scale",
            "namespace": "ml",
            "uid": "uid-scale",
            "resourceVersion": version,
            "annotations": annotations,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"suspend": suspend, "template": {"spec": {"containers": [{"name": "c"}]}}},
        "status": status,
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def placer_for(api: SuspendingApi, jobs: Jobs, pods: dict[str, JobPods], now: list[float]) -> PlacerController:
    by_node = {"small-0": SMALL, "small-1": SMALL}
    return PlacerController(
        api=api,
        jobs=jobs,
        settings=AlloxSettings(alpha=1.0, solver_process=False),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: by_node,
        capacity=lambda: sum(by_node.values(), Resources()),
        clock=lambda: now[0],
        allocatable_by_node=lambda: by_node,
        job_pods=lambda owners: {uid: found for uid, found in pods.items() if uid in owners},
        unbound_hold_seconds=300,
        nodes_may_join=[{"pool": "cpu-big"}],
        joining_limit_seconds=1800,
    )


def test_a_joining_job_backed_off_is_told_the_wait_it_had_and_the_pool_that_never_joined() -> None:
    api = SuspendingApi()
    now = [NOW]
    pods = {"uid-scale": JobPods(unbound=1)}
    jobs = Jobs([scale(suspend=False, version="7", started=NOW - 1900)])  # started 1900 s ago, its pods never bound
    placer = placer_for(api, jobs, pods, now)
    placer.admit()
    assert [name for name, _ in api.suspends] == ["scale"]  # past the 1800 s: suspended again, backed off on cpu
    backed_off = [c for _, c in api.conditions][-1]
    jobs.jobs = [scale(suspend=True, version="8")]
    pods.clear()
    now[0] = NOW + 1.5
    api.conditions.clear()
    placer.admit()
    restarted = [c for _, c in api.conditions if c["reason"] == "Started"]
    assert restarted == [], (backed_off, restarted)  # held up: the back-off is honoured
    (told,) = [c["message"] for _, c in api.conditions]
    assert "within 300 s" not in told and "1800 s" in told and "pool=cpu-big" in told, told

    # A restarted cellfit reads the back-off back from that condition: still held up.
    api = SuspendingApi()
    jobs = Jobs([scale(suspend=True, version="8", placed={"reason": "SuspendedAgain", "message": told})])
    restarted_placer = placer_for(api, jobs, {}, [NOW + 60])
    restarted_placer.admit()
    assert api.patches == [] and [c for _, c in api.conditions if c["reason"] == "Started"] == []
    assert restarted_placer._backed_off["uid-scale"][1]["cpu"][0] == 1


def test_the_back_off_said_before_a_queue_place_names_the_pool_and_reads_back() -> None:
    placer = placer_for(SuspendingApi(), Jobs([]), {}, [NOW])
    said = placer._backing_off_said("cpu", times=2, until=NOW + 600, pool={"pool": "cpu-big"})
    assert "within 1800 s" in said and "pool=cpu-big" in said, said
    (found,) = _BACKING_OFF_SAID.finditer(said)
    assert (found["kind"], found["times"]) == ("cpu", "2")
    (found,) = _BACKED_OFF_MESSAGE.finditer(placer._backed_off_message("cpu", times=3, until=NOW + 600, pool={"pool": "cpu-big"}))
    assert (found["kind"], found["times"]) == ("cpu", "3")
