"""HiveD's cell exchange experiment (``../shared/papers/hived.txt`` §5.4, Tables 4 and 5) on
cellfit's exchange core: tenants with fluctuating demand (a deadline burst each) trade idle node
cells for guaranteed cells during their bursts, through the production arbiter
(``scheduler.cells.exchange.do_matching``, Algorithm 2), the quota proof over the real topology
(``QuotaProof``: every VC assignment stays placeable, HiveD's Theorem 1) and the quota move
(``project``), exactly as the live controller calls them.

What is modelled, hour by hour (no jobs: the paper's tables measure guaranteed capacity used):

* **Demand**: per tenant, the GPUs it wants each hour: a base load (a share of its VC, with a
  daily cycle and noise) and one deadline burst (``burst_hours`` at ``burst_factor`` times its
  VC), at a random time per tenant (``seed``).
* **Tenants' proxies** (the paper leaves the strategy to tenants): a tenant knows its demand
  ``lead_hours`` ahead (its deadlines and its idle periods) and, every ``chunk_hours``, posts for
  the chunk that far ahead: an offer for each node cell it will not use at all during the chunk,
  or a request for each node cell its peak in the chunk exceeds its VC by (one cell each: the
  arbiter matches an offer whole to a request of exactly its GPUs). Temporal exchange of node
  cells, as the paper's experiment.
* **The arbiter** runs every hour over the board (open offers and requests), with each tenant's
  surplus and the exchanges already matched in the proof; unmatched postings expire at their
  window's end.
* **Guaranteed use**: each hour a tenant uses ``min(demand, quota)`` GPUs of guaranteed cells,
  its quota being its VC's (without exchange) or ``project``'s at that hour (with). A lender
  offers only cells its forecast leaves idle, so lending never costs it guaranteed use.

Per tenant, as Tables 4 and 5: *effective utilisation* of its guaranteed cells without exchange
(guaranteed GPU-hours used / its VC's GPU-hours), *increased utilisation* via exchanges (the
extra guaranteed GPU-hours with exchange / its VC's GPU-hours), *gain* (increased / effective)
and *relative fluctuation* (eq. 3: the RMS of demand minus the VC's GPUs, over the VC's GPUs).
Two VC assignments, as the paper: ``default`` (the given VCs) and ``balanced`` (node cells in
proportion to each tenant's total demand).

``python -m scheduler.simulator.hived.exchange [--seed N] [--json]`` prints both tables.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.cells.config import CellsConfig, parse_cells_config
from scheduler.cells.exchange import CellCatalog, Match, Offer, QuotaProof, Request, Window, cells_of, do_matching, project
from scheduler.cells.topology import Topology
from scheduler.simulator.hived.cluster import NODE_TYPE, cell_types
from scheduler.simulator.hived.workload import ClusterShape

HOUR = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeWorkload:
    """The tenants (name -> node cells of its VC under the default assignment) and their demand."""

    vcs: dict[str, int] = field(default_factory=lambda: {
        "prod-a": 6, "prod-b": 5, "res-a": 4, "res-b": 4, "res-c": 3, "res-d": 2})
    base_share: dict[str, float] = field(default_factory=lambda: {
        "prod-a": 0.55, "prod-b": 0.7, "res-a": 0.35, "res-b": 0.5, "res-c": 0.3, "res-d": 0.25})
    racks: int = 3
    nodes_per_rack: int = 8
    gpus_per_node: int = 8
    hours: int = 720
    burst_hours: int = 72
    burst_factor: float = 1.8
    daily_amplitude: float = 0.25
    noise: float = 0.1
    lead_hours: int = 24
    chunk_hours: int = 6
    seed: int = 0

    def shape(self) -> ClusterShape:
        return ClusterShape(racks=self.racks, nodes_per_rack=self.nodes_per_rack, gpus_per_node=self.gpus_per_node)

    def demand(self) -> dict[str, npt.NDArray[np.float64]]:
        """GPUs each tenant wants each hour (whole GPUs, never negative)."""
        rng = np.random.default_rng(self.seed)
        hours = np.arange(self.hours, dtype=np.float64)
        series: dict[str, npt.NDArray[np.float64]] = {}
        for tenant, nodes in self.vcs.items():
            capacity = nodes * self.gpus_per_node
            phase = rng.uniform(0, 24)
            base = self.base_share[tenant] * capacity * (1 + self.daily_amplitude * np.sin(2 * math.pi * (hours + phase) / 24))
            noisy = base * (1 + self.noise * rng.standard_normal(self.hours))
            start = int(rng.integers(self.lead_hours, max(self.lead_hours + 1, self.hours - self.burst_hours)))
            noisy[start:start + self.burst_hours] = self.burst_factor * capacity * (1 + 0.5 * self.noise * rng.standard_normal(
                min(self.burst_hours, self.hours - start)))
            series[tenant] = np.maximum(np.round(noisy), 0.0)
        return series


def balanced_vcs(demand: dict[str, npt.NDArray[np.float64]], nodes: int) -> dict[str, int]:
    """Node cells in proportion to each tenant's total demand (largest remainders), at least one each."""
    totals = {t: float(d.sum()) for t, d in demand.items()}
    whole = sum(totals.values()) or 1.0
    shares = {t: nodes * v / whole for t, v in totals.items()}
    cells = {t: max(1, int(s)) for t, s in shares.items()}
    for tenant in sorted(shares, key=lambda t: (-(shares[t] - int(shares[t])), t)):
        if sum(cells.values()) >= nodes:
            break
        cells[tenant] += 1
    while sum(cells.values()) > nodes:  # the minimum of one cell each overshot
        cells[max(cells, key=lambda t: (cells[t], t))] -= 1
    return cells


