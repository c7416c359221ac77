"""Under HiveD with ``allox.nodeSelector``, a VC's GPU machines are what its guarantee holds on
AlloX's nodes: its bound cells' GPUs there, and its quota not bound yet only as far as free
cells lie wholly there. A real HivedEngine; pods placed through its filter and reserve, offered
the nodes kube-scheduler would offer."""

from __future__ import annotations

from typing import Any

from placer.guarantee import guarantees
from scheduler.core.pods import PodStore
from scheduler.cells import HivedEngine
from scheduler.core.model import NodeInfo
from scheduler.core.resources import Resources
from scheduler.matching.capacity import guaranteed_gpu_machines

from tests.cells.helpers import node_names, pod, rack_cluster, schedule

NODES = node_names(2, 2)  # r0n0, r0n1 | r1n0, r1n1: 8 GPUs each
ALLOX = frozenset({"r0n0", "r0n1"})  # allox.nodeSelector's nodes: rack 0


def engine(vcs: dict[str, Any]) -> HivedEngine:
    cells = HivedEngine.from_config(rack_cluster(2, 2, vcs=vcs))
    for name in NODES:
        cells.apply_node(NodeInfo(name=name, allocatable=Resources(64000, 512 * 2**30, 8)))
    return cells


def place(cells: HivedEngine, uid: str, gpus: int, vc: str, *, on: list[str]) -> None:
    placed = schedule(cells, pod(uid, gpus, vc), on)
    assert placed is not None
    cells.apply_pod(placed)


def machines(cells: HivedEngine, *, within: frozenset[str] | None = ALLOX, except_pods: frozenset[str] = frozenset(),
             gpus: dict[str, int] | None = None) -> dict[str, int]:
    view = cells.inspect_guarantees(except_pods=except_pods, within=within)
    return guaranteed_gpu_machines(guarantees(view), gpus_per_pod=gpus or {})


def test_a_vcs_cell_bound_off_alloxs_nodes_is_no_machine_of_alloxs():
    cells = engine({"a": [{"cellType": "V100-NODE", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 1}]})
    assert machines(cells) == {"a": 8, "b": 8}
    place(cells, "p1", 3, "a", on=["r1n0"])  # a's pod, placed outside AlloX's nodes, binds its cell there
    assert machines(cells, within=None) == {"a": 5, "b": 8}  # everywhere: 5 GPUs left in its cell
    assert machines(cells) == {"a": 0, "b": 8}  # on AlloX's nodes: none
    # A pod of a running AlloX Job on AlloX's nodes is a busy machine of its own: given back there only.
    place(cells, "p2", 2, "b", on=["r0n1"])
    assert machines(cells) == {"a": 0, "b": 6}
    assert machines(cells, except_pods=frozenset({"p1", "p2"})) == {"a": 0, "b": 8}


def test_quota_not_bound_yet_counts_only_the_free_cells_wholly_on_alloxs_nodes():
    cells = engine({"a": [{"cellType": "V100-NODE", "count": 2}], "b": [{"cellType": "V100-NODE", "count": 1}],
                    "c": [{"cellType": "V100-NODE", "count": 1}]})
    assert machines(cells) == {"a": 16, "b": 8, "c": 8}  # each VC alone: two free nodes on rack 0
    place(cells, "p1", 8, "b", on=["r0n0"])
    place(cells, "p2", 8, "c", on=["r0n1"])
    # Rack 0 is taken by b and c: a's quota can only bind cells on rack 1, which AlloX does not run on.
    assert machines(cells) == {"a": 0, "b": 0, "c": 0}
    assert machines(cells, within=None) == {"a": 16, "b": 0, "c": 0}
    # GPUs smaller than a node: the free GPUs of a node cell count whole.
    assert machines(cells, within=frozenset({"r1n0"}), gpus={"a": 2}) == {"a": 4, "b": 0, "c": 0}


def test_a_rack_cell_counts_only_the_gpus_of_its_nodes_on_alloxs_nodes():
    cells = engine({"a": [{"cellType": "V100-RACK", "count": 1}]})
    half = frozenset({"r0n0", "r1n0"})  # one node of each rack: no rack lies wholly there
    assert machines(cells, within=half) == {"a": 0}
    assert machines(cells, within=ALLOX) == {"a": 16}  # rack 0 is free and wholly AlloX's
    place(cells, "p1", 2, "a", on=["r0n0"])  # binds rack 0 to a
    assert machines(cells, within=half)["a"] == 6  # r0n0's 8 GPUs less the pod's 2; r0n1 is not AlloX's
    assert machines(cells, within=ALLOX)["a"] == 14


def test_a_bad_gpu_keeps_its_node_cell_out_of_the_free_cells():
    cells = engine({"a": [{"cellType": "V100-NODE", "count": 1}]})
    cells.apply_node(NodeInfo(name="r0n0", allocatable=Resources(64000, 512 * 2**30, 7)))  # a GPU lost
    assert machines(cells, within=frozenset({"r0n0"}))["a"] == 0
    assert machines(cells, within=frozenset({"r0n0", "r0n1"}))["a"] == 8


