"""A quantity a pod wrote under limits (standing in for the request it left out, as the API
server defaults it) is named under limits when cellfit cannot take it, as the pod wrote it."""

from typing import Any

import msgspec
import pytest

from scheduler.errors import InvalidQuantity
from scheduler.kube import translate, wire
from tests.support import kube_objects as k

GPU = "nvidia.com/gpu"


def _pod_with(resources: dict[str, Any]) -> wire.Pod:
    body = k.pod("train-0")
    body["spec"]["containers"][0]["resources"] = resources
    return msgspec.convert(body, wire.Pod)


def test_a_negative_gpu_limit_without_a_request_is_named_as_a_limit() -> None:
    pod = _pod_with({"limits": {GPU: "-2"}})
    with pytest.raises(InvalidQuantity) as raised:
        translate.pod_info(pod, gpu_resource=GPU)
    assert str(raised.value) == "Pod.spec.containers[0].resources.limits[nvidia.com/gpu]: '-2' is negative"


def test_a_request_beside_a_bad_limit_of_another_resource_names_each_where_written() -> None:
    # cpu is requested (its limit is ignored), the GPU only limited: the GPU's error names limits.
    pod = _pod_with({"requests": {"cpu": "1"}, "limits": {"cpu": "2", GPU: "lots"}})
    with pytest.raises(InvalidQuantity, match=r"^Pod\.spec\.containers\[0\]\.resources\.limits\[nvidia\.com/gpu\]: "):
        translate.pod_info(pod, gpu_resource=GPU)
    pod = _pod_with({"requests": {"cpu": "-1"}, "limits": {GPU: "2"}})
    with pytest.raises(InvalidQuantity, match=r"^Pod\.spec\.containers\[0\]\.resources\.requests\.cpu: "):
        translate.pod_info(pod, gpu_resource=GPU)


def test_pod_level_limits_are_named_as_limits() -> None:
    body = k.pod("train-0")
    body["spec"]["resources"] = {"limits": {"memory": "-1Gi"}}
    with pytest.raises(InvalidQuantity, match=r"^Pod\.spec\.resources\.limits\.memory: "):
        translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource=GPU)


def test_amounts_are_unchanged_by_where_they_were_written() -> None:
    pod = _pod_with({"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "4", GPU: "3", "memory": "8Gi"}})
    info = translate.pod_info(pod, gpu_resource=GPU)
    assert (info.requests.cpu_millis, info.requests.memory_bytes, info.requests.gpus) == (1000, 2 * 2**30, 3)
