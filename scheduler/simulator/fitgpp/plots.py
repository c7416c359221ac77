"""The ``fitgpp`` workload's PNG figures in the spirit of the paper's Figs. 3–7, drawn with
matplotlib's Agg backend (:mod:`scheduler.simulator.plots`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

from scheduler.simulator.fitgpp.experiment import SweepPoint
from scheduler.simulator.fitgpp.results import Summary
from scheduler.simulator.plots import pyplot, save_figure

_PERCENTILES = ("p50", "p95", "p99")
_CLASSES = (("te", "TE jobs"), ("be", "BE jobs"))


def _slowdowns(summary: Summary, job_class: str) -> dict[str, float | None]:
    return summary.te_slowdown if job_class == "te" else summary.be_slowdown


def plot_slowdowns(summaries: Mapping[str, Summary], path: Path, *, title: str) -> Path:
    """Fig. 3: slowdown percentiles per policy, TE and BE side by side (log scale)."""
    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    labels = list(summaries)
    width = 0.8 / len(_PERCENTILES)
    for ax, (job_class, name) in zip(axes, _CLASSES):
        for i, key in enumerate(_PERCENTILES):
            values = [(_slowdowns(summaries[label], job_class)[key] or math.nan) for label in labels]
            ax.bar([x + (i - 1) * width for x in range(len(labels))], values, width, label=f"{key[1:]}th")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_yscale("log")
        ax.set_ylabel("slowdown")
        ax.set_title(name)
        ax.grid(axis="y", alpha=0.3)
        ax.legend()
    return save_figure(plt, figure, path, title)


def plot_sweep(name: str, points: Sequence[SweepPoint], path: Path, *, title: str) -> Path:
    """Figs. 4–5 (s, P: FitGpp's percentiles against the value) and 6–7 (TE share, GP scale:
    every policy's 95th and 99th percentiles against the value)."""
    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    finite = [p.value for p in points if not math.isinf(p.value)]
    stand_in = (max(finite) * 2 if finite else 1.0) if any(math.isinf(p.value) for p in points) else None
    xs = [stand_in if math.isinf(p.value) else p.value for p in points]
    labels = sorted({label for p in points for label in p.summaries}, key=lambda label: (label != "fifo", label))
    for ax, (job_class, class_name) in zip(axes, _CLASSES):
        if name in ("s", "P"):
            for key in _PERCENTILES:
                ys = [_value(p, "fitgpp", job_class, key) for p in points]
                ax.plot(xs, ys, marker="o", label=f"{key[1:]}th")
        else:
            # 95th solid, 99th dashed in the same colour: with few TE jobs preempted the TE 95th
            # percentile is often 1 for every preemptive policy, and the 99th tells them apart.
            for label in labels:
                line = ax.plot(xs, [_value(p, label, job_class, "p95") for p in points], marker="o", label=f"{label} 95th")
                ax.plot(
                    xs,
                    [_value(p, label, job_class, "p99") for p in points],
                    marker="x",
                    linestyle="--",
                    color=line[0].get_color(),
                    label=f"{label} 99th",
                )
        if stand_in is not None:
            ax.set_xticks(xs, ["inf" if math.isinf(p.value) else f"{p.value:g}" for p in points])
        ax.set_yscale("log")
        ax.set_xlabel({"s": "s", "P": "P", "te-share": "proportion of TE jobs", "gp-scale": "GP scale"}[name])
        ax.set_ylabel("slowdown")
        ax.set_title(class_name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return save_figure(plt, figure, path, title)


def _value(point: SweepPoint, label: str, job_class: str, key: str) -> float:
    summary = point.summaries.get(label)
    if summary is None:
        return math.nan
    value = _slowdowns(summary, job_class)[key]
    return math.nan if value is None else value
