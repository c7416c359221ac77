"""Review of AlloX admission (helper-72): what a Job's pods ask beside its configuration (init
containers, sidecars, pod-level resources, overhead), a GPU configuration whose cores or memory
no node holds, pods of several GPUs, running pods larger than the CPU slot, the cores a GPU
configuration asks beside its GPU, and what a long-lived controller keeps of Jobs that are
gone."""

from __future__ import annotations

import json
from typing import Any, Sequence

import pytest

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.guarantee import gpus_per_pod
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.matching.admission import WaitingJob
from scheduler.matching.capacity import NodeResources
from scheduler.matching.model import Demand
from tests.placer.test_controller import Jobs, RecordingApi, controller, job
from tests.placer.test_review_61 import cpu_only_controller


def gpu_controller(api: RecordingApi, jobs: list[Any], *, gpus: Sequence[int], cores: int = 16, memory_gib: int = 64) -> PlacerController:
    """A controller over nodes ``n0``, ``n1``, ... with ``gpus[i]`` GPUs free each (and
    ``cores``, ``memory_gib`` each)."""
    nodes = {f"n{index}": Resources(cpu_millis=cores * 1000, memory_bytes=memory_gib * 2**30, gpus=count) for index, count in enumerate(gpus)}
    total = Resources(cpu_millis=cores * 1000 * len(gpus), memory_bytes=memory_gib * 2**30 * len(gpus), gpus=sum(gpus))
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: nodes, capacity=lambda: total, clock=lambda: 1767225700.0,
    )


def test_a_job_deleted_before_the_watch_shows_its_start_is_forgotten() -> None:
    api = RecordingApi()
    started = job("brief", created=0)
    placer = controller(api, [started], gpus=1)
    (start,) = placer.admit().starts
    assert start.key == "alice/brief"
    # Its user deletes it at once: the watch never shows it unsuspended, only gone. Its UID was
    # kept for the life of the process, one per such Job.
    placer._jobs.jobs = []  # type: ignore[attr-defined]
    placer.admit()
    assert placer._started == {}


