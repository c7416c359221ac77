"""review28 #1 (MEDIUM): the freed-cells wait (JustFreed) started only when a *guaranteed* pod of
the VC left, though the freeing wait (freeing.py) also waits for an opportunistic pod leaving the
VC's cell. Once such a pod is gone, kube-scheduler's cache still counts it for a moment
(CACHE_LAG_SECONDS) and offers only the other node: HiveD then reclaimed an opportunistic pod
there for nothing (user24b item 6 again), and the waiter's freed cells were not kept from
another opportunistic pod (user25 #1 again). Now an opportunistic pod leaving a VC's cell starts
the wait for the VC owning the cell (freeing.vcs_freed_by), waiter or none.

Scene (tests/cells/test_no_preemption_while_vc_cells_free.py): vc-a's g1 holds 4 GPUs of n-a,
vc-b's opportunistic opp-half the other 4 and is terminating, vc-b's opp fills n-b.
"""

from __future__ import annotations

import copy

from scheduler.cells import HivedEngine
from scheduler.cells.freeing import vcs_freed_by
from scheduler.core.model import PodInfo
from scheduler.kube.names import filter_offered
from tests.cells.helpers import V100_TYPES, node, pod
from tests.cells.test_freed_cells_kept_from_opportunistic import opportunistic
from tests.cells.test_no_preemption_while_vc_cells_free import run, scene, terminating
from tests.cells.test_no_reclaim_just_after_vc_cells_freed import Clock


def _opp_half_leaving() -> HivedEngine:
    engine, _, _ = scene(g1_gpus=4, clock=Clock())
    half = run(engine, pod("opp-half", 4, "vc-b", priority="opportunistic"), ["n-a"])
    engine.apply_pod(terminating(half))
    return engine


def _half_leaving() -> tuple[HivedEngine, PodInfo]:
    engine = _opp_half_leaving()
    g2 = pod("g2", 4, "vc-a")
    assert engine.select_victims(g2, {"n-b": ["opp"]}, {}) == {}  # waits for opp-half's cells
    return engine, g2


def test_no_reclaim_elsewhere_just_after_the_opportunistic_leaver_is_gone() -> None:
    engine, g2 = _half_leaving()
    engine.delete_pod("opp-half")  # cellfit's watch: gone; kube-scheduler's cache still counts it on n-a
    # kube-scheduler offers n-b only: HiveD waits the cache's lag, as for a guaranteed leaver.
    assert engine.select_victims(g2, {"n-b": ["opp"]}, {}) == {}


def test_the_waiters_freed_cells_are_kept_from_another_opportunistic_pod() -> None:
    engine, _ = _half_leaving()
    engine.delete_pod("opp-half")
    assert not filter_offered(engine, opportunistic("opp-2"), ["n-a"]).feasible


def test_a_pod_of_the_cells_vc_asking_just_after_the_leaver_is_gone_waits_too() -> None:
    engine = _opp_half_leaving()
    engine.delete_pod("opp-half")  # nobody of vc-a waited for its cells yet
    assert engine.select_victims(pod("g2", 4, "vc-a"), {"n-b": ["opp"]}, {}) == {}
    assert "g2" not in engine.allocator.by_pod and not engine.expiry.is_leaving("opp")


def test_the_cells_freed_are_the_owning_vcs_not_the_opportunistic_leavers() -> None:
    engine = _opp_half_leaving()
    assert vcs_freed_by(engine.allocator.by_pod["opp-half"], vcs=engine.allocator.vcs) == ["vc-a"]  # n-a is vc-a's cell
    assert vcs_freed_by(engine.allocator.by_pod["opp"], vcs=engine.allocator.vcs) == ["vc-a"]  # n-b: free, vc-a's quota not all bound
    assert vcs_freed_by(engine.allocator.by_pod["g1"], vcs=engine.allocator.vcs) == ["vc-a"]  # a guaranteed pod's own


def test_a_free_cell_an_opportunistic_pod_left_is_waited_for_by_a_vc_with_quota_not_bound() -> None:
    """n-b bound to no VC: HiveD would bind it for vc-a's g2 (its quota's second node), which
    kube-scheduler, still counting opp-b there, does not offer yet."""
    config = {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES),
                     "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in ("n-a", "n-b", "n-c")]},
        "virtualClusters": {"vc-a": [{"cellType": "V100-NODE", "count": 2}], "vc-b": []},
    }
    engine = HivedEngine.from_config(config, clock=Clock())
    for name in ("n-a", "n-b", "n-c"):
        engine.apply_node(node(name))
    run(engine, pod("g1", 8, "vc-a"), ["n-a"])
    opp_b = run(engine, pod("opp-b", 8, "vc-b", priority="opportunistic"), ["n-b"])
    run(engine, pod("opp-c", 8, "vc-b", priority="opportunistic"), ["n-c"])
    engine.apply_pod(terminating(opp_b))
    engine.delete_pod("opp-b")
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-c": ["opp-c"]}, {}) == {}
    assert run(engine, pod("g2", 8, "vc-a"), ["n-b", "n-c"]).node_name == "n-b"
