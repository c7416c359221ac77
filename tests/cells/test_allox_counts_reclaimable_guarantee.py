"""user25 #2: a VC's free cells that another VC's opportunistic pods hold are still its guarantee
for AlloX: HiveD preempts those pods for the VC's guaranteed pods (AlloX's pods of a VC are
guaranteed: an opportunistic Job gets no GPU machine), so AlloX lists the VC's GPU machines
although no node shows a GPU free. Driven through the real HivedEngine's view."""

from __future__ import annotations

from placer.guarantee import gpus_per_pod, guarantees, pool_machines
from scheduler.cells import HivedEngine
from scheduler.matching.capacity import NodeResources
from tests.cells.helpers import node_names, pod, rack_cluster, schedule

NODES = node_names(1, 4)
# Every GPU is held by vc-b's opportunistic pods: no node has a GPU free.
FULL = [NodeResources(name=name, cpu=64.0, gpu=0, memory=256.0) for name in NODES]


def engine_with(vcs: dict[str, int]) -> HivedEngine:
    return HivedEngine.from_config(rack_cluster(1, 4, vcs={vc: [{"cellType": "V100-NODE", "count": n}] for vc, n in vcs.items()}))


def test_vc_machines_on_cells_other_vcs_opportunistic_pods_hold() -> None:
    engine = engine_with({"vc-a": 2, "vc-b": 1, "vc-c": 1})
    for index in range(4):
        assert schedule(engine, pod(f"b-opp-{index}", 8, "vc-b", priority="opportunistic"), NODES) is not None
    cells = guarantees(engine.inspect_guarantees(within=frozenset(NODES)))
    machines = pool_machines(cells, free=FULL, sizes=gpus_per_pod([], free=FULL))
    # vc-a's two 8-GPU cells are its own: HiveD reclaims them from vc-b's opportunistic pods.
    assert machines == {"vc-a": 16, "vc-b": 8, "vc-c": 8}
    # Only one node is AlloX's: vc-a's quota binds one free cell there, no more.
    one = guarantees(engine.inspect_guarantees(within=frozenset(NODES[:1])))
    assert pool_machines(one, free=FULL[:1], sizes={})["vc-a"] == 8


def test_bound_cell_counts_the_opportunistic_gpus_on_it() -> None:
    engine = engine_with({"vc-a": 2, "vc-b": 1})
    held = schedule(engine, pod("a-1", 1, "vc-a"), NODES)
    assert held is not None
    for index in range(3):  # the cells no VC holds first
        assert schedule(engine, pod(f"b-opp-{index}", 8, "vc-b", priority="opportunistic"), NODES) is not None
    on_a = schedule(engine, pod("b-opp-on-a", 4, "vc-b", priority="opportunistic"), NODES)
    assert on_a is not None and on_a.node_name == held.node_name  # on vc-a's bound cell, idle GPUs
    rows = engine.inspect_guarantees(within=frozenset(NODES))["vc-a"]
    assert sorted((row["guaranteed"], row["opportunistic"]) for row in rows) == [(0, 8), (1, 4)]
    free = [NodeResources(name=name, cpu=64.0, gpu=3 if name == held.node_name else 0, memory=256.0) for name in NODES]
    # 7 GPUs of the bound cell (3 idle, 4 reclaimed) and the 8 of the cell its quota binds.
    assert pool_machines(guarantees({"vc-a": rows}), free=free, sizes={})["vc-a"] == 15