def job_with_pod(name: str, *, configurations: dict[str, Any], pod: dict[str, Any], estimate: dict[str, float]) -> Any:
    """A suspended, estimated Job whose pod template's spec is ``pod``."""
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(configurations),
                                         "cellfit.io/estimate": json.dumps({kind: {"seconds": s} for kind, s in estimate.items()})}},
            "spec": {"suspend": True, "template": {"spec": pod}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


FOUR_CORES = {"cpu": {"resources": {"cpu": "4", "memory": "1Gi"}}}
TRAINER = {"name": "trainer"}


@pytest.mark.parametrize(("pod", "cores"), [
    # An init container runs alone before the trainer: the pod asks the larger of the two.
    ({"initContainers": [{"name": "fetch", "resources": {"requests": {"cpu": "8"}}}], "containers": [TRAINER]}, 8),
    # A sidecar (an init container that keeps running) runs beside it: their sum.
    ({"initContainers": [{"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "3"}}}],
      "containers": [TRAINER]}, 7),
    # Pod-level resources (KEP-2837) are what kube-scheduler counts of the pod's CPU.
    ({"resources": {"requests": {"cpu": "9"}}, "containers": [TRAINER]}, 9),
    # The pod's overhead (its RuntimeClass's) comes on top.
    ({"overhead": {"cpu": "2"}, "containers": [TRAINER]}, 6),
])
def test_a_cpu_configurations_demand_is_the_pod_kube_scheduler_counts(pod: dict[str, Any], cores: int) -> None:
    # Counted as the configuration per container alone (4 cores), each of these was started on
    # a node of 5 cores its pod could never fit.
    api = RecordingApi()
    waiting = job_with_pod("init", configurations=FOUR_CORES, pod=pod, estimate={"cpu": 100})
    decision = cpu_only_controller(api, [waiting], cores=cores - 1).admit()
    assert decision.starts == () and api.patches == []
    assert decision.unplaceable == ("alice/init",)
    told = dict(api.conditions)["init"]
    assert told["reason"] == "NoMachine" and f"{cores:g} cores" in told["message"]
    (start,) = cpu_only_controller(RecordingApi(), [waiting], cores=cores).admit().starts
    assert start.key == "alice/init"


def test_a_gpu_configurations_pod_counts_its_init_containers_gpus() -> None:
    # An init container that checks the GPUs asks two of them: the pod holds 2 GPUs while it
    # runs, which a node with one GPU free never gives.
    gpu = {"gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    pod = {"initContainers": [{"name": "probe", "resources": {"limits": {"nvidia.com/gpu": "2"}}}], "containers": [TRAINER]}
    waiting = job_with_pod("probe", configurations=gpu, pod=pod, estimate={"gpu": 100})
    decision = gpu_controller(RecordingApi(), [waiting], gpus=[1, 1]).admit()
    assert decision.starts == () and decision.unplaceable == ("alice/probe",)
    (start,) = gpu_controller(RecordingApi(), [waiting], gpus=[2]).admit().starts
    assert start.key == "alice/probe"


@pytest.mark.parametrize(("resources", "field", "asked"), [
    ({"nvidia.com/gpu": "1", "cpu": "24", "memory": "1Gi"}, "cellfit.io/configurations.gpu.resources.cpu", "24 cores"),
    ({"nvidia.com/gpu": "1", "cpu": "1", "memory": "100Gi"}, "cellfit.io/configurations.gpu.resources.memory", "100 GiB"),
])
def test_a_gpu_configuration_whose_cores_or_memory_no_node_holds_is_refused_naming_the_field(
    resources: dict[str, str], field: str, asked: str
) -> None:
    # Every node has a GPU free but 16 cores and 64 GiB: the pod never binds. It was started all
    # the same (its pods pending until released as NotBound 300 s later), pass after pass.
    api = RecordingApi()
    waiting = job_with_pod("wide", configurations={"gpu": {"resources": resources}}, pod={"containers": [TRAINER]}, estimate={"gpu": 100})
    decision = gpu_controller(api, [waiting], gpus=[1, 2]).admit()
    assert decision.starts == () and api.patches == []
    assert decision.unplaceable == ("alice/wide",)
    told = dict(api.conditions)["wide"]
    assert told["reason"] == "NoMachine" and field in told["message"] and asked in told["message"]
    ((name, reason, message),) = api.events
    assert (name, reason) == ("wide", "NoMachine") and field in message


def test_a_job_whose_gpu_configuration_no_node_holds_runs_on_its_cpu_configuration() -> None:
    # Its GPU configuration would finish sooner, but no node holds 24 cores beside a GPU.
    configurations = {"gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "24"}}, "cpu": {"resources": {"cpu": "4", "memory": "1Gi"}}}
    waiting = job_with_pod("both", configurations=configurations, pod={"containers": [TRAINER]}, estimate={"gpu": 10, "cpu": 1000})
    (start,) = gpu_controller(RecordingApi(), [waiting], gpus=[1]).admit().starts
    assert (start.key, start.kind) == ("alice/both", "cpu")
    # On a node that holds it, it runs on the GPU.
    (start,) = gpu_controller(RecordingApi(), [waiting], gpus=[1], cores=32).admit().starts
    assert (start.key, start.kind) == ("alice/both", "gpu")


def test_a_gpu_configuration_needs_its_cores_on_a_node_with_its_gpus_free() -> None:
    # n0 has 32 cores but no GPU free; n1 a GPU but 16 cores: no node holds 1 GPU and 24 cores.
    configurations = {"gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "24"}}}
    waiting = job_with_pod("apart", configurations=configurations, pod={"containers": [TRAINER]}, estimate={"gpu": 10})
    nodes = {"n0": Resources(cpu_millis=32000, memory_bytes=64 * 2**30, gpus=0),
             "n1": Resources(cpu_millis=16000, memory_bytes=64 * 2**30, gpus=1)}
    placer = PlacerController(
        api=RecordingApi(), jobs=Jobs([waiting]), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: nodes,
        capacity=lambda: Resources(cpu_millis=48000, memory_bytes=128 * 2**30, gpus=1), clock=lambda: 1767225700.0,
    )
    decision = placer.admit()
    assert decision.starts == () and decision.unplaceable == ("alice/apart",)


def test_a_gpu_configuration_no_node_holds_sizes_no_virtual_clusters_machine() -> None:
    # 4 GPUs and 64 cores a pod on nodes of 16 cores: it runs nowhere, so it must not make each
    # of the VC's GPU machines 4 GPUs (the VC's 1-GPU Jobs would get a quarter of the machines).
    free = [NodeResources(name="n1", cpu=16, gpu=8, memory=64)]
    wide = WaitingJob(key="a/wide", user="a", arrival=0, seconds={"gpu": 10}, pool="vision",
                      demand={"gpu": Demand(gpu=4, cpu=64, memory=1)})
    small = WaitingJob(key="a/small", user="a", arrival=1, seconds={"gpu": 10}, pool="vision",
                       demand={"gpu": Demand(gpu=1, cpu=2, memory=1)})
    assert gpus_per_pod([wide, small], free=free).get("vision", 1) == 1


FOUR_GPUS = {"gpu": {"resources": {"nvidia.com/gpu": "4", "cpu": "1", "memory": "1Gi"}}}
ONE_GPU = {"gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}}}


def gpu_job(name: str, configurations: dict[str, Any], *, created: int = 0, running_since: str | None = None) -> Any:
    """A GPU-only Job of one container; started by AlloX at ``running_since`` when given."""
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(configurations),
                                         "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 600}}),
                                         **({"cellfit.io/placement": "gpu"} if running_since else {})}},
            "spec": {"suspend": not running_since, "template": {"spec": {"containers": [TRAINER]}}},
            "status": {"startTime": running_since} if running_since else {}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_pods_of_four_gpus_take_four_gpus_of_one_node() -> None:
    # One node with 4 GPUs free holds one such pod: as four machines of one GPU both Jobs were
    # started, and the second's pod never bound.
    api = RecordingApi()
    decision = gpu_controller(api, [gpu_job("first", FOUR_GPUS, created=0), gpu_job("second", FOUR_GPUS, created=1)], gpus=[4]).admit()
    (start,) = decision.starts
    assert [name for name, _ in api.patches] == [start.key.split("/")[1]]
    (queued,) = decision.queue
    assert {start.key, queued.key} == {"alice/first", "alice/second"} and queued.expected_start_seconds > 0


def test_a_running_job_of_four_gpus_a_pod_holds_four_gpus() -> None:
    # Its pod holds 4 of the node's 8 GPUs until it ends; counted as one machine, the 1-GPU Jobs
    # were started on 7 GPUs, 3 of them the running pod's.
    running = gpu_job("wide", FOUR_GPUS, running_since="2026-01-01T00:01:00Z")
    waiting = [gpu_job(f"small{index}", ONE_GPU, created=index) for index in range(6)]
    decision = gpu_controller(RecordingApi(), [running, *waiting], gpus=[8]).admit()
    assert decision.busy_machines == {"gpu": 4}
    assert len(decision.starts) == 4


def test_a_running_cpu_job_larger_than_the_cpu_slot_holds_as_many_slots_as_its_pod_fills() -> None:
    # The slot is sized for the 2-core Jobs queued now; the running pod of 8 cores (its cores
    # counted free, as it is a busy machine of its own) held one slot, and 7 Jobs of 2 cores were
    # started on the node's 16 cores beside it.
    configurations = {"cpu": {"resources": {"cpu": "8", "memory": "1Gi"}}}
    body = {"metadata": {"name": "big", "namespace": "alice", "uid": "uid-big", "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/placement": "cpu",
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 6000}})}},
            "spec": {"suspend": False, "template": {"spec": {"containers": [TRAINER]}}}, "status": {"startTime": "2026-01-01T00:01:00Z"}}
    running = JOB_DECODER.decode(json.dumps(body).encode())
    small = {"cpu": {"resources": {"cpu": "2", "memory": "1Gi"}}}
    waiting = [job_with_pod(f"small{index}", configurations=small, pod={"containers": [TRAINER]}, estimate={"cpu": 100})
               for index in range(8)]
    decision = cpu_only_controller(RecordingApi(), [running, *waiting], cores=16).admit()
    assert decision.busy_machines == {"cpu": 4}
    assert len(decision.starts) == 4


def test_the_cores_a_gpu_configuration_asks_beside_each_gpu_are_kept_from_the_cpu_slots() -> None:
    # One core was kept beside each GPU, whatever its configurations ask: a GPU Job of 8 cores
    # and three CPU Jobs of 4 were all started on the node's 16 cores, and one pod never bound.
    gpu = {"gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "1Gi"}}}
    waiting = [job_with_pod("trainer", configurations=gpu, pod={"containers": [TRAINER]}, estimate={"gpu": 100}),
               *(job_with_pod(f"cpu{index}", configurations=FOUR_CORES, pod={"containers": [TRAINER]}, estimate={"cpu": 100})
                 for index in range(3))]
    decision = gpu_controller(RecordingApi(), waiting, gpus=[1], cores=16).admit()
    kinds = sorted(start.kind for start in decision.starts)
    assert kinds == ["cpu", "cpu", "gpu"]


def test_the_memory_a_gpu_configuration_asks_beside_each_gpu_is_kept_from_the_cpu_slots() -> None:
    # The node's memory was cut into CPU slots whole: a GPU Job of 48 GiB and three CPU Jobs of
    # 8 GiB were all started on its 64 GiB, and one pod never bound.
    gpu = {"gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "48Gi"}}}
    cpu = {"cpu": {"resources": {"cpu": "4", "memory": "8Gi"}}}
    waiting = [job_with_pod("trainer", configurations=gpu, pod={"containers": [TRAINER]}, estimate={"gpu": 100}),
               *(job_with_pod(f"cpu{index}", configurations=cpu, pod={"containers": [TRAINER]}, estimate={"cpu": 100}) for index in range(3))]
    decision = gpu_controller(RecordingApi(), waiting, gpus=[1], cores=32, memory_gib=64).admit()
    assert sorted(start.kind for start in decision.starts) == ["cpu", "cpu", "gpu"]
