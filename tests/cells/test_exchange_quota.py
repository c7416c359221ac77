"""The quota move of a matched exchange: the VC specs during and after its window, the
feasibility proof before anything changes, and the real engine carrying it out through
``reconfigure`` (the borrower's pods at the window's end drain, bounded by the grace period)."""

from __future__ import annotations

import random

import pytest

from scheduler.cells import CellsConfig, HivedEngine, VirtualCellSpec, VirtualClusterSpec
from scheduler.cells.config import parse_cells_config
from scheduler.cells.exchange import (
    DEFAULT_RETURN_GRACE_SECONDS,
    CellCatalog,
    Match,
    Offer,
    QuotaProof,
    Request,
    Window,
    cells_of,
    do_matching,
    offer_problems,
    project,
    reconfiguration,
    window_plan,
)
from scheduler.cells.feasibility import feasibility_problems
from scheduler.cells.topology import Topology
from tests.cells.helpers import node_names, pod, rack_cluster, schedule
from scheduler.kube.names import filter_offered

HOUR = 3600.0


def specs(**vcs: dict[str, int]) -> dict[str, VirtualClusterSpec]:
    return {name: VirtualClusterSpec(cells=tuple(VirtualCellSpec(cell_type=t, count=n) for t, n in cells.items())) for name, cells in vcs.items()}


def counts(spec: VirtualClusterSpec) -> dict[str, int]:
    return {c.cell_type: c.count for c in spec.cells}


def exchange(
    lender: str, borrower: str, offered=None, asked=None, start=0.0, end=2 * HOUR, oid="o1", rid="r1"
) -> Match:
    offered = cells_of(offered or {"V100-NODE": 1})
    asked = cells_of(asked or dict(offered))
    window = Window(start=start, end=end)
    return Match(
        request=Request(id=rid, tenant=borrower, cells=asked, window=window, posted=0),
        offer=Offer(id=oid, tenant=lender, cells=offered, window=window, posted=0),
        window=window,
        gpus=8,
        gpu_hours=8 * window.hours,
        explanation="",
    )


def config(racks=1, nodes=4, **vcs: dict[str, int]) -> CellsConfig:
    data = rack_cluster(racks, nodes, vcs={name: [{"cellType": t, "count": n} for t, n in cells.items()] for name, cells in vcs.items()})
    return parse_cells_config(data)


def test_project_moves_quota_only_inside_the_window():
    base = specs(a={"V100-NODE": 2}, b={"V100-NODE": 1})
    m = exchange("a", "b", start=HOUR, end=3 * HOUR)
    before, problems = project(base=base, matches=[m], at=HOUR - 1)
    assert before == base and problems == []
    during, _ = project(base=base, matches=[m], at=HOUR)
    assert counts(during["a"]) == {"V100-NODE": 1} and counts(during["b"]) == {"V100-NODE": 2}
    after, _ = project(base=base, matches=[m], at=3 * HOUR)  # half-open: the cells are back at the end
    assert after == base


def test_spatial_exchange_converts_the_cells():
    base = specs(a={"V100-NODE": 2}, b={"V100-SWITCH": 1})
    during, problems = project(base=base, matches=[exchange("a", "b", asked={"V100": 8})], at=0)
    assert problems == []
    assert counts(during["a"]) == {"V100-NODE": 1}
    assert [(c.cell_type, c.count) for c in during["b"].cells] == [("V100-SWITCH", 1), ("V100", 8)]  # new type after the configured ones


def test_lending_everything_keeps_a_zero_count_and_pinned_cells_never_move():
    base = {"a": VirtualClusterSpec(cells=(VirtualCellSpec(cell_type="V100-NODE", count=1),), pinned_cells=("p",)), **specs(b={})}
    during, _ = project(base=base, matches=[exchange("a", "b")], at=0)
    assert counts(during["a"]) == {"V100-NODE": 0} and during["a"].pinned_cells == ("p",)
    assert counts(during["b"]) == {"V100-NODE": 1} and during["b"].pinned_cells == ()


