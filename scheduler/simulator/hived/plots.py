"""The ``hived`` experiment's figure: mean queueing delay per tenant and job size under each
setting (log scale), in the spirit of HiveD's Fig. 7 (delay in the private cluster, the
quota-based cluster and HiveD). matplotlib (Agg) is imported only when the figure is drawn."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from scheduler.simulator.hived.experiment import HivedSweepPoint
from scheduler.simulator.hived.results import HivedSummary
from scheduler.simulator.hived.workload import JOB_SIZES
from scheduler.simulator.plots import pyplot, save_figure


def plot_delays(summaries: Mapping[str, HivedSummary], path: Path, *, title: str) -> Path:
    """One panel per tenant: bars of mean delay per job size, one colour per setting."""
    plt = pyplot()
    settings = list(summaries)
    tenants = list(summaries[settings[0]].delays)
    figure, axes = plt.subplots(1, len(tenants), figsize=(4 * len(tenants), 4.1), sharey=True, squeeze=False)
    width = 0.8 / len(settings)
    for ax, tenant in zip(axes[0], tenants):
        sizes = [size for size in JOB_SIZES if size in summaries[settings[0]].delays[tenant]]
        for i, setting in enumerate(settings):
            by_size = summaries[setting].delays[tenant]
            values = [max(by_size[size].mean, 0.1) if size in by_size else math.nan for size in sizes]
            ax.bar([x + (i - (len(settings) - 1) / 2) * width for x in range(len(sizes))], values, width, label=setting)
        ax.set_xticks(range(len(sizes)), [str(size) for size in sizes])
        ax.set_xlabel("GPUs per job")
        ax.set_yscale("log")
        ax.set_title(tenant)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("mean queueing delay [min]")
    # Below the panels: inside one, the legend would hide its bars.
    figure.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=len(settings), fontsize="small")
    return save_figure(plt, figure, path, title, bottom=0.08)


def plot_load_sweep(points: Sequence[HivedSweepPoint], path: Path, *, title: str) -> Path:
    """Mean queueing delay of the jobs of a whole node or more (every tenant) against the load,
    one line per setting (the private and HiveD lines coincide)."""
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(6, 4))
    settings = list(points[0].summaries)
    loads = [p.value for p in points]
    for i, setting in enumerate(settings):
        values = [_node_level_mean(p.summaries[setting]) for p in points]
        ax.plot(loads, values, marker="o", linestyle="--" if setting == "hived" else "-", linewidth=2.5 - 0.5 * i, label=setting)
    ax.set_yscale("log")
    ax.set_xlabel("load (x every tenant's default load)")
    ax.set_ylabel("mean queueing delay [min], jobs of >= 1 node")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return save_figure(plt, figure, path, title)


def _node_level_mean(summary: HivedSummary) -> float:
    stats = summary.node_level
    return math.nan if stats is None else max(stats.mean, 0.1)  # 0 cannot be drawn on a log axis
