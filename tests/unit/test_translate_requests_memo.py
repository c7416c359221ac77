"""A pod's requests are read from its quantities once per shape of request (issue 15: a pod is
translated three times on its way to running, kube-scheduler's filter request and the watch's
bound and Running events, and a Job's pods all ask alike); what each pod asks is unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.core import resources
from scheduler.core.resources import Resources
from scheduler.errors import InvalidQuantity
from scheduler.kube import translate, wire
from tests.support import kube_objects as k

GPU = "nvidia.com/gpu"


def _decoded(body: dict[str, Any]) -> wire.Pod:
    """Decoded from its bytes, as the watch and the verbs decode: a new object each time."""
    return wire.decode(wire.POD_DECODER, json.dumps(body).encode())


@pytest.fixture
def quantities_read(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    read: list[dict[str, Any]] = []
    parse = resources.resources_from_quantities

    def counted(quantities: Any, **kwargs: Any) -> Resources:
        read.append(dict(quantities))
        return parse(quantities, **kwargs)

    monkeypatch.setattr(translate, "resources_from_quantities", counted)
    return read


def test_a_pod_asking_as_one_read_before_is_not_read_again(quantities_read: list[dict[str, Any]]) -> None:
    pending = k.pod("memo-0", gpus=2, cpu="1337m", memory="3Gi")
    bound = json.loads(json.dumps(pending))
    bound["spec"]["nodeName"] = "node-1"
    bound["status"] = {"phase": "Running"}
    sibling = k.pod("memo-1", gpus=2, cpu="1337m", memory="3Gi")

    first = translate.pod_info(_decoded(pending), gpu_resource=GPU)
    read_once = len(quantities_read)
    assert read_once > 0
    again = [translate.pod_info(_decoded(body), gpu_resource=GPU) for body in (bound, pending, sibling)]

    assert len(quantities_read) == read_once
    assert {info.requests for info in again} == {first.requests} == {Resources(1337, 3 * 2**30, 2)}
    assert [info.node_name for info in again] == ["node-1", None, None]


def test_pods_asking_differently_get_each_their_own(quantities_read: list[dict[str, Any]]) -> None:
    asks = [("2468m", "1Gi", 1), ("2468m", "1Gi", 2), ("2469m", "1Gi", 1), ("2468m", "2Gi", 1)]
    for _ in range(2):
        infos = [
            translate.pod_info(_decoded(k.pod(f"ask-{i}", gpus=gpus, cpu=cpu, memory=memory)), gpu_resource=GPU) for i, (cpu, memory, gpus) in enumerate(asks)
        ]
        assert [info.requests for info in infos] == [Resources(2468, 2**30, 1), Resources(2468, 2**30, 2), Resources(2469, 2**30, 1), Resources(2468, 2**31, 1)]


def test_a_sidecar_and_an_init_container_still_count_as_before() -> None:
    body = k.pod("init-0", gpus=1, cpu="1", memory="1Gi")
    body["spec"]["initContainers"] = [{"name": "warm", "resources": {"requests": {"cpu": "3"}}}]
    sidecar = json.loads(json.dumps(body))
    sidecar["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    for _ in range(2):
        assert translate.pod_info(_decoded(body), gpu_resource=GPU).requests.cpu_millis == 3000  # the init container's peak
        assert translate.pod_info(_decoded(sidecar), gpu_resource=GPU).requests.cpu_millis == 4000  # beside the container


def test_the_same_spec_counts_the_gpus_of_the_resource_asked_for() -> None:
    spec = _decoded(k.pod("gpus-0", gpus=3, cpu="1", memory="1Gi")).spec
    assert translate.pod_requests(spec, gpu_resource=GPU, field="spec").gpus == 3
    assert translate.pod_requests(spec, gpu_resource="amd.com/gpu", field="spec").gpus == 0
    assert translate.pod_requests(spec, gpu_resource=GPU, field="spec").gpus == 3


def test_a_quantity_that_does_not_read_is_refused_every_time_under_its_field() -> None:
    good = k.pod("bad-0", gpus=1, cpu="1", memory="1Gi")
    bad = json.loads(json.dumps(good))
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "one"
    translate.pod_info(_decoded(good), gpu_resource=GPU)
    for field in ("Pod", "Pod", "items[3]"):
        with pytest.raises(InvalidQuantity) as refused:
            translate.pod_info(_decoded(bad), gpu_resource=GPU, field=field)
        assert str(refused.value).startswith(f"{field}.spec.containers[0].resources.requests.cpu: ")


def test_past_its_size_the_memo_starts_over_and_still_answers() -> None:
    memo = translate._RequestsMemo(size=2)
    specs = [_decoded(k.pod(f"size-{i}", gpus=1, cpu=f"{100 + i}m", memory="1Gi")).spec for i in range(5)]
    for _ in range(2):
        assert [memo.requests(spec, gpu_resource=GPU, field="spec").cpu_millis for spec in specs] == [100, 101, 102, 103, 104]