def test_project_names_a_lender_lending_what_it_does_not_hold_and_unknown_vcs():
    base = specs(a={"V100-NODE": 1}, b={})
    two = [exchange("a", "b", oid="o1"), exchange("a", "b", oid="o2", rid="r2", start=HOUR)]
    _, problems = project(base=base, matches=two, at=0)
    assert problems == []  # only o1 is under way at 0
    _, problems = project(base=base, matches=two, at=HOUR)
    assert problems == [
        "virtualClusters.a.cells: lends 2 V100-NODE at 3600 (exchange o1 -> r1, exchange o2 -> r2) but its quota holds 1 with the exchanges then"
    ]
    _, problems = project(base=base, matches=[exchange("ghost", "b")], at=0)
    assert problems == ["virtualClusters.ghost: is not a configured virtual cluster (exchange o1 -> r1)"]


def test_proof_admits_a_feasible_exchange_and_refuses_with_the_named_reason():
    cfg = config(a={"V100-NODE": 2}, b={"V100-NODE": 1}, c={"V100-NODE": 1})
    topology = Topology(cfg.topology)
    proof = QuotaProof(topology=topology, base=cfg.virtual_clusters)
    assert proof(exchange("a", "b"), ()) is None
    assert proof(exchange("a", "c", asked={"V100": 8}), ()) is None
    # The lender's quota was cut by a live reload after it posted: it no longer holds the cell.
    shrunk = QuotaProof(topology=topology, base=specs(a={"V100-NODE": 0}, b={"V100-NODE": 1}))
    reason = shrunk(exchange("a", "b"), ())
    assert reason.startswith("exchange o1 -> r1 (1 V100-NODE of a for 1 V100-NODE of b) during [0, 7200): virtualClusters.a.cells: lends 1 V100-NODE")


def test_proof_runs_feasibility_over_the_projected_specs():
    cfg = config(a={"V100-NODE": 2}, b={"V100-NODE": 2})
    topology = Topology(cfg.topology)
    # A base that over-commits the rack (as the configuration would be refused): the proof says so.
    over = QuotaProof(topology=topology, base=specs(a={"V100-NODE": 3}, b={"V100-NODE": 2}))
    reason = over(exchange("a", "b", asked={"V100": 8}), ())
    assert "during [0, 7200): virtualClusters: over-committed at level 'V100' (hierarchy" in reason


def test_proof_checks_every_moment_with_the_exchanges_already_admitted():
    cfg = config(a={"V100-NODE": 2}, b={"V100-NODE": 1}, c={"V100-NODE": 1})
    proof = QuotaProof(topology=Topology(cfg.topology), base=cfg.virtual_clusters, active=(exchange("a", "c", start=0, end=3 * HOUR),))
    assert proof(exchange("a", "b", oid="o2", rid="r2", start=HOUR, end=2 * HOUR), ()) is None  # a lends 2 of 2
    third = exchange("a", "b", oid="o3", rid="r3", start=2 * HOUR, end=4 * HOUR)
    earlier = exchange("a", "b", oid="o2", rid="r2", start=HOUR, end=5 * HOUR)
    reason = proof(third, (earlier,))
    assert "during [7200, 10800)" in reason and "lends 3 V100-NODE" in reason  # until c's exchange ends
    # Once c's exchange is over, a holds 2 again: a window starting there is fine.
    assert proof(exchange("a", "b", oid="o4", rid="r4", start=3 * HOUR, end=4 * HOUR), (earlier,)) is None


def test_arbiter_with_the_proof_skips_an_offer_that_cannot_be_carried_out():
    cfg = config(a={"V100-NODE": 1}, b={"V100-NODE": 1}, c={"V100-NODE": 1}, d={"V100-NODE": 1})
    catalog = CellCatalog(cfg.topology.cell_types)
    proof = QuotaProof(topology=Topology(cfg.topology), base={**cfg.virtual_clusters, "a": specs(a={"V100-NODE": 0})["a"]})
    offers = [
        Offer(id="oa", tenant="a", cells=cells_of({"V100-NODE": 1}), window=Window(start=0, end=4 * HOUR), posted=0),
        Offer(id="ob", tenant="b", cells=cells_of({"V100-NODE": 1}), window=Window(start=0, end=4 * HOUR), posted=1),
    ]
    requests = [Request(id="rd", tenant="d", cells=cells_of({"V100": 8}), window=Window(start=0, end=HOUR), posted=0)]
    result = do_matching(offers=offers, requests=requests, surplus={"a": -1.0}, catalog=catalog, now=0, admit=proof)
    assert [(m.request.id, m.offer.id) for m in result.matches] == [("rd", "ob")]
    assert [(r.offer.id, "virtualClusters.a.cells" in r.reason) for r in result.refused] == [("oa", True)]


