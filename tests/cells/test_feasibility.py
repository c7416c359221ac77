"""Feasibility of VC assignments: exact, and the error names the over-committed level."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cells import check_config
from scheduler.cells.config import VirtualCellSpec, VirtualClusterSpec, parse_cells_config
from scheduler.cells.feasibility import shortfalls
from scheduler.cells.topology import Topology
from scheduler.errors import ConfigError
from tests.cells.helpers import rack_cluster


def test_full_assignment_is_feasible():
    check_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 4}]}))


def test_overcommitted_level_is_named_with_its_vcs():
    data = rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 3}], "c": [{"cellType": "V100-NODE", "count": 2}]})
    with pytest.raises(ConfigError) as info:
        check_config(data)
    text = str(info.value)
    assert text.startswith("virtualClusters: over-committed at level 'V100-NODE'")
    assert "reserve 5 such cells (b 3, c 2)" in text and "can provide 4" in text


def test_higher_level_reported_first():
    data = rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 3}]})
    with pytest.raises(ConfigError, match="over-committed at level 'V100-RACK'"):
        check_config(data)


def test_lower_levels_see_what_higher_levels_left():
    # 2 racks x 4 nodes: 1 rack + 3 nodes leave exactly one node = 4 switches.
    ok = rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}, {"cellType": "V100-NODE", "count": 3}, {"cellType": "V100-SWITCH", "count": 4}]})
    check_config(ok)
    bad = rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}, {"cellType": "V100-NODE", "count": 3}, {"cellType": "V100-SWITCH", "count": 5}]})
    with pytest.raises(ConfigError, match="over-committed at level 'V100-SWITCH'"):
        check_config(bad)


def test_pinned_cells_leave_the_pool():
    data = rack_cluster(vcs={"a": {"pinnedCells": ["p"]}, "b": [{"cellType": "V100-RACK", "count": 2}]})
    data["topology"]["physicalCells"][0]["cellChildren"][0]["pinnedCellId"] = "p"
    with pytest.raises(ConfigError, match="over-committed at level 'V100-RACK'"):
        check_config(data)
    data["virtualClusters"]["b"] = [{"cellType": "V100-RACK", "count": 1}, {"cellType": "V100-NODE", "count": 3}]
    check_config(data)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_feasible_iff_a_mapping_exists(data):
    """Random assignments built by carving physical cells are feasible; one extra cell at the
    level that has nothing left over is not."""
    racks = data.draw(st.integers(1, 3))
    config = parse_cells_config(rack_cluster(racks=racks, nodes_per_rack=2, vcs={}))
    topology = Topology(config.topology)
    chain = topology.used_chains[0]
    counts = [0] * chain.top
    leftover = [0] * chain.top

    def carve(level: int) -> bool:
        """Carve a level-``level`` cell; True when nothing of it was taken. Leftovers are
        recorded at the highest wholly-free level, like the buddy free lists."""
        choice = data.draw(st.sampled_from(["take", "split", "skip"] if level > 1 else ["take", "skip"]))
        if choice == "take":
            counts[level - 1] += 1
            return False
        if choice == "skip":
            return True
        free = [carve(level - 1) for _ in range(chain.child_counts[level - 1])]
        if all(free):
            return True
        leftover[level - 2] += sum(free)
        return False

    for _ in range(racks):
        if carve(chain.top):
            leftover[chain.top - 1] += 1
    vcs = {"a": VirtualClusterSpec(cells=tuple(VirtualCellSpec(cell_type=chain.type_at(k + 1), count=n) for k, n in enumerate(counts) if n))}
    assert shortfalls(topology, vcs) == []
    # Adding one cell at level k is feasible iff some carved-away (skipped) cell at level >= k exists.
    level = data.draw(st.integers(1, chain.top))
    more = list(counts)
    more[level - 1] += 1
    vcs_more = {"a": VirtualClusterSpec(cells=tuple(VirtualCellSpec(cell_type=chain.type_at(k + 1), count=n) for k, n in enumerate(more) if n))}
    spare_at_or_above = any(leftover[k] for k in range(level - 1, chain.top))
    assert (shortfalls(topology, vcs_more) == []) == spare_at_or_above
