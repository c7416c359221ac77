"""Discovered cell-type names do not depend on which other nodes exist (H4).

A cluster of 8-GPU A100 nodes was discovered as ``<product>-NODE``; once 2-GPU A100 nodes joined,
a restart named them ``<product>-8GPU-NODE`` and ``<product>-2GPU-NODE``, and ``cellfit serve``
refused the configuration written at install. The names now always carry the node size; the old
unsized names are accepted (with a warning naming the stable one) while the product has one node
size, and refused with the stable names to choose from once it has several.
"""

from __future__ import annotations

import msgspec

import pytest

from scheduler.cells import HivedEngine, check_config
from scheduler.cells.discovery import discover_layout
from scheduler.core.model import NodeInfo
from scheduler.errors import ConfigError
from scheduler.kube.names import filter_offered
from tests.cells.helpers import node, pod, schedule, snapshot

PRODUCT = "NVIDIA-A100-SXM4-80GB"
A100 = {"nvidia.com/gpu.product": PRODUCT}
RACK = "topology.kubernetes.io/rack"


def big(count: int, *, rack: str | None = None) -> list[NodeInfo]:
    return [node(f"big{i}", 8, labels={**A100, **({RACK: rack} if rack else {})}) for i in range(count)]


def small(count: int) -> list[NodeInfo]:
    return [node(f"small{i}", 2, labels=A100) for i in range(count)]


def test_names_carry_the_size_whatever_other_nodes_exist() -> None:
    alone = discover_layout(big(4, rack="r0"), rack_label=RACK).cell_types
    beside = discover_layout(big(4, rack="r0") + small(2), rack_label=RACK).cell_types
    assert set(alone) == {f"{PRODUCT}-8GPU-NODE", f"{PRODUCT}-8GPU-RACK"}
    assert {name: alone[name] for name in alone} == {name: beside[name] for name in alone}
    assert set(beside) - set(alone) == {f"{PRODUCT}-2GPU-NODE"}


def test_running_names_after_nodes_join_are_the_restart_names() -> None:
    engine = HivedEngine.from_nodes(big(2))
    for n in small(2):
        engine.apply_node(n)
    restart = discover_layout(big(2) + small(2)).cell_types
    assert dict(engine.topology.config.cell_types) == restart
    assert {c.cell_type for c in engine.topology.top_cells} == {f"{PRODUCT}-8GPU-NODE", f"{PRODUCT}-2GPU-NODE"}


def test_a_config_with_the_stable_name_survives_a_new_node_size_and_a_restart() -> None:
    config = {"virtualClusters": {"vc-a": [{"cellType": f"{PRODUCT}-8GPU-NODE", "count": 2}]}}
    assert check_config(config, nodes=big(2)).warnings == ()
    engine = HivedEngine.from_config(config, nodes=big(2))
    for n in small(2):
        engine.apply_node(n)
    restarted = HivedEngine.from_config(config, nodes=big(2) + small(2))
    assert restarted.checked.warnings == ()
    assert schedule(restarted, pod("p", 8, vc="vc-a"), ["big0", "big1", "small0"]) is not None


def test_the_old_unsized_name_is_accepted_with_the_stable_name_to_write_while_one_size_exists() -> None:
    config = {"virtualClusters": {"vc-a": [{"cellType": f"{PRODUCT}-NODE", "count": 1}, {"cellType": PRODUCT, "count": 4}]}}
    checked = check_config(config, nodes=big(2), prefix="cells")
    assert [c.cell_type for c in checked.virtual_clusters["vc-a"].cells] == [f"{PRODUCT}-8GPU-NODE", f"{PRODUCT}-8GPU"]
    assert checked.warnings == (
        f"cells.virtualClusters.vc-a[0].cellType: '{PRODUCT}-NODE' is the name discovery gave before cell-type names "
        f"carried the node size; it means '{PRODUCT}-8GPU-NODE' while the cluster has one node size of its GPU product, "
        f"and names nothing once another size joins: write '{PRODUCT}-8GPU-NODE'",
        f"cells.virtualClusters.vc-a[1].cellType: '{PRODUCT}' is the name discovery gave before cell-type names "
        f"carried the node size; it means '{PRODUCT}-8GPU' while the cluster has one node size of its GPU product, "
        f"and names nothing once another size joins: write '{PRODUCT}-8GPU'",
    )
    engine = HivedEngine.from_config(config, nodes=big(2), prefix="cells")
    assert schedule(engine, pod("p", 8, vc="vc-a"), ["big0", "big1"]) is not None