def test_the_cluster_cache_names_alloxs_nodes_by_their_labels():
    import threading

    from scheduler.cluster.cache import ClusterCache
    from scheduler.core.fit import ResourceFitEngine
    from tests.support.api_double import ListingApi
    from tests.support.kube_objects import node

    ours, other = node("ours", gpus=8), node("other", gpus=8)
    ours["metadata"]["labels"]["pool"] = "allox"
    cache = ClusterCache(api=ListingApi(nodes=[ours, other], pods=[]), engine=ResourceFitEngine(), lock=threading.RLock(),
                         gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None)
    cache.nodes._list_and_replace()
    assert cache.nodes_carrying({"pool": "allox"}) == frozenset({"ours"})
    assert cache.nodes_carrying({"pool": "allox", "zone": "a"}) == frozenset()
    assert cache.nodes_carrying({}) is None  # no selector: every node, whichever comes


def test_running_alloxs_pods_are_given_back_to_their_own_cell_not_to_every_cell_on_their_node():
    # Two VCs' socket cells (4 GPUs) on one node: a's pod is a running AlloX Job's (a busy
    # machine of its own, given back), b's is not and holds b's GPUs.
    cells = engine({"a": [{"cellType": "V100-SOCKET", "count": 2}], "b": [{"cellType": "V100-SOCKET", "count": 1}]})
    place(cells, "pa", 2, "a", on=["r0n0"])
    place(cells, "pb", 2, "b", on=["r0n0"])
    place(cells, "pa2", 3, "a", on=["r0n1"])  # a's second socket
    given_back = frozenset({"pa"})
    assert machines(cells, within=None, except_pods=given_back) == {"a": 5, "b": 2}
    assert machines(cells, except_pods=given_back) == {"a": 5, "b": 2}


def test_a_vcs_cell_types_of_one_chain_draw_on_one_budget_of_free_gpus():
    # Quota of a node and two sockets; one free node on AlloX's nodes is all HiveD could bind.
    cells = engine({"a": [{"cellType": "V100-NODE", "count": 1}, {"cellType": "V100-SOCKET", "count": 2}]})
    assert machines(cells, within=frozenset({"r0n0"})) == {"a": 8}
    assert machines(cells, within=ALLOX) == {"a": 16}
    assert machines(cells, within=None) == {"a": 16}


def test_a_job_whose_vcs_free_guarantee_is_off_alloxs_nodes_lacks_machines_not_quota():
    from placer.controller import Guarantees, PlacerController
    from scheduler.config import AlloxSettings
    from tests.placer.test_controller import Jobs, RecordingApi
    from tests.placer.test_guarantee import gpu_only_job

    cells = engine({"a": [{"cellType": "V100-NODE", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 1}]})
    place(cells, "b1", 8, "b", on=["r0n0"])  # b fills rack 0's first node
    place(cells, "b2", 1, "a", on=["r1n0"])  # a's cell is bound on rack 1, off AlloX's nodes

    def told(vc: str, *, free_gpus: int) -> dict[str, str]:
        api = RecordingApi()
        placer = PlacerController(
            api=api, jobs=Jobs([gpu_only_job("g", vc)]), settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
            free_by_node=lambda running: {"r0n1": Resources(cpu_millis=64000, memory_bytes=2**38, gpus=free_gpus)},
            capacity=lambda: Resources(cpu_millis=128000, memory_bytes=2**39, gpus=16), clock=lambda: 1767225700.0,
            guarantees=lambda running: Guarantees(
                cells=guarantees(cells.inspect_guarantees(within=ALLOX)), default_vc=cells.default_vc,
                anywhere=guarantees(cells.inspect_guarantees()),
            ),
        )
        placer.admit()
        ((_, condition),) = api.conditions
        return condition

    # a has 7 free guaranteed GPUs, all on rack 1: AlloX's nodes lack them, a's quota does not.
    condition = told("a", free_gpus=8)
    assert condition["reason"] == "NoMachine", condition
    assert "virtual cluster 'a' has free guaranteed GPUs, but AlloX's nodes" in condition["message"]
    # b's quota is in use: waiting for quota, wherever AlloX's nodes are.
    assert told("b", free_gpus=8)["reason"] == "WaitingForQuota"


def test_discovered_nodes_regrouped_into_a_rack_count_on_alloxs_nodes():
    # As on the e2e control plane: AlloX's two 2-GPU nodes join a discovered cluster, first as a
    # standalone node cell, then regrouped into a rack of their own; the rack's chain is new,
    # and its GPU type's name still names a level of the node's former chain.
    rack = "topology.kubernetes.io/rack"
    a100 = {"nvidia.com/gpu.product": "A100"}
    big = [NodeInfo(name=f"big{i}", allocatable=Resources(64000, 2**38, 8), labels={**a100, rack: f"r{i // 2}"}) for i in range(4)]
    cells = HivedEngine.from_nodes(big, rack_label=rack)
    for joined in big + [NodeInfo(name=f"s{i}", allocatable=Resources(64000, 2**38, 2), labels={**a100, rack: "sr"}) for i in range(2)]:
        cells.apply_node(joined)
    assert any("regrouped" in change for change in cells.changes)
    assert machines(cells, within=frozenset({"s0", "s1"})) == {"default": 4}
    assert machines(cells, within=frozenset({"s0"})) == {"default": 0}  # the rack cell is not wholly there
