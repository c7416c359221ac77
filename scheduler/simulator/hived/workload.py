"""The ``hived`` workload: tenants sharing a cluster of racks of GPU nodes, each with a quota of
cells (racks and nodes), submitting gang jobs of 1 to 32 GPUs — HiveD's sharing-anomaly
experiment (``../shared/papers/hived.txt`` §2 and §5.2).

The tenants, their quotas and their job-size mixes follow the paper's Tables 1 and 2 (four of
its eleven tenants, scaled to 32 nodes); arrivals are Poisson per tenant at a rate that keeps
each tenant's own quota busy at its load on average; durations are log-uniform from 2 minutes to
12 hours (§2: "durations spanning from 1 minute to tens of hours"). Seeded: the same seed gives
the same jobs, and every setting of an experiment replays them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Final

import numpy as np

from scheduler.simulator.errors import InvalidWorkload

MINUTE: Final = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterShape:
    """``racks`` racks of ``nodes_per_rack`` nodes of ``gpus_per_node`` GPUs. Only GPUs are
    modelled: a job's pods ask for GPUs and nothing else, so only GPUs decide where they fit."""

    racks: int = 8
    nodes_per_rack: int = 4
    gpus_per_node: int = 8

    @property
    def nodes(self) -> int:
        return self.racks * self.nodes_per_rack

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_names(self) -> list[str]:
        """``r<rack>n<node>``, rack by rack: the order every setting offers the nodes in."""
        return [f"r{r}n{n}" for r in range(self.racks) for n in range(self.nodes_per_rack)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """A tenant: its quota in cells (``racks`` rack cells and ``nodes`` node cells; the
    quota-only baseline counts the same number of GPUs) and its job mix, ``sizes`` = (GPUs of
    the job, share of its jobs)."""

    name: str
    racks: int = 0
    nodes: int = 0
    sizes: tuple[tuple[int, float], ...] = ((1, 1.0),)
    # Its offered GPU demand over its quota, times the workload's ``load``.
    load: float = 1.0

    def node_cells(self, shape: ClusterShape) -> int:
        """Node-level cells its quota holds (a rack counts its nodes)."""
        return self.racks * shape.nodes_per_rack + self.nodes

    def quota_gpus(self, shape: ClusterShape) -> int:
        return self.node_cells(shape) * shape.gpus_per_node

    def mean_gpus(self) -> float:
        total = sum(share for _, share in self.sizes)
        return sum(gpus * share for gpus, share in self.sizes) / total


def _table2(one: int, two: int, four: int, eight: int, sixteen_up: int) -> tuple[tuple[int, float], ...]:
    """A tenant's row of the paper's Table 2 as shares; its ">= 16-GPU" jobs split evenly into
    16- and 32-GPU jobs (the paper does not break them down)."""
    total = one + two + four + eight + sixteen_up
    return (
        (1, one / total),
        (2, two / total),
        (4, four / total),
        (8, eight / total),
        (16, sixteen_up / 2 / total),
        (32, sixteen_up / 2 / total),
    )


# Four tenants of Table 1, quotas in proportion (res-f 28.57%, prod-e 19.78%, prod-c 11.36%,
# prod-a 8.79% of the cluster -> 13, 9, 6, 4 of 32 nodes), at different levels: prod-e's
# 1-GPU-dominated quota in node cells, the others partly in rack cells. Loads: the tenants
# whose jobs are mostly 1-GPU keep their quotas busy (0.9), the node-level ones less (0.5),
# where their private clusters' delays stay within hours under FIFO (README, calibration).
DEFAULT_TENANTS: Final = (
    Tenant(name="prod-a", racks=1, nodes=0, sizes=_table2(227, 54, 23, 1132, 138), load=0.5),
    Tenant(name="prod-c", racks=1, nodes=2, sizes=_table2(4692, 301, 1905, 4415, 1206), load=0.5),
    Tenant(name="prod-e", racks=0, nodes=9, sizes=_table2(58407, 532, 2118, 959, 2), load=0.9),
    Tenant(name="res-f", racks=2, nodes=5, sizes=_table2(8181, 88, 618, 1337, 559), load=0.9),
)
JOB_SIZES: Final = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True, slots=True, kw_only=True)
class GangJob:
    """One job: ``pods`` pods of ``gpus // pods`` GPUs each, all started together or not at
    all (a gang); a job larger than a node takes whole nodes."""

    job_id: str
    tenant: str
    gpus: int
    pods: int
    submit_time: float  # seconds
    duration: float  # seconds

    @property
    def gpus_per_pod(self) -> int:
        return self.gpus // self.pods


