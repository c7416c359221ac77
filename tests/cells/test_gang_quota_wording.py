"""A gang its VC cannot hold at once, though one of its pods would fit, is told what is true:
the GPUs the gang needs at once, how many of its pods the VC's cells have room for now, what is
free and who holds the rest (scheduler/cells/planning.py, gangs.py).

Seen live: VC research owns one 8-GPU node, ml/r-hold uses 4 GPUs of it, and the gang r-gang
of 2 pods x 4 GPUs read "... quota exhausted at level 'A100-NODE': none of its cells of type
'A100-NODE' or larger has 4 free GPUs in one 'A100-NODE', and every cell of its quota is already
in use" while the cell had 4 idle GPUs: the gang's own first slot had taken them when its second
was planned."""

from __future__ import annotations

import pytest

from scheduler.cells import HivedEngine
from scheduler.kube.names import filter_offered
from tests.cells.helpers import pod, schedule

NODES = [f"gpu-node-{i}" for i in range(4)]
# The live session's shape: flat 8-GPU nodes, VC research owning one of them.
CONFIG = {
    "topology": {"cellTypes": {"A100-NODE": {"childType": "A100", "childCount": 8, "isNodeLevel": True}},
                 "physicalCells": [{"cellType": "A100-NODE", "nodeName": name} for name in NODES]},
    "virtualClusters": {"research": [{"cellType": "A100-NODE", "count": 1}], "vision": [{"cellType": "A100-NODE", "count": 3}]},
}


def engine() -> HivedEngine:
    return HivedEngine.from_config(CONFIG)


def reasons(engine: HivedEngine) -> set[str]:
    decision = filter_offered(engine, pod("r-gang-0", 4, "research", gang=("r-gang", 2)), NODES)
    assert not decision.feasible
    return set(decision.unresolvable.values()) | set(decision.failed.values())


ONE_POD_FITS = (
    "gang ns/r-gang (2 pods x 4 GPUs) cannot be placed all at once: virtual cluster 'research' quota exhausted at "
    "level 'A100-NODE' for the whole gang: it needs 8 GPUs at once for its 2 pods, and its cells have room for 1 of "
    "them now (4 GPUs free, the others held by ns/r-hold)")
# None of its pods fits: the per-pod reason is the gang's too.
NO_POD_FITS = (
    "gang ns/r-gang (2 pods x 4 GPUs) cannot be placed all at once: virtual cluster 'research' quota exhausted at "
    "level 'A100-NODE': none of its cells of type 'A100-NODE' or larger has 4 free GPUs in one 'A100-NODE', and every "
    "cell of its quota is already in use")


@pytest.mark.parametrize(("held", "said"), [(4, ONE_POD_FITS), (8, NO_POD_FITS)])
def test_a_gang_is_told_what_it_needs_at_once_and_who_holds_the_rest(held: int, said: str):
    hived = engine()
    assert schedule(hived, pod("r-hold", held, "research"), NODES) is not None
    assert reasons(hived) == {said}


def test_the_holders_are_listed_five_at_most():
    hived = engine()
    for i in range(7):
        assert schedule(hived, pod(f"r-hold-{i}", 1, "research"), NODES) is not None
    decision = filter_offered(hived, pod("g-0", 1, "research", gang=("g", 2)), NODES)
    (reason,) = set(decision.unresolvable.values()) | set(decision.failed.values())
    assert reason.endswith("its cells have room for 1 of them now (1 GPU free, the others held by ns/r-hold-0, "
                           "ns/r-hold-1, ns/r-hold-2, ns/r-hold-3, ns/r-hold-4 and 2 more)"), reason


def test_quota_not_bound_to_a_cell_yet_counts_as_free() -> None:
    """Seen live: "its cells have room for 1 of them now (0 GPUs free, ...)". VC research's
    second node is quota not bound to a cell yet: the gang's first pod would take it, and the
    free figure, read from the bound cells alone, said none was free."""
    config = {**CONFIG, "virtualClusters": {"research": [{"cellType": "A100-NODE", "count": 2}],
                                            "vision": [{"cellType": "A100-NODE", "count": 2}]}}
    hived = HivedEngine.from_config(config)
    assert schedule(hived, pod("r-hold", 8, "research"), NODES) is not None
    decision = filter_offered(hived, pod("g-0", 8, "research", gang=("g", 2)), NODES)
    (reason,) = set(decision.unresolvable.values()) | set(decision.failed.values())
    assert reason.endswith("it needs 16 GPUs at once for its 2 pods, and its cells have room for 1 of them now "
                           "(8 GPUs free, the others held by ns/r-hold)"), reason
