"""``kubectl cellfit vcs`` marks a VC's cells that cannot serve it now (user24 F8): after GPU
nodes were deleted below what the VCs reserve, team-b's quota read QUOTA 1 UNBOUND 1, as if it
were there to take, while no free healthy node cell was left to bind it; and a VC's bound cell on
a node gone bad read as any other. The views are a real HiveD engine's inspect output."""

from __future__ import annotations

from typing import Any

from scheduler.cells import HivedEngine
from scheduler.cells.config import parse_cells_config
from scheduler.kubectl import output, views
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names(1, 4)


def engine_with_team_a_on_two_nodes() -> HivedEngine:
    engine = HivedEngine.from_config(parse_cells_config(rack_cluster(1, 4, vcs={
        "team-a": [{"cellType": "V100-NODE", "count": 2}], "team-b": [{"cellType": "V100-NODE", "count": 1}]})))
    for name in NODES:
        engine.apply_node(node(name))
    for i in range(2):
        placed = schedule(engine, pod(f"a-{i}", 8, vc="team-a"), NODES)
        assert placed is not None
        engine.apply_pod(placed)
    return engine


def table(engine: HivedEngine) -> dict[str, dict[str, str]]:
    rows = views.vc_rows(engine.inspect_virtual_clusters(), cells=engine.inspect_cells(gpus=False))
    lines = output.table(rows, views.vc_columns(rows), empty="none").splitlines()
    header = lines[0].split()
    at = header.index("CANNOT-BIND") if "CANNOT-BIND" in header else len(header)
    return {line.split()[0]: {**dict(zip(header[:at], line.split()[:at])), "CANNOT-BIND": " ".join(line.split()[at:])}
            for line in lines[1:]}


def test_a_healthy_cluster_has_no_cannot_bind_column() -> None:
    engine = engine_with_team_a_on_two_nodes()
    rows = views.vc_rows(engine.inspect_virtual_clusters(), cells=engine.inspect_cells(gpus=False))
    assert views.vc_columns(rows) == views.VC_COLUMNS
    assert all(not row.get("cannot-bind") for row in rows)


def test_nodes_deleted_below_the_vcs_total_mark_the_quota_that_cannot_be_bound_and_the_bad_bound_cell() -> None:
    engine = engine_with_team_a_on_two_nodes()
    used = {p["node"] for p in engine.inspect_virtual_cluster("team-a")["placements"]}  # type: ignore[index]
    free_nodes = [n for n in NODES if n not in used]
    engine.delete_node(free_nodes[0])
    engine.delete_node(free_nodes[1])
    engine.delete_node(sorted(used)[0])  # team-a's pod still holds its GPUs there
    seen = table(engine)
    assert (seen["team-b"]["QUOTA"], seen["team-b"]["UNBOUND"]) == ("1", "1")
    assert seen["team-b"]["CANNOT-BIND"] == "1 unbound: 0 free healthy cells for 1 unbound in all VCs", seen
    assert seen["team-a"]["CANNOT-BIND"] == f"1 bound on bad nodes ({sorted(used)[0]} deleted)", seen


def test_a_vc_short_of_cells_is_marked_only_when_the_free_cells_are_too_few() -> None:
    engine = engine_with_team_a_on_two_nodes()
    used = {p["node"] for p in engine.inspect_virtual_cluster("team-a")["placements"]}  # type: ignore[index]
    engine.delete_node(next(n for n in NODES if n not in used))  # one free node left: enough for team-b's 1
    seen: Any = table(engine)
    assert seen["team-b"]["CANNOT-BIND"] in ("", "-"), seen