def test_the_old_unsized_rack_name_is_accepted_too() -> None:
    config = {"virtualClusters": {"vc-a": {"cells": [{"cellType": f"{PRODUCT}-RACK", "count": 1}]}}}
    checked = check_config(config, nodes=big(4, rack="r0"), rack_label=RACK, prefix="cells")
    assert checked.virtual_clusters["vc-a"].cells[0].cell_type == f"{PRODUCT}-8GPU-RACK"
    assert checked.warnings[0].startswith(f"cells.virtualClusters.vc-a.cells[0].cellType: '{PRODUCT}-RACK' is the name")


def test_after_a_second_size_joins_the_old_name_leaves_its_vc_unserved_naming_the_stable_names() -> None:
    # H4: valid at install, then 2-GPU A100 nodes joined and the scheduler restarted. It serves
    # the other tenants; the VC's pods are told why, naming the field and the names to choose from.
    config = {"virtualClusters": {"vc-a": [{"cellType": f"{PRODUCT}-NODE", "count": 1}], "vc-b": [{"cellType": f"{PRODUCT}-2GPU-NODE", "count": 1}]}}
    nodes = big(2) + small(2)
    engine = HivedEngine.from_config(config, nodes=nodes, prefix="cells")
    said = (
        f"cells.virtualClusters.vc-a[0].cellType: '{PRODUCT}-NODE' is ambiguous: the cluster has its GPU product in 2 "
        f"node sizes, and discovered cell-type names carry the size: write one of '{PRODUCT}-2GPU-NODE', '{PRODUCT}-8GPU-NODE'"
    )
    assert engine.checked.unserved == {"vc-a": f"{said} (the configuration names cell types the cluster's discovered cells do "
                                                "not have; fix cells.virtualClusters and the live reload serves it)"}
    assert engine.summary.endswith("; not served: vc-a") and "vc-b (1 " in engine.summary
    names = [n.name for n in nodes]
    assert schedule(engine, pod("b", 2, vc="vc-b"), names) is not None
    refused = filter_offered(engine, pod("a", 8, vc="vc-a"), names).unresolvable["big0"]
    assert refused.startswith(f"virtual cluster 'vc-a' is not served: {said}"), refused
    # The admin writes the stable name; the live reload serves the VC, and nothing is unserved.
    engine.reconfigure({"virtualClusters": {**config["virtualClusters"], "vc-a": [{"cellType": f"{PRODUCT}-8GPU-NODE", "count": 1}]}},
                       prefix="cells")
    assert schedule(engine, pod("a", 8, vc="vc-a"), names) is not None
    assert "not served" not in engine.summary


def test_when_no_vc_can_be_served_none_is_and_no_implicit_default_takes_the_cells() -> None:
    engine = HivedEngine.from_config({"virtualClusters": {"vc-a": [{"cellType": "H100-NODE", "count": 1}]}}, nodes=big(1))
    assert set(engine.checked.unserved) == {"vc-a"} and engine.default_vc is None
    assert "unknown cell type 'H100-NODE'" in filter_offered(engine, pod("p", 1, vc="vc-a"), ["big0"]).unresolvable["big0"]
    assert "no cellfit.io/virtual-cluster label" in filter_offered(engine, pod("q", 1, vc=None), ["big0"]).unresolvable["big0"]


def test_a_vc_problem_that_is_not_a_missing_cell_type_still_refuses() -> None:
    config = {"virtualClusters": {"vc-a": [{"cellType": f"{PRODUCT}-8GPU-NODE", "count": 3}], "vc-b": [{"cellType": "H100-NODE", "count": 1}]}}
    with pytest.raises(ConfigError, match="over-commit|exceed|reserve"):
        check_config(config, nodes=big(2), prefix="cells")


def test_a_reload_may_use_the_old_name_while_it_is_unambiguous() -> None:
    engine = HivedEngine.from_nodes(big(2))
    engine.reconfigure({"virtualClusters": {"vc-a": [{"cellType": f"{PRODUCT}-NODE", "count": 2}]}}, prefix="cells")
    assert dict(engine.allocator.vcs["vc-a"].quota) == {f"{PRODUCT}-8GPU-NODE": 2}
    for n in small(1):
        engine.apply_node(n)
    with pytest.raises(ConfigError, match=rf"cells.virtualClusters.vc-a\[0\].cellType: '{PRODUCT}-NODE' is ambiguous"):
        engine.reconfigure({"virtualClusters": {"vc-a": [{"cellType": f"{PRODUCT}-NODE", "count": 1}]}}, prefix="cells")
    assert dict(engine.allocator.vcs["vc-a"].quota) == {f"{PRODUCT}-8GPU-NODE": 2}  # the last valid VCs kept