def test_offers_that_validate_always_prove_feasible():
    """The packing rule (asked cells inside offered ones, same chain) keeps a feasible assignment
    feasible: over random boards of validated offers, the proof never refuses."""
    rng = random.Random(31)
    kinds = [{"V100-NODE": 1}, {"V100-SOCKET": 1}, {"V100-SWITCH": 2}, {"V100-RACK": 1}]
    asks = {"V100-NODE": [{"V100-NODE": 1}, {"V100": 8}, {"V100-SOCKET": 2}], "V100-SOCKET": [{"V100-SOCKET": 1}, {"V100": 4}],
            "V100-SWITCH": [{"V100-SWITCH": 2}, {"V100-SOCKET": 1}, {"V100": 4}], "V100-RACK": [{"V100-NODE": 4}, {"V100-RACK": 1}]}
    matched = bases = 0
    for _ in range(150):
        cfg = config(
            racks=2,
            a={"V100-RACK": 1},
            b={"V100-NODE": rng.randint(0, 2), "V100-SOCKET": rng.randint(0, 2)},
            c={"V100-NODE": rng.randint(0, 1), "V100-SWITCH": rng.randint(0, 3)},
        )
        if feasibility_problems(Topology(cfg.topology), cfg.virtual_clusters):
            continue  # only a feasible configuration runs
        bases += 1
        catalog = CellCatalog(cfg.topology.cell_types)
        offers: list[Offer] = []
        for i in range(8):
            kind = rng.choice(kinds)
            candidate = Offer(
                id=f"o{i}", tenant=rng.choice("abc"), cells=cells_of(kind),
                window=Window(start=rng.randint(0, 4) * HOUR, end=rng.randint(5, 9) * HOUR), posted=i,
            )
            if not offer_problems(offer=candidate, catalog=catalog, virtual_clusters=cfg.virtual_clusters, posted_offers=offers):
                offers.append(candidate)
        requests = []
        for i in range(10):
            kind = rng.choice(kinds)
            requests.append(Request(
                id=f"r{i}", tenant=rng.choice("abc"), cells=cells_of(rng.choice(asks[next(iter(kind))])),
                window=Window(start=rng.randint(0, 4) * HOUR, end=rng.randint(5, 9) * HOUR), posted=i,
            ))
        proof = QuotaProof(topology=Topology(cfg.topology), base=cfg.virtual_clusters)
        result = do_matching(offers=offers, requests=requests, surplus={}, catalog=catalog, now=0, admit=proof)
        assert result.refused == ()
        matched += len(result.matches)
    assert bases > 50 and matched > 50


def test_window_plan_gives_the_specs_at_both_ends_and_the_preemption_time():
    base = specs(a={"V100-NODE": 2}, b={"V100-NODE": 1})
    m = exchange("a", "b", start=HOUR, end=3 * HOUR)
    plan = window_plan(base=base, others=(), match=m)
    assert counts(plan.during["b"]) == {"V100-NODE": 2} and plan.after == base
    assert (plan.lender_preempt_at, plan.borrower_preempt_at) == (HOUR + DEFAULT_RETURN_GRACE_SECONDS, 3 * HOUR + DEFAULT_RETURN_GRACE_SECONDS)
    drain_only = window_plan(base=base, others=(), match=m, grace_seconds=None)
    assert (drain_only.lender_preempt_at, drain_only.borrower_preempt_at) == (None, None)
    assert window_plan(base=base, others=(), match=m, grace_seconds=0).borrower_preempt_at == 3 * HOUR
    with pytest.raises(ValueError, match="grace_seconds: must be >= 0 or None"):
        window_plan(base=base, others=(), match=m, grace_seconds=-1)
    # Another exchange still under way at the end stays applied in "after".
    other = exchange("a", "b", oid="o2", rid="r2", start=0, end=4 * HOUR)
    plan = window_plan(base=base, others=(other,), match=m)
    assert counts(plan.after["a"]) == {"V100-NODE": 1} and counts(plan.during["a"]) == {"V100-NODE": 0}