def cells_config(workload: ExchangeWorkload, vcs: dict[str, int]) -> CellsConfig:
    shape = workload.shape()
    physical = [{"cellType": "GPU-RACK", "cellChildren": [{"nodeName": f"r{r}n{n}"} for n in range(shape.nodes_per_rack)]}
                for r in range(shape.racks)]
    return parse_cells_config({
        "topology": {"cellTypes": cell_types(shape), "physicalCells": physical},
        "virtualClusters": {t: [{"cellType": NODE_TYPE, "count": n}] for t, n in vcs.items()},
    })


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantRow:
    tenant: str
    vc_gpus: int
    effective: float
    increased: float
    gain: float
    relative_fluctuation: float
    lent_gpu_hours: float
    borrowed_gpu_hours: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeOutcome:
    assignment: str
    rows: list[TenantRow]
    matches: int
    offers: int
    requests: int
    surplus: dict[str, float]


def _postings(
    tenant: str, demand: npt.NDArray[np.float64], quota_gpus: int, gpus_per_node: int, chunk: tuple[int, int], posted: float
) -> tuple[list[Offer], list[Request]]:
    """One offer per node cell the tenant's peak in ``chunk`` leaves idle, one request per node
    cell it lacks: the arbiter matches an offer whole to a request of exactly its GPUs, so a
    proxy posting one cell each is matched wherever cells are to be had."""
    start, end = chunk
    peak = float(demand[start:end].max())
    window = Window(start=start * HOUR, end=end * HOUR)
    idle_nodes = int((quota_gpus - peak) // gpus_per_node) if peak < quota_gpus else 0
    short_nodes = math.ceil((peak - quota_gpus) / gpus_per_node) if peak > quota_gpus else 0
    node = cells_of({NODE_TYPE: 1})
    tag = f"{tenant}/h{start}"
    offers = [Offer(id=f"{tag}-offer-{i}", tenant=tenant, cells=node, window=window, posted=posted) for i in range(idle_nodes)]
    requests = [Request(id=f"{tag}-request-{i}", tenant=tenant, cells=node, window=window, posted=posted) for i in range(short_nodes)]
    return offers, requests


def run_assignment(workload: ExchangeWorkload, demand: dict[str, npt.NDArray[np.float64]], vcs: dict[str, int], *, assignment: str) -> ExchangeOutcome:
    """One VC assignment, with and without exchange (the same demand)."""
    config = cells_config(workload, vcs)
    assert config.topology is not None  # written above
    topology = Topology(config.topology)
    catalog = CellCatalog(config.topology.cell_types)
    base = dict(config.virtual_clusters)
    gpn = workload.gpus_per_node
    offers: list[Offer] = []
    requests: list[Request] = []
    matched: list[Match] = []
    surplus: dict[str, float] = {}
    posted_offers = posted_requests = 0
    for hour in range(workload.hours):
        now = hour * HOUR
        if hour % workload.chunk_hours == 0:
            first = hour + workload.lead_hours
            if first < workload.hours:
                chunk = (first, min(first + workload.chunk_hours, workload.hours))
                for tenant in vcs:
                    new_offers, new_requests = _postings(tenant, demand[tenant], vcs[tenant] * gpn, gpn, chunk, posted=now)
                    offers += new_offers
                    requests += new_requests
                    posted_offers += len(new_offers)
                    posted_requests += len(new_requests)
        active = tuple(m for m in matched if m.window.end > now)
        result = do_matching(offers=offers, requests=requests, surplus=surplus, catalog=catalog, now=now,
                             admit=QuotaProof(topology=topology, base=base, active=active))
        matched.extend(result.matches)
        surplus = result.surplus
        taken = {m.request.id for m in result.matches}
        offers = list(result.offers_left)
        requests = [r for r in requests if r.id not in taken and r.window.end > now]
    rows = []
    quota_by_hour: dict[str, list[int]] = {t: [] for t in vcs}
    for hour in range(workload.hours):
        specs, problems = project(base=base, matches=matched, at=(hour + 0.5) * HOUR)
        assert not problems, problems  # the proof admitted every match
        for tenant in vcs:
            quota_by_hour[tenant].append(sum(c.count for c in specs[tenant].cells) * gpn)
    for tenant in vcs:
        vc_gpus = vcs[tenant] * gpn
        wanted = demand[tenant]
        without = np.minimum(wanted, vc_gpus).sum()
        with_exchange = np.minimum(wanted, np.array(quota_by_hour[tenant], dtype=np.float64)).sum()
        capacity = vc_gpus * workload.hours
        effective = float(without / capacity)
        increased = float((with_exchange - without) / capacity)
        rows.append(TenantRow(
            tenant=tenant, vc_gpus=vc_gpus, effective=effective, increased=increased,
            gain=increased / effective if effective > 0 else 0.0,
            relative_fluctuation=float(np.sqrt(np.mean((wanted - vc_gpus) ** 2)) / vc_gpus),
            lent_gpu_hours=sum(m.gpu_hours for m in matched if m.lender == tenant),
            borrowed_gpu_hours=sum(m.gpu_hours for m in matched if m.borrower == tenant),
        ))
    rows.sort(key=lambda r: (-r.gain, r.tenant))
    return ExchangeOutcome(assignment=assignment, rows=rows, matches=len(matched), offers=posted_offers, requests=posted_requests,
                           surplus=surplus)


def run_exchange_experiment(workload: ExchangeWorkload) -> list[ExchangeOutcome]:
    demand = workload.demand()
    nodes = workload.racks * workload.nodes_per_rack
    if sum(workload.vcs.values()) > nodes:
        raise ValueError(f"vcs: {sum(workload.vcs.values())} node cells on {nodes} nodes")
    return [run_assignment(workload, demand, dict(workload.vcs), assignment="default"),
            run_assignment(workload, demand, balanced_vcs(demand, nodes), assignment="balanced")]


def table(outcome: ExchangeOutcome) -> str:
    lines = [f"{outcome.assignment} assignment: {outcome.matches} exchanges matched of {outcome.requests} requests "
             f"and {outcome.offers} offers posted",
             f"{'tenant':8} {'VC GPUs':>7} {'effective util.':>15} {'increased via exch.':>19} {'gain':>7} {'RF':>5}"]
    for r in outcome.rows:
        lines.append(f"{r.tenant:8} {r.vc_gpus:7d} {r.effective:15.1%} {r.increased:19.1%} {r.gain:7.1%} {r.relative_fluctuation:5.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="HiveD cell exchange (§5.4, Tables 4 and 5) on cellfit's exchange core")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hours", type=int, default=720)
    parser.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    args = parser.parse_args(argv)
    model = ExchangeWorkload()
    # Each tenant's burst is placed after the proxies' lead: a shorter run has no room for it.
    shortest = model.lead_hours + model.burst_hours
    if args.hours < shortest:
        parser.error(f"argument --hours: {args.hours} is less than {shortest} (a {model.lead_hours}-hour lead, then a {model.burst_hours}-hour burst)")
    if args.seed < 0:
        parser.error(f"argument --seed: {args.seed} is negative")
    outcomes = run_exchange_experiment(replace(model, seed=args.seed, hours=args.hours))
    if args.json:
        payload: list[dict[str, Any]] = [
            {"assignment": o.assignment, "matches": o.matches, "offers": o.offers, "requests": o.requests,
             "rows": [{"tenant": r.tenant, "vcGpus": r.vc_gpus, "effective": r.effective, "increased": r.increased, "gain": r.gain,
                       "relativeFluctuation": r.relative_fluctuation, "lentGpuHours": r.lent_gpu_hours,
                       "borrowedGpuHours": r.borrowed_gpu_hours} for r in o.rows]}
            for o in outcomes]
        print(json.dumps(payload, indent=1))
    else:
        print("\n\n".join(table(o) for o in outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
