import msgspec
import pytest

from scheduler.errors import InvalidQuantity
from scheduler.kube import translate, wire
from tests.support import kube_objects as k

GPU = "nvidia.com/gpu"


def decode_pod(body):
    return msgspec.convert(body, wire.Pod)


def test_pod_requests_sum_containers_and_take_init_max_plus_overhead():
    body = k.pod("train-0", gpus=2, cpu="2", memory="8Gi", init_cpu="6")
    body["spec"]["containers"].append({"name": "sidecar", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}})
    body["spec"]["overhead"] = {"cpu": "250m", "memory": "128Mi"}
    info = translate.pod_info(decode_pod(body), gpu_resource=GPU)
    # app containers: 2.5 CPU, 9Gi, 2 GPUs; init container raises CPU to 6; overhead on top
    assert info.requests.cpu_millis == 6250
    assert info.requests.memory_bytes == 9 * 2**30 + 128 * 2**20
    assert info.requests.gpus == 2


def test_limits_stand_in_for_missing_requests():
    body = k.pod("train-0")
    body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "4", "cpu": "3"}}
    info = translate.pod_info(decode_pod(body), gpu_resource=GPU)
    assert (info.requests.cpu_millis, info.requests.gpus) == (3000, 4)


def test_pod_metadata_is_carried_over():
    body = k.pod("train-0", node_name="gpu-1", phase="Running", priority=7, grace_period_seconds=90, labels={"cellfit.io/job-class": "trial"})
    body["metadata"]["deletionTimestamp"] = "2026-11-20T10:00:00Z"
    info = translate.pod_info(decode_pod(body), gpu_resource=GPU)
    assert info.key == "ml/train-0" and info.node_name == "gpu-1" and info.phase == "Running"
    assert info.priority == 7 and info.grace_period_seconds == 90 and info.terminating
    assert info.labels["cellfit.io/job-class"] == "trial"
    assert info.owner is not None and info.owner.kind == "Job" and info.owner.name == "train"
    assert info.holds_resources


def test_bad_quantity_names_the_json_path():
    body = k.pod("train-0")
    body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(InvalidQuantity, match=r"Pod\.spec\.containers\[0\]\.resources\.requests\.cpu"):
        translate.pod_info(decode_pod(body), gpu_resource=GPU)


def test_node_allocatable_and_readiness():
    info = translate.node_info(msgspec.convert(k.node("gpu-1", gpus=8, ready=False), wire.Node), gpu_resource=GPU)
    assert info.allocatable.gpus == 8 and info.allocatable.cpu_millis == 64000
    assert not info.ready and info.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    bare = translate.node_info(msgspec.convert({"metadata": {"name": "x"}}, wire.Node), gpu_resource=GPU)
    assert bare.ready and bare.allocatable.gpus == 0
