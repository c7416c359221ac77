"""The ``hived`` experiment's figure: mean queueing delay per tenant and job size under each
setting (log scale), in the spirit of HiveD's Fig. 7 (delay in the private cluster, the
quota-based cluster and HiveD). matplotlib (Agg) is imported only when the figure is drawn."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from scheduler.simulator.hived.results import HivedSummary
from scheduler.simulator.hived.workload import JOB_SIZES
from scheduler.simulator.plots import _pyplot


def plot_delays(summaries: Mapping[str, HivedSummary], path: Path, *, title: str) -> Path:
    """One panel per tenant: bars of mean delay per job size, one colour per setting."""
    plt = _pyplot()
    settings = list(summaries)
    tenants = list(summaries[settings[0]].delays)
    figure, axes = plt.subplots(1, len(tenants), figsize=(4 * len(tenants), 3.8), sharey=True, squeeze=False)
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
    axes[0][0].legend(fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