def test_the_engine_carries_out_the_exchange_and_the_return_drains():
    nodes = node_names(1, 2)
    cfg = config(racks=1, nodes=2, a={"V100-NODE": 1}, b={"V100-NODE": 1})
    engine = HivedEngine.from_config(cfg)
    m = exchange("a", "b", start=0, end=HOUR)
    assert QuotaProof(topology=engine.topology, base=cfg.virtual_clusters)(m, ()) is None
    plan = window_plan(base=cfg.virtual_clusters, others=(), match=m)

    engine.reconfigure(reconfiguration(cfg, plan.during))  # the window opens
    b0 = schedule(engine, pod("b0", 8, "b"), nodes)
    b1 = schedule(engine, pod("b1", 8, "b"), nodes)  # the borrowed node, as guaranteed
    assert b0 is not None and b1 is not None and {b0.node_name, b1.node_name} == set(nodes)
    assert "virtual cluster 'a' owns (it owns no cells)" in filter_offered(engine, pod("a0", 8, "a"), nodes).unresolvable[nodes[0]]
    # A third tenant's opportunistic pod cannot take or preempt the borrowed cell.
    assert not filter_offered(engine, pod("c0", 8, "a", priority="opportunistic"), nodes).feasible

    engine.reconfigure(reconfiguration(cfg, plan.after))  # the window closes: nobody is evicted
    summary = engine.inspect_virtual_cluster("b")
    assert summary["cells"][0] == {"cellType": "V100-NODE", "gpusPerCell": 8, "quota": 1, "bound": 2, "draining": 1, "pinned": 0}
    draining = [c for c in summary["vcCells"] if c["state"] == "draining"]
    assert len(draining) == 1 and len(draining[0]["pods"]) == 1  # what the driver preempts at borrower_preempt_at
    assert not filter_offered(engine, pod("a0", 8, "a"), nodes).feasible  # the lender waits for the drain
    assert not filter_offered(engine, pod("b2", 1, "b"), nodes).feasible  # the draining cell takes nothing new
    victim = draining[0]["pods"][0].split("/")[-1]
    engine.delete_pod(victim)
    placed = schedule(engine, pod("a0", 8, "a"), nodes)
    assert placed is not None
    assert engine.inspect_virtual_cluster("b")["cells"][0]["draining"] == 0


def test_a_lender_busy_when_the_window_opens_drains_and_an_idle_cell_is_lent_first():
    nodes = node_names(1, 4)
    cfg = config(racks=1, nodes=4, a={"V100-NODE": 2}, b={"V100-NODE": 2})
    engine = HivedEngine.from_config(cfg)
    a0 = schedule(engine, pod("a0", 8, "a"), nodes)
    plan = window_plan(base=cfg.virtual_clusters, others=(), match=exchange("a", "b", start=0, end=HOUR))
    # a has an idle node: that one is lent, a0 keeps running and nothing drains.
    engine.reconfigure(reconfiguration(cfg, plan.during))
    assert engine.inspect_virtual_cluster("a")["cells"][0]["draining"] == 0
    placed = [schedule(engine, pod(f"b{i}", 8, "b"), nodes) for i in range(3)]
    assert all(p is not None for p in placed)
    engine.reconfigure(reconfiguration(cfg, plan.after))
    for p in placed:
        engine.delete_pod(p.uid)
    # a is busy on both nodes when the next window opens: one of its cells drains, its pod keeps
    # running until the driver preempts it at lender_preempt_at, and b's third pod waits.
    a1 = schedule(engine, pod("a1", 8, "a"), nodes)
    assert a0 is not None and a1 is not None
    for p in [schedule(engine, pod(f"c{i}", 8, "b"), nodes) for i in range(2)]:
        assert p is not None
    engine.reconfigure(reconfiguration(cfg, plan.during))
    draining = [c for c in engine.inspect_virtual_cluster("a")["vcCells"] if c["state"] == "draining"]
    assert len(draining) == 1 and len(draining[0]["pods"]) == 1
    assert not filter_offered(engine, pod("c2", 8, "b"), nodes).feasible
    engine.delete_pod(draining[0]["pods"][0].split("/")[-1])
    assert schedule(engine, pod("c2", 8, "b"), nodes) is not None
