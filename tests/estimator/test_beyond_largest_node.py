"""One rule tells a pod that no node holds, for the estimator (a sampling pod, in millicores and
bytes: estimator/sample_pod.beyond_every_node) and AlloX's admission (a configuration's machine,
in cores and GiB: placer/controller._beyond_each_node): the amounts it asks more of than the
largest node has of each, or, where each resource is on some node but none has them all, every
resource asked, "not on one node". Each caller keeps its own wording around it."""

from __future__ import annotations

from estimator.sample_pod import beyond_every_node, beyond_largest_node, gpu_count
from placer.controller import _beyond_each_node
from scheduler.core.resources import Resources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand

GIB = 2**30
READ = [gpu_count, lambda cores: f"{cores:g} cores", lambda gib: f"{gib:g} GiB"]


def test_the_amounts_beyond_the_largest_node_are_named_with_the_largest() -> None:
    nodes = [[4, 64, 256], [8, 32, 512]]
    assert beyond_largest_node([1, 200, 600], nodes, read=READ) == ("200 cores and 600 GiB", "64 cores and 512 GiB at most")
    assert beyond_largest_node([0, 100, 0], nodes, read=READ) == ("100 cores", "64 cores at most")


def test_each_resource_on_some_node_but_none_with_all_names_every_one_asked() -> None:
    nodes = [[8, 16, 64], [0, 64, 64]]
    assert beyond_largest_node([8, 64, 0], nodes, read=READ) == ("8 GPUs and 64 cores", "8 GPUs and 64 cores at most, not on one node")


def test_a_node_that_holds_the_pod_or_no_node_known_says_nothing() -> None:
    assert beyond_largest_node([1, 64, 256], [[4, 64, 256]], read=READ) is None
    assert beyond_largest_node([1, 64, 256], [], read=READ) is None


def test_both_callers_say_it_in_their_own_units_and_words() -> None:
    node = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=4)
    asks = Resources(cpu_millis=200_000, memory_bytes=8 * GIB, gpus=0)
    assert beyond_every_node(asks, [node], pooled=True) == (
        "200 cores a pod, more than any node of allox.nodeSelector's pool has (64 cores at most): no node could ever run it"
    )
    assert _beyond_each_node(Demand(cpu=200.0, memory=8.0), [Capacity(cpu=64.0, gpu=4.0, memory=256.0)]) == (
        "more than any one of them has (64 cores at most): it never fits"
    )
    gpu_node, cpu_node = Capacity(cpu=16.0, gpu=8.0, memory=64.0), Capacity(cpu=64.0, gpu=0.0, memory=64.0)
    assert _beyond_each_node(Demand(gpu=8.0, cpu=64.0), [gpu_node, cpu_node]) == (
        "more than any one of them has (8 GPUs and 64 cores at most, not on one node): it never fits"
    )
