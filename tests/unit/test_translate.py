import json

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


def _container(name, *, restart=None, **requests):
    container = {"name": name, "resources": {"requests": requests}}
    if restart is not None:
        container["restartPolicy"] = restart
    return container


def test_sidecars_run_beside_the_containers_and_the_init_containers_after_them():
    # As k8s.io/component-helpers resource.PodRequests (KEP-753): a sidecar (an init container
    # with restartPolicy Always) adds to the containers' sum; an init container needs itself and
    # the sidecars started before it; the pod needs the larger of the two.
    body = k.pod("train-0", cpu="2", memory="4Gi")
    body["spec"]["initContainers"] = [
        _container("setup", cpu="3", memory="1Gi"),  # before any sidecar: 3 CPU
        _container("proxy", restart="Always", cpu="1", memory="512Mi"),
        _container("logs", restart="Always", cpu="500m", memory="512Mi"),
        _container("migrate", cpu="3", memory="2Gi"),  # beside both sidecars: 4.5 CPU, 3Gi
    ]
    info = translate.pod_info(decode_pod(body), gpu_resource=GPU)
    # containers and sidecars: 3.5 CPU, 5Gi; the last init container's 4.5 CPU is larger
    assert info.requests.cpu_millis == 4500
    assert info.requests.memory_bytes == 5 * 2**30
    # An init container's restartPolicy other than Always is an ordinary init container.
    body["spec"]["initContainers"] = [_container("once", restart="Never", cpu="1")]
    assert translate.pod_info(decode_pod(body), gpu_resource=GPU).requests.cpu_millis == 2000


def test_pod_level_cpu_and_memory_replace_the_containers_sums():
    # KEP-2837: pod-level requests stand for the pod's CPU and memory; GPUs stay the containers'.
    body = k.pod("train-0", gpus=2, cpu="2", memory="4Gi")
    body["spec"]["resources"] = {"requests": {"cpu": "6"}, "limits": {"cpu": "8", "memory": "16Gi"}}
    info = translate.pod_info(decode_pod(body), gpu_resource=GPU)
    assert (info.requests.cpu_millis, info.requests.memory_bytes, info.requests.gpus) == (6000, 16 * 2**30, 2)
    body["spec"]["resources"] = {"requests": {"cpu": "lots"}}
    with pytest.raises(InvalidQuantity, match=r"Pod\.spec\.resources\.requests\.cpu"):
        translate.pod_info(decode_pod(body), gpu_resource=GPU)


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


def test_decoded_watch_objects_are_not_tracked_by_the_collector() -> None:
    """The watch decodes tens of thousands of objects in a relist; JSON cannot make a reference
    cycle, so the wire structs are declared gc=False: the collector neither counts their
    allocations towards its next pass nor walks them in a full pass (a 10,000-pod relist's
    longest verb stall halved, tests/benchmarks/bench_relist.py). Every struct the module
    declares, generic ones included, must keep it so."""
    import gc
    import inspect

    import msgspec

    from scheduler.kube import wire

    structs = [obj for _, obj in inspect.getmembers(wire, inspect.isclass)
               if issubclass(obj, msgspec.Struct) and obj.__module__ == wire.__name__]
    assert len(structs) > 30
    tracked = [struct.__name__ for struct in structs if struct.__struct_config__.gc]
    assert not tracked, f"wire structs tracked by the collector: {tracked}"
    event = msgspec.json.decode(b'{"type":"ADDED","object":{"metadata":{"name":"p","uid":"u"}}}', type=wire.ObjectEvent[wire.Pod])
    assert not gc.is_tracked(event) and not gc.is_tracked(event.object) and not gc.is_tracked(event.object.metadata)


def test_a_pod_whose_preemption_policy_is_never_may_not_preempt():
    def translated(policy: str | None) -> bool:
        spec = {"containers": [{"name": "c"}], **({"preemptionPolicy": policy} if policy else {})}
        raw = json.dumps({"metadata": {"name": "p", "uid": "u"}, "spec": spec}).encode()
        return translate.pod_info(wire.POD_DECODER.decode(raw), gpu_resource="nvidia.com/gpu").may_preempt

    assert translated(None) and translated("PreemptLowerPriority") and not translated("Never")
