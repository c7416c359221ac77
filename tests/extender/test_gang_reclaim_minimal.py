"""A HiveD gang reclaims only what the free cells cannot hold (user26 H2, "Reclaim is minimal").

Through the real extender service with kube-scheduler v1.37.2's JSON. The cluster
(tests/support/hived.py): vision owns two A100 nodes and has bound none; speech's opportunistic
pods fill gpu-a and gpu-c; gpu-b is free. vision's gang of two 8-GPU pods needs gpu-b and one
victim, never both opportunistic pods.

What kube-scheduler does around the extender, as v1.37.2's source does it
(pkg/scheduler/framework/preemption/preemption.go, plugins/defaultpreemption): its own
NodeResourcesFit leaves the full gpu-a and gpu-c out of the filter (Unschedulable: preemption
may help), so the filter is offered gpu-b (and the CPU-only node). The dry run looks only at
nodes whose status is Unschedulable, and keeps only those where it found a victim
(``SelectVictimsOnNode``: "No preemption victims found for incoming pod" is
UnschedulableAndUnresolvable; a node left with none is "expected at least one victim pod"): the
preempt verb is offered gpu-a and gpu-c with their opportunistic pod, never the free gpu-b.
Newer kube-schedulers (kubernetes#139270) also offer a node the extender's filter failed
resolvably with no victims (``null``): gpu-b then comes that way.
"""

from __future__ import annotations

from typing import Any, Iterator

import httpx
import msgspec
import pytest

from scheduler.cells import HivedEngine
from scheduler.config import parse_settings
from scheduler.extender.runtime import Runtime, build_runtime
from scheduler.kube import translate, wire
from scheduler.kube.names import filter_offered
from scheduler.preemption.engine import FitGppEngine
from tests.support import hived
from tests.support import kube_objects as k
from tests.support.server import running_server

