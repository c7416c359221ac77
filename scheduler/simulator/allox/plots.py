"""PNG figures for the ``allox`` workload in the spirit of EuroSys'20 Figs. 12–14 and 16–18,
drawn with matplotlib's Agg backend; matplotlib is imported only when a figure is drawn."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

from scheduler.simulator.allox.experiment import AlloxSweepPoint
from scheduler.simulator.allox.results import AlloxSummary, total_utilisation
from scheduler.simulator.plots import pyplot, save_figure

_AXIS = {
    "alpha": "fairness knob α",
    "load": "load (share of the highest sustainable arrival rate)",
    "sample-noise": "sample noise (relative sd of a sampling run's measured time)",
    "sampling-fraction": "sampling fraction (share of a job's iterations sampled per configuration)",
}


def plot_policies(summaries: Mapping[str, AlloxSummary], path: Path, *, title: str) -> Path:
    """Average JCT (log scale, Fig. 13), users' progress spread (Fig. 14) and utilisation per
    kind (Fig. 12), one bar per policy."""
    plt = pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(14, 4))
    labels = list(summaries)
    xs = range(len(labels))
    axes[0].bar(xs, [summaries[label].average_jct for label in labels], color="tab:blue")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("average JCT [min]")
    axes[0].set_title("average job completion time")
    axes[1].bar(xs, [summaries[label].progress_sd for label in labels], color="tab:orange")
    axes[1].set_ylabel("sd of users' progress (dominant share)")
    axes[1].set_title("fairness: progress spread")
    width = 0.4
    for offset, kind in ((-width / 2, "gpu"), (width / 2, "cpu")):
        values = [total_utilisation(summaries[label], kind) for label in labels]
        axes[2].bar([x + offset for x in xs], [math.nan if v is None else 100 * v for v in values], width, label=kind.upper())
    axes[2].set_ylabel("utilisation [%]")
    axes[2].set_ylim(0, 125)
    axes[2].set_title("utilisation (arrival window)")
    axes[2].legend(loc="upper right", ncol=2)
    for ax in axes:
        ax.set_xticks(list(xs), labels, rotation=30)
        ax.grid(axis="y", alpha=0.3)
    return save_figure(plt, figure, path, title)


def plot_sweep(name: str, points: Sequence[AlloxSweepPoint], path: Path, *, title: str) -> Path:
    """Average JCT (log scale) and the users' progress spread against the swept value, one line
    per policy (Fig. 16 for α, Figs. 17–18 for the sample noise and the sampling fraction); for
    the last two, a third panel with the estimator's measured error and overhead."""
    plt = pyplot()
    estimating = name in ("sample-noise", "sampling-fraction")
    figure, axes = plt.subplots(1, 3 if estimating else 2, figsize=(16 if estimating else 11, 4))
    xs = [point.value for point in points]
    labels = list(points[0].summaries) if points else []
    for label in labels:
        axes[0].plot(xs, [p.summaries[label].average_jct for p in points], marker="o", label=label)
        axes[1].plot(xs, [p.summaries[label].progress_sd for p in points], marker="o", label=label)
    jcts = [p.summaries[label].average_jct for p in points for label in labels]
    if jcts and min(jcts) > 0 and max(jcts) / min(jcts) > 5:
        axes[0].set_yscale("log")
    axes[0].set_ylabel("average JCT [min]")
    axes[1].set_ylabel("sd of users' progress (dominant share)")
    if estimating:
        sampled = [label for label in labels if all(p.summaries[label].estimation is not None for p in points)]
        if sampled:
            figures = [p.summaries[sampled[0]].estimation or {} for p in points]
            for key, what in (("mae", "mean absolute error"), ("error_sd", "sd of the error"), ("overhead", "overhead")):
                values = [math.nan if f.get(key) is None else 100 * f[key] for f in figures]
                axes[2].plot(xs, values, marker="o", label=what)
        axes[2].set_ylabel("estimator [%]")
        axes[2].set_title(f"measured ({sampled[0]})" if sampled else "nothing sampled")
    for ax in axes:
        ax.set_xlabel(_AXIS.get(name, name))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return save_figure(plt, figure, path, title)
