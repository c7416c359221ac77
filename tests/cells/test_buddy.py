"""Algorithm 1 (buddy cell allocation) and Theorem 1.

Theorem 1 (HiveD §3.1): under a feasible initial VC assignment, every *legal* request succeeds,
where a request by tenant t for a level-k cell is legal iff ``a_{t,k} < r_{t,k}``. The proof
keeps, after every allocation and release, the invariant

    r_k - a_k <= f_k + F_k        for every level k,

with ``r_k = sum_t r_{t,k}`` the level-k cells all VCs reserve, ``a_k`` those currently
allocated (bound), ``f_k`` the free level-k cells on the buddy free list, ``h_k`` the number of
level-(k-1) buddies in a level-k cell, and ``F_k`` the level-k cells obtainable by splitting
free higher cells that the higher levels' outstanding reservations do not need (Eqn. 1):

    F_top = 0,   F_k = (f_{k+1} + F_{k+1} - (r_{k+1} - a_{k+1})) * h_{k+1}.

The property test below recomputes every quantity independently of the allocator (free cells by
scanning cell states, F_k by its own implementation of Eqn. 1), drives long random sequences of
legal allocations and releases at random levels, and checks both the invariant after every step
and that no legal allocation ever fails.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cells.allocator import CellAllocator
from scheduler.cells.buddy import BuddyAllocator
from scheduler.cells.config import VirtualCellSpec, VirtualClusterSpec, parse_cells_config
from scheduler.cells.topology import Cell, CellState, Chain, Topology


def chain_topology(child_counts: list[int], node_level: int, tops: list[int]) -> dict[str, Any]:
    """A one-chain topology with the given fan-outs (level 2 upwards) and top-level cells at
    the given levels (each >= node_level)."""
    names = ["G"] + [f"L{k}" for k in range(2, len(child_counts) + 2)]
    types = {
        names[k]: {"childType": names[k - 1], "childCount": child_counts[k - 1], **({"isNodeLevel": True} if k + 1 == node_level else {})}
        for k in range(1, len(names))
    }
    counter = [0]

    def spec(level: int) -> dict[str, Any]:
        if level == node_level:
            counter[0] += 1
            return {"cellType": names[level - 1], "nodeName": f"n{counter[0]}"}
        return {"cellType": names[level - 1], "cellChildren": [spec(level - 1) for _ in range(child_counts[level - 2])]}

    return {"topology": {"cellTypes": types, "physicalCells": [spec(level) for level in tops]}}


def free_by_scan(topology: Topology, chain: Chain) -> list[int]:
    free = [0] * chain.top
    for cell in topology.all_cells():
        if cell.chain is chain and cell.buddy_state() is CellState.FREE:
            free[cell.level - 1] += 1
    return free


def eqn1(free: list[int], remaining: list[int], chain: Chain) -> list[int]:
    big_f = [0] * chain.top
    for k in range(chain.top - 1, 0, -1):
        big_f[k - 1] = (free[k] + big_f[k] - remaining[k]) * chain.child_counts[k]
    return big_f


# ---------------------------------------------------------------------------- split / merge


def test_split_and_merge_restore_the_free_lists():
    config = parse_cells_config(chain_topology([2, 2, 2], node_level=3, tops=[4]))
    topology = Topology(config.topology)
    chain = topology.used_chains[0]
    buddy = BuddyAllocator(chain, topology.top_cells)
    assert buddy.free_counts() == [0, 0, 0, 1]
    gpu = buddy.find(1, lambda c: True, lambda: [0, 0, 0, 0])
    assert gpu is not None and gpu.level == 1
    buddy.take(gpu)
    # One split per level: each level keeps the buddy that was not split further.
    assert buddy.free_counts() == [1, 1, 1, 0]
    second = buddy.find(1, lambda c: True, lambda: [0, 0, 0, 0])
    assert second is not None and second.parent is gpu.parent  # the free buddy, no new split
    buddy.take(second)
    assert buddy.free_counts() == [0, 1, 1, 0]
    buddy.give(gpu)
    assert buddy.free_counts() == [1, 1, 1, 0]
    buddy.give(second)
    assert buddy.free_counts() == [0, 0, 0, 1]  # merged all the way up
    assert topology.top_cells[0].state is CellState.FREE


def test_take_a_specific_cell_splits_its_ancestors():
    config = parse_cells_config(chain_topology([2, 2, 2], node_level=3, tops=[4]))
    topology = Topology(config.topology)
    buddy = BuddyAllocator(topology.used_chains[0], topology.top_cells)
    target: Cell = topology.top_cells[0].children[1].children[0]
    assert buddy.is_takeable(target)
    buddy.take(target)
    assert target.state is CellState.BOUND and not buddy.is_takeable(target)
    assert buddy.free_counts() == [0, 1, 1, 0]
    buddy.give(target)
    assert buddy.free_counts() == [0, 0, 0, 1]


def test_free_cells_are_only_the_highest():
    config = parse_cells_config(chain_topology([2, 2], node_level=2, tops=[3, 3]))
    topology = Topology(config.topology)
    chain = topology.used_chains[0]
    alloc = CellAllocator(topology, {"t": VirtualClusterSpec(cells=(VirtualCellSpec(cell_type="G", count=3),))})
    vc = alloc.vcs["t"]
    taken = []
    for _ in range(3):
        cell = alloc.buddies[chain].find(1, lambda c: True, lambda: alloc.demand(chain))
        assert cell is not None
        alloc.virtual_clusters.bind(vc, cell)
        taken.append(cell)
    # All three GPUs come from one top cell: splitting a second top cell would fragment it.
    assert len({c.parent.parent for c in taken}) == 1
    for cell in taken:
        alloc.virtual_clusters.unbind(cell)
    assert free_by_scan(topology, chain) == [0, 0, 2]


def test_dirty_free_cells_are_taken_last():
    config = parse_cells_config(chain_topology([4], node_level=2, tops=[2, 2]))
    topology = Topology(config.topology)
    chain = topology.used_chains[0]
    buddy = BuddyAllocator(chain, topology.top_cells)
    first = topology.top_cells[0]
    first.opportunistic_used = 3  # pretend opportunistic pods run there
    buddy.reclassify(first)
    chosen = buddy.find(2, lambda c: True, lambda: [0, 0])
    assert chosen is topology.top_cells[1]


# ---------------------------------------------------------------------------- Theorem 1


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, dict[int, int]]]:
    levels = draw(st.integers(2, 5))
    child_counts = [draw(st.integers(1, 3)) for _ in range(levels - 1)]
    node_level = draw(st.integers(2, levels))
    tops = draw(st.lists(st.integers(node_level, levels), min_size=1, max_size=4))
    tenants = draw(st.integers(1, 4))
    quotas: dict[str, dict[int, int]] = {f"t{i}": {} for i in range(tenants)}

    # A feasible assignment by construction: carve every physical top cell, handing whole cells
    # to random tenants, splitting some, leaving some unassigned (spare capacity).
    def carve(level: int) -> None:
        options = ["give", "spare"] + (["split", "split"] if level > 1 else [])
        choice = draw(st.sampled_from(options))
        if choice == "give":
            tenant = f"t{draw(st.integers(0, tenants - 1))}"
            quotas[tenant][level] = quotas[tenant].get(level, 0) + 1
        elif choice == "split":
            for _ in range(child_counts[level - 2]):
                carve(level - 1)

    for top in tops:
        carve(top)
    return chain_topology(child_counts, node_level, tops), quotas


@settings(max_examples=120, deadline=None, derandomize=True)
@given(scenarios(), st.data())
def test_theorem1_every_legal_allocation_succeeds(scenario, data):
    raw, quotas = scenario
    config = parse_cells_config(raw)
    topology = Topology(config.topology)
    chain = topology.used_chains[0]
    vcs = {
        t: VirtualClusterSpec(cells=tuple(VirtualCellSpec(cell_type=chain.type_at(k), count=n) for k, n in sorted(q.items())))
        for t, q in quotas.items()
    }
    alloc = CellAllocator(topology, vcs)
    held: list[tuple[str, Cell]] = []
    reserved = [sum(q.get(k, 0) for q in quotas.values()) for k in range(1, chain.top + 1)]

    def check_invariant() -> None:
        allocated = [sum(1 for _, c in held if c.level == k) for k in range(1, chain.top + 1)]
        remaining = [r - a for r, a in zip(reserved, allocated)]
        free = free_by_scan(topology, chain)
        assert free == alloc.buddies[chain].free_counts()
        big_f = eqn1(free, remaining, chain)
        for k in range(chain.top):
            assert remaining[k] <= free[k] + big_f[k], (k + 1, remaining, free, big_f)

    check_invariant()
    steps = data.draw(st.integers(20, 150))
    for _ in range(steps):
        legal = [(t, k) for t, q in quotas.items() for k, n in q.items() if sum(1 for h, c in held if h == t and c.level == k) < n]
        if legal and (not held or data.draw(st.booleans())):
            tenant, level = data.draw(st.sampled_from(legal))
            cell = alloc.buddies[chain].find(level, lambda c: True, lambda: alloc.demand(chain))
            assert cell is not None, f"legal request of {tenant} for a level-{level} cell failed"
            assert cell.level == level
            alloc.virtual_clusters.bind(alloc.vcs[tenant], cell)
            held.append((tenant, cell))
        elif held:
            index = data.draw(st.integers(0, len(held) - 1))
            _, cell = held.pop(index)
            alloc.virtual_clusters.unbind(cell)
        check_invariant()
        # The allocator's own accounting agrees with the test's.
        assert [r for r, _, _ in alloc.invariant(chain)] == [
            r - sum(1 for _, c in held if c.level == k) for k, r in enumerate(reserved, start=1)
        ]
    # Releasing everything merges the free lists back to the physical top cells.
    for _, cell in held:
        alloc.virtual_clusters.unbind(cell)
    assert sorted(c.level for c in topology.top_cells) == sorted(
        c.level for c in topology.all_cells() if c.buddy_state() is CellState.FREE
    )