@dataclass(frozen=True, slots=True, kw_only=True)
class HivedWorkload:
    """A tenant's offered GPU demand over its quota is ``load`` times its own ``Tenant.load``
    (1.0 keeps its quota busy on average). Durations are log-uniform on [``duration_low``,
    ``duration_high``] minutes (mean 122 min with the defaults, median 38 min)."""

    shape: ClusterShape = field(default_factory=ClusterShape)
    tenants: tuple[Tenant, ...] = DEFAULT_TENANTS
    load: float = 1.0
    duration_low: float = 2.0
    duration_high: float = 720.0

    def __post_init__(self) -> None:
        for problem in self.problems():
            raise InvalidWorkload(problem[1], field=problem[0])

    def problems(self) -> list[tuple[str, str]]:
        """(field, message) for every parameter that cannot be simulated."""
        shape = self.shape
        found: list[tuple[str, str]] = []
        for name in ("racks", "nodes_per_rack", "gpus_per_node"):
            if getattr(shape, name) < 1:
                found.append((f"hived.{name}", f"{getattr(shape, name)!r} is less than 1"))
        if found:
            return found
        if not (self.load > 0 and math.isfinite(self.load)):
            found.append(("hived.load", f"{self.load!r} is not a positive number"))
        if not 0 < self.duration_low <= self.duration_high or not math.isfinite(self.duration_high):
            found.append(
                ("hived.duration_low", f"durations [{self.duration_low!r}, {self.duration_high!r}] min are not 0 < low <= high")
            )
        if not self.tenants:
            found.append(("hived.tenants", "no tenant"))
        names = [t.name for t in self.tenants]
        if len(set(names)) != len(names):
            found.append(("hived.tenants", "a tenant name appears twice"))
        racks = sum(t.racks for t in self.tenants)
        nodes = sum(t.node_cells(shape) for t in self.tenants)
        if racks > shape.racks or nodes > shape.nodes:
            found.append(
                (
                    "hived.tenants",
                    (
                        f"the quotas ({racks} rack and {nodes} node-level cells) exceed the cluster "
                        f"({shape.racks} racks, {shape.nodes} nodes)"
                    ),
                )
            )
        for tenant in self.tenants:
            where = f"hived.tenant {tenant.name}"
            if not (tenant.load > 0 and math.isfinite(tenant.load)):
                found.append((where, f"load {tenant.load!r} is not a positive number"))
            if tenant.racks < 0 or tenant.nodes < 0 or tenant.node_cells(shape) == 0:
                found.append((where, "its quota holds no cell"))
                continue
            if not tenant.sizes or any(share < 0 for _, share in tenant.sizes) or sum(s for _, s in tenant.sizes) <= 0:
                found.append((where, "job-size shares must be non-negative and not all 0"))
            for gpus, share in tenant.sizes:
                if share == 0:
                    continue
                if gpus < 1 or (gpus > shape.gpus_per_node and gpus % shape.gpus_per_node):
                    found.append((where, f"a {gpus}-GPU job is neither within a node nor whole nodes of {shape.gpus_per_node}"))
                elif gpus > tenant.quota_gpus(shape):
                    found.append(
                        (where, f"a {gpus}-GPU job could never run in its quota of {tenant.quota_gpus(shape)} GPUs")
                    )
        return found

    def with_changes(self, **changes: object) -> HivedWorkload:
        return replace(self, **changes)  # type: ignore[arg-type]

    def mean_duration(self) -> float:
        """Seconds: the mean of the log-uniform duration."""
        low, high = self.duration_low * MINUTE, self.duration_high * MINUTE
        return low if high == low else (high - low) / math.log(high / low)

    def arrival_rates(self) -> dict[str, float]:
        """Jobs per second per tenant: ``load * quota GPUs / (mean GPUs * mean duration)``."""
        mean_duration = self.mean_duration()
        return {
            t.name: self.load * t.load * t.quota_gpus(self.shape) / (t.mean_gpus() * mean_duration) for t in self.tenants
        }

    def generate(self, *, jobs: int, seed: int) -> list[GangJob]:
        """``jobs`` jobs of the merged Poisson arrivals of every tenant, in submit order. One
        random stream per attribute (arrival gaps, tenant, size, duration), so that changing
        one distribution leaves the others' draws as they were."""
        if jobs < 1:
            raise InvalidWorkload(f"{jobs!r} is less than 1", field="jobs")
        rates = self.arrival_rates()
        names = list(rates)
        total_rate = sum(rates.values())
        streams = [np.random.default_rng([seed, k]) for k in range(4)]
        gaps = streams[0].exponential(1.0 / total_rate, size=jobs)
        submit = np.cumsum(gaps) - gaps[0]  # the first job arrives at 0
        tenant_at = streams[1].choice(len(names), size=jobs, p=[rates[n] / total_rate for n in names])
        size_draw = streams[2].random(size=jobs)
        low, high = math.log(self.duration_low * MINUTE), math.log(self.duration_high * MINUTE)
        durations = np.exp(streams[3].uniform(low, high, size=jobs))
        by_name = {t.name: t for t in self.tenants}
        cumulative = {}
        for name in names:
            sizes = by_name[name].sizes
            total = sum(share for _, share in sizes)
            edges = np.cumsum([share / total for _, share in sizes])
            edges[-1] = math.inf  # rounding must not leave a draw past the last size
            cumulative[name] = (edges, [gpus for gpus, _ in sizes])
        out: list[GangJob] = []
        width = len(str(jobs - 1))
        per_node = self.shape.gpus_per_node
        for i in range(jobs):
            name = names[int(tenant_at[i])]
            edges, gpus_of = cumulative[name]
            gpus = gpus_of[int(np.searchsorted(edges, size_draw[i], side="right"))]
            out.append(
                GangJob(
                    job_id=f"job-{i:0{width}d}",
                    tenant=name,
                    gpus=gpus,
                    pods=1 if gpus <= per_node else gpus // per_node,
                    submit_time=float(submit[i]),
                    duration=float(durations[i]),
                )
            )
        return out