FILTER, PREEMPT = "/v1/extender/filter", "/v1/extender/preempt"
OPPORTUNISTIC = {"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic", "cellfit.io/job-class": "best-effort"}
GANG = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"}
# What kube-scheduler's own filters leave while speech's pods hold gpu-a and gpu-c.
# The client, the service's runtime, and speech's opportunistic pod on gpu-a and on gpu-c.
Cluster = tuple[httpx.Client, Runtime, dict[str, dict[str, Any]]]
LEFT = [n for n in hived.NODES if n["metadata"]["name"] in ("gpu-b", "cpu-only")]


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, Runtime]]:
    runtime = build_runtime(parse_settings(hived.CONFIG), standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as http:
        yield http, runtime


def post(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, content=k.dumps(body), headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def info(body: dict[str, Any]) -> Any:
    return translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource="nvidia.com/gpu")


def opportunistic_on(runtime: Runtime, node: str) -> dict[str, Any]:
    """speech's opportunistic 8-GPU pod placed and running on ``node``."""
    body = k.pod(f"opp-{node}-0", gpus=8, labels=OPPORTUNISTIC, job_uid=f"job-opp-{node}")
    with runtime.lock:
        assert list(filter_offered(runtime.engine, info(body), [node]).feasible) == [node]
        runtime.engine.reserve(info(body), node)
        body["spec"]["nodeName"], body["status"]["phase"] = node, "Running"
        runtime.engine.apply_pod(info(body))
    return body


def gang_pod(index: int) -> dict[str, Any]:
    return k.pod(f"train-{index}", gpus=8, priority=100, labels={"cellfit.io/virtual-cluster": "vision"}, annotations=GANG, job_uid="job-train")


def cells(runtime: Runtime) -> HivedEngine:
    """The HiveD engine under FitGpp's."""
    engine = runtime.engine
    assert isinstance(engine, FitGppEngine) and isinstance(engine.inner, HivedEngine)
    return engine.inner


def uid(body: dict[str, Any]) -> str:
    return str(body["metadata"]["uid"])


def victims_answered(answer: dict[str, Any]) -> dict[str, list[str]]:
    return {node: [p["UID"] for p in entry["Pods"]] for node, entry in answer["NodeNameToMetaVictims"].items()}


@pytest.fixture
def cluster(served: tuple[httpx.Client, Runtime]) -> Cluster:
    client, runtime = served
    post(client, FILTER, k.extender_args(k.pod("warmup-0"), hived.NODES, node_cache_capable=True))
    running = {node: opportunistic_on(runtime, node) for node in ("gpu-a", "gpu-c")}
    return client, runtime, running


def test_the_gang_takes_the_free_node_and_reclaims_one_opportunistic_pod(cluster: Cluster) -> None:
    client, runtime, running = cluster
    first, second = gang_pod(0), gang_pod(1)
    filtered = post(client, FILTER, k.extender_args(first, LEFT, node_cache_capable=True))
    assert filtered["NodeNames"] == []
    # gpu-b holds a pod of the gang once cells elsewhere are reclaimed: preemption may help.
    assert list(filtered["FailedNodes"]) == ["gpu-b"], filtered
    assert "cannot be placed all at once" in filtered["FailedNodes"]["gpu-b"]
    assert list(filtered["FailedAndUnresolvableNodes"]) == ["cpu-only"]

    # v1.37.2's dry run: the two full nodes, each with its opportunistic pod.
    offered = {node: [body] for node, body in running.items()}
    answer = victims_answered(post(client, PREEMPT, k.preemption_args(first, offered, node_cache_capable=True)))
    assert len(answer) == 1 and sum(len(v) for v in answer.values()) == 1, answer
    [(node, [victim])] = answer.items()
    assert victim == uid(running[node])
    other = "gpu-c" if node == "gpu-a" else "gpu-a"

    # The preempt verb counted the free node its filter was offered: the gang's slots are there
    # and on the victim's node, nothing is booked over the other opportunistic pod.
    with runtime.lock:
        slots = cells(runtime).allocator.groups["job-train"].slots
        assert sorted(s.node or "" for s in slots) == sorted([node, "gpu-b"])

    # The gang's other pod goes to the free node at once (kube-scheduler still counts the
    # victim on its node): nobody is preempted for it.
    filtered = post(client, FILTER, k.extender_args(second, LEFT, node_cache_capable=True))
    assert filtered["NodeNames"] == ["gpu-b"], filtered
    with runtime.lock:
        slots = cells(runtime).allocator.groups["job-train"].slots
        assert sorted(s.node or "" for s in slots) == sorted([node, "gpu-b"])
        assert other not in cells(runtime).pending_preemptions().get(uid(second), [])
        # The opportunistic pod on the other node stays where it is, nothing booked over it.
        assert not any(s.node == other for s in slots)

    # Its victim gone, the first pod binds on the victim's node.
    with runtime.lock:
        runtime.engine.delete_pod(victim)
    here = [n for n in hived.NODES if n["metadata"]["name"] in (node, "cpu-only")]
    assert post(client, FILTER, k.extender_args(first, here, node_cache_capable=True))["NodeNames"] == [node]


@pytest.mark.parametrize("empty", [None, []], ids=["null", "empty-list"])
def test_offered_the_free_node_without_victims_one_opportunistic_pod_goes(cluster: Cluster, empty: list[Any] | None) -> None:
    """kubernetes#139270's offers: gpu-b, failed resolvably, comes with no victims beside the
    full nodes. The gang counts its free cells before choosing victims."""
    client, runtime, running = cluster
    first = gang_pod(0)
    post(client, FILTER, k.extender_args(first, LEFT, node_cache_capable=True))
    body = k.preemption_args(first, {node: [pod] for node, pod in running.items()}, node_cache_capable=True)
    body["NodeNameToMetaVictims"]["gpu-b"] = {"Pods": empty, "NumPDBViolations": 0}
    answer = victims_answered(post(client, PREEMPT, body))
    assert len(answer) == 1 and sum(len(v) for v in answer.values()) == 1, answer
    with runtime.lock:
        slots = cells(runtime).allocator.groups["job-train"].slots
        assert "gpu-b" in {s.node for s in slots}



def test_a_slot_booked_over_an_opportunistic_pod_moves_to_a_node_freed_since(cluster: Cluster) -> None:
    """The gang's slots were planned while no node was free (a pod of equal priority, which
    kube-scheduler never preempts, held gpu-b): one victim each on gpu-a and gpu-c. gpu-b freed
    since, the gang's other pod offered it moves its slot there, the VC's quota the moved slot
    held with it; the opportunistic pod under the slot it left is never preempted. Before, the
    quota was all the gang's slots' and the move was refused "quota exhausted"."""
    client, runtime, running = cluster
    body = k.pod("held-0", gpus=8, priority=100, labels=OPPORTUNISTIC, job_uid="job-held")
    with runtime.lock:
        runtime.engine.reserve(info(body), "gpu-b")
        body["spec"]["nodeName"], body["status"]["phase"] = "gpu-b", "Running"
        runtime.engine.apply_pod(info(body))
    first, second = gang_pod(0), gang_pod(1)
    # No node has 8 GPUs free for kube-scheduler: no filter; its dry run offers the two nodes
    # whose pods have a lower priority.
    offered = {node: [pod] for node, pod in running.items()}
    answer = victims_answered(post(client, PREEMPT, k.preemption_args(first, offered, node_cache_capable=True)))
    [(node, [victim])] = answer.items()
    other = "gpu-c" if node == "gpu-a" else "gpu-a"
    with runtime.lock:
        assert sorted(s.node or "" for s in cells(runtime).allocator.groups["job-train"].slots) == ["gpu-a", "gpu-c"]
    # Offered no GPU node, the second pod's filter moves nothing: its slot, given back to be
    # planned anew with its quota, is booked again where it was.
    cpu_only = [n for n in hived.NODES if n["metadata"]["name"] == "cpu-only"]
    filtered = post(client, FILTER, k.extender_args(second, cpu_only, node_cache_capable=True))
    assert filtered["NodeNames"] == [] and not filtered["FailedNodes"], filtered
    with runtime.lock:
        group = cells(runtime).allocator.groups["job-train"]
        assert sorted(s.node or "" for s in group.slots) == ["gpu-a", "gpu-c"] and len(group.slots) == group.size
        assert [v.pod_uid for v in cells(runtime).allocator.victims(next(s for s in group.slots if s.node == other))] == [uid(running[other])]
        runtime.engine.delete_pod(uid(body))  # held-0 finished
    filtered = post(client, FILTER, k.extender_args(second, LEFT, node_cache_capable=True))
    assert filtered["NodeNames"] == ["gpu-b"], filtered
    with runtime.lock:
        slots = cells(runtime).allocator.groups["job-train"].slots
        assert sorted(s.node or "" for s in slots) == sorted([node, "gpu-b"])
        assert cells(runtime).allocator.victims(next(s for s in slots if s.node == node))[0].pod_uid == victim
        # It binds there; the other node's opportunistic pod is nobody's victim.
        assert runtime.engine.reserve(info(second), "gpu-b").node_name == "gpu-b"
        assert not any(s.node == other for s in slots)
        assert cells(runtime).pending_preemptions() == {uid(first): [victim]}


def test_an_opportunistic_gang_is_refused_unresolvably(cluster: Cluster) -> None:
    """An opportunistic gang never preempts: its pods fitting in part on the offered nodes
    gives kube-scheduler nothing to preempt for."""
    client, _, _ = cluster
    gang = k.pod("spare-0", gpus=8, labels=OPPORTUNISTIC, annotations=GANG, job_uid="job-spare")
    filtered = post(client, FILTER, k.extender_args(gang, LEFT, node_cache_capable=True))
    assert filtered["NodeNames"] == [] and not filtered["FailedNodes"], filtered
    assert "cannot be placed all at once" in filtered["FailedAndUnresolvableNodes"]["gpu-b"]
