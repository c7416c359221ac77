"""review29 #2 (MEDIUM, fixed: _awaited_pool reads the template as the next start leaves it): a Job suspended again after a placement in a kind whose node selector names a pool
of estimator.nodesMayJoin is started in a configuration no node its own selector admits holds
(96b6382's defect, by another path): PlacerController._within_selected_nodes judges the kind by
the selector its next start gives (estimator.sample_pod.unplaced: the earlier placement's
selector taken out), but asks _awaited_pool whether only a listed pool runs it, and
_awaited_pool (placer/controller.py) reads the template's nodeSelector as it stands, the earlier
placement's pool=gpu-big still in it. So the cpu configuration (size=small, 32 cores, on 16-core
nodes) 'awaits gpu-big', is not judged, and AlloX starts it on the 64-core node of another pool;
its pod, stripped of pool=gpu-big and selecting size=small, never binds (NotBound, suspended
again, backed off, again)."""

from __future__ import annotations

import json
from typing import Any, Mapping

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_may_join_holds_no_phantom_machine import BIG, NOW, SMALL

GPU_POOL = {"pool": "gpu-big"}
SMALL_NODES = {"size": "small"}
NODES = {"small-0": SMALL, "small-1": SMALL, "big-0": BIG}
LABELS: Mapping[str, Mapping[str, str]] = {"small-0": SMALL_NODES, "small-1": SMALL_NODES, "big-0": {"pool": "cpu-big"}}


def placer(api: RecordingApi, jobs: list[Any]) -> PlacerController:
    def carrying(selector: Mapping[str, str]) -> dict[str, Resources]:
        return {name: size for name, size in NODES.items() if all(LABELS.get(name, {}).get(k) == v for k, v in selector.items())}

    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: dict(NODES), capacity=lambda: sum(NODES.values(), Resources()), clock=lambda: NOW,
        allocatable_by_node=lambda: dict(NODES), allocatable_carrying=carrying,
        job_pods=lambda owners: {}, unbound_hold_seconds=300, nodes_may_join=[GPU_POOL], joining_limit_seconds=1800,
    )


def suspended_again() -> Any:
    configurations = {"cpu": {"resources": {"cpu": "32", "memory": "8Gi"}, "nodeSelector": SMALL_NODES},
                      "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}, "nodeSelector": GPU_POOL}}
    text = json.dumps(configurations)
    body = {
        "metadata": {"name": "again", "namespace": "ml", "uid": "uid-again", "resourceVersion": "9", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"cellfit.io/configurations": text, "cellfit.io/placement": "gpu",
                                     "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
        "spec": {"suspend": True, "template": {
            # placed on gpu (in pool=gpu-big), then suspended again: the template as that placement left it
            "metadata": {"labels": {"cellfit.io/placement": "gpu"}, "annotations": {"cellfit.io/configurations": text}},
            "spec": {"nodeSelector": GPU_POOL, "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1"}}}]}}},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_a_configuration_its_own_selector_leaves_no_node_for_is_not_started() -> None:
    api = RecordingApi()
    decision = placer(api, [suspended_again()]).admit()
    assert decision.starts == (), api.conditions
    assert [c["reason"] for _, c in api.conditions] == ["NoMachine"]
