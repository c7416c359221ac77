"""``kubectl cellfit why`` of a pod asking more GPUs than any node holds (user25 #6): 16 GPUs on
nodes of 8. kube-scheduler's own filter (NodeResourcesFit) turns every node away, "4
Insufficient nvidia.com/gpu", before cellfit's filter is asked, and the answer read
``pending`` with that message, as if GPUs would free up. The pod can never be placed: the
answer now says so, in HiveD's filter's own words (a real engine's, on the same cells) with
what to change. The views are a real HiveD engine's inspect output."""

from __future__ import annotations

from typing import Any, Mapping

from scheduler.cells import HivedEngine
from scheduler.kube.names import filter_offered
from scheduler.kubectl.facts import FactReader
from scheduler.kubectl.objects import CellfitView, events_from, pod_from
from scheduler.kubectl.views import largest_node_cell
from scheduler.kubectl.why import explain_pod
from tests.cells.helpers import node, node_names, pod, rack_cluster

NODES = node_names(1, 4)
# The live session's FailedScheduling for pod/too-big (1 node cordoned, 4 of 8 GPUs each).
MESSAGE = ("0/5 nodes are available: 1 node(s) were unschedulable, 4 Insufficient nvidia.com/gpu. preemption: 0/5 nodes "
           "are available: 5 Preemption is not helpful for scheduling.")


def engine() -> HivedEngine:
    built = HivedEngine.from_config(rack_cluster(1, 4, vcs={"vc-a": [{"cellType": "V100-NODE", "count": 2}],
                                                            "vc-b": [{"cellType": "V100-NODE", "count": 1}],
                                                            "vc-c": [{"cellType": "V100-NODE", "count": 1}]}))
    for name in NODES:
        built.apply_node(node(name))
    return built


def pending(gpus: int) -> Any:
    body = {"metadata": {"name": "too-big", "namespace": "team-b", "uid": "uid-too-big",
                         "labels": {"cellfit.io/virtual-cluster": "vc-b"}},
            "spec": {"schedulerName": "cellfit",
                     "containers": [{"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Pending"}}
    event = {"reason": "FailedScheduling", "type": "Warning", "count": 3, "lastTimestamp": "2026-11-28T22:40:00Z",
             "message": MESSAGE, "involvedObject": {"kind": "Pod", "name": "too-big"},
             "metadata": {"creationTimestamp": "2026-11-28T22:40:00Z"}}
    return pod_from(body, events=events_from([event]))


class EngineInspect:
    """The inspect API of a cellfit serving ``built`` (the views FactReader.view reads)."""

    def __init__(self, built: HivedEngine) -> None:
        self.built = built
        self.read: list[str] = []

    def view(self, view: str, *, query: Mapping[str, str] | None = None) -> Any:
        self.read.append(view)
        if view == "cells":
            return self.built.inspect_cells(gpus=(query or {}).get("gpus") != "false")
        if view.startswith("virtual-clusters/"):
            return self.built.inspect_virtual_cluster(view.split("/", 1)[1])
        return {"enabled": False, "holds": []}


def test_a_pod_asking_more_gpus_than_any_node_is_never_placeable_in_hiveds_words() -> None:
    built = engine()
    # HiveD's filter, had it been asked, refuses the pod on every node for this reason.
    (refusal,) = set(filter_offered(built, pod("too-big", 16, vc="vc-b"), NODES).unresolvable.values())
    facts = pending(16)
    assert facts.gpus == 16
    view = FactReader(api=None, inspect=EngineInspect(built)).view(pod=facts, job=None)  # type: ignore[arg-type]
    assert view.largest_node_cell == ("V100-NODE", 8)
    answer = explain_pod(facts, view)
    assert answer.reason == "never-placeable", answer
    assert answer.summary == (f"can never be placed as written: {refusal} (ask for fewer GPUs a pod: no node of the cluster "
                              "has that many); kube-scheduler's own filters: 1 node(s) were unschedulable, "
                              "4 Insufficient nvidia.com/gpu"), answer


def test_a_pod_some_node_holds_still_waits_for_gpus() -> None:
    built = engine()
    inspect = EngineInspect(built)
    facts = pending(8)
    view = FactReader(api=None, inspect=inspect).view(pod=facts, job=None)  # type: ignore[arg-type]
    assert "cells" in inspect.read  # read, and found the pod fits a node
    answer = explain_pod(facts, view)
    assert answer.reason == "pending" and "Insufficient nvidia.com/gpu" in answer.summary, answer


def test_no_cell_tree_no_guess() -> None:
    # Resource-fit (or a view refused): nothing known of the nodes' sizes, the answer unchanged.
    answer = explain_pod(pending(16), CellfitView())
    assert answer.reason == "pending", answer
    assert largest_node_cell({"cells": []}) is None