def test_an_old_name_and_its_stable_name_in_one_vc_are_listed_twice() -> None:
    config = {"virtualClusters": {"vc-a": [{"cellType": f"{PRODUCT}-NODE", "count": 1}, {"cellType": f"{PRODUCT}-8GPU-NODE", "count": 1}]}}
    with pytest.raises(ConfigError, match=rf"vc-a\[1\].cellType: '{PRODUCT}-8GPU-NODE' is listed twice"):
        check_config(config, nodes=big(2))


def test_legacy_names_never_shadow_a_discovered_name() -> None:
    # A product whose label ends like a size: its stable names stay what they are.
    types = discover_layout([node("x", 4, labels={"nvidia.com/gpu.product": "X-8GPU"}), node("y", 8, labels={"nvidia.com/gpu.product": "X"})]).cell_types
    assert {"X-8GPU-4GPU-NODE", "X-8GPU-NODE"} <= set(types)
    from scheduler.cells.discovery import legacy_names  # here: the tests above run on the tree before it too

    legacy = legacy_names(types)
    assert legacy.resolve("X-8GPU-NODE") == ("X-8GPU-NODE", None)
    assert legacy.resolve("X-NODE")[0] == "X-8GPU-NODE"


def test_a_hand_written_topology_gets_no_aliases() -> None:
    config = {
        "topology": {
            "cellTypes": {"A-8GPU-NODE": {"childType": "A-8GPU", "childCount": 8, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "A-8GPU-NODE", "nodeName": "n0"}],
        },
        "virtualClusters": {"v": [{"cellType": "A-NODE", "count": 1}]},
    }
    with pytest.raises(ConfigError, match="unknown cell type 'A-NODE'"):
        check_config(config)


def _upgrade_cluster() -> list[NodeInfo]:
    return [node(f"r0n{i}", 8, labels={**A100, RACK: "r0"}) for i in range(2)] + [node("solo", 8, labels=A100)]


def test_pods_bound_under_the_old_names_are_recovered_in_the_same_cells_after_the_upgrade() -> None:
    """A cluster of one A100 size upgraded: its pods' bind-info names the cells as discovery did
    before (``<product>-RACK@r0``, ``solo/<product>#3``); a restart recovers each in exactly the
    cells it held, re-homing none."""
    config = {"virtualClusters": {"a": [{"cellType": f"{PRODUCT}-8GPU-RACK", "count": 1}], "b": [{"cellType": f"{PRODUCT}-8GPU", "count": 2}]}}
    nodes = _upgrade_cluster()
    names = [n.name for n in nodes]
    engine = HivedEngine.from_config(config, nodes=nodes, rack_label=RACK)
    placed = [schedule(engine, p, names) for p in (pod("a0", 8, vc="a"), pod("b0", 1, vc="b", cell_type=f"{PRODUCT}-8GPU"), pod("b1", 1, vc="b"))]
    assert all(p is not None for p in placed)
    expected = snapshot(engine)
    old = []
    for p in placed:
        assert p is not None
        written = {k: v.replace(f"{PRODUCT}-8GPU", PRODUCT) for k, v in p.annotations.items()}
        assert written != dict(p.annotations) or p.uid == "a0"
        old.append(msgspec.structs.replace(p, annotations=written))
    assert any(f"{PRODUCT}-RACK@r0" in v for p in old for v in p.annotations.values())
    assert any(f"/{PRODUCT}#" in v for p in old for v in p.annotations.values())
    restarted = HivedEngine.from_config(
        {"virtualClusters": {"a": [{"cellType": f"{PRODUCT}-RACK", "count": 1}], "b": [{"cellType": PRODUCT, "count": 2}]}},
        nodes=nodes, rack_label=RACK,
    )
    for p in old:
        restarted.apply_pod(p)
    assert snapshot(restarted) == expected
    assert list(restarted.allocator.anomalies) == []


def test_a_pod_naming_the_old_cell_type_is_placed_while_it_is_unambiguous_and_told_the_choices_after() -> None:
    engine = HivedEngine.from_nodes(big(1))
    placed = schedule(engine, pod("p", 1, vc=None, cell_type=f"{PRODUCT}-NODE"), ["big0"])
    assert placed is not None and placed.node_name == "big0"
    engine.apply_node(small(1)[0])
    refused = filter_offered(engine, pod("q", 1, vc=None, cell_type=f"{PRODUCT}-NODE"), ["big0", "small0"]).unresolvable["big0"]
    assert refused == (f"cell type '{PRODUCT}-NODE' in annotation cellfit.io/cell-type is ambiguous: the cluster has its GPU "
                       f"product in 2 node sizes, and discovered cell-type names carry the size: set one of "
                       f"'{PRODUCT}-2GPU-NODE', '{PRODUCT}-8GPU-NODE'")
