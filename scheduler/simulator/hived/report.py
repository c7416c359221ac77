"""The ``hived`` experiment's tables (Markdown, so that the README shows what the command
prints) and its ``--output-json`` document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.simulator.hived.experiment import HivedSweepPoint
from scheduler.simulator.hived.results import (
    ALL_SIZES,
    EXCESS_MINUTES,
    DelayStats,
    HivedSummary,
)


def _cell(stats: DelayStats | None) -> str:
    if stats is None:
        return "–"
    return f"{stats.mean:,.0f} / {stats.p50:,.0f} / {stats.p95:,.0f}"


def tables(summaries: Mapping[str, HivedSummary]) -> str:
    settings = list(summaries)
    first = summaries[settings[0]]
    lines = [
        "Queueing delay [min], mean / p50 / p95, per tenant and job size (GPUs; 'all': every job of the tenant)",
        "",
        "| tenant | GPUs | jobs | " + " | ".join(settings) + " |",
        "|---|---|---|" + "---|" * len(settings),
    ]
    for tenant, by_size in first.delays.items():
        for size, stats in by_size.items():
            label = "all" if size == ALL_SIZES else str(size)
            row = [tenant, label, str(stats.jobs)] + [_cell(summaries[s].delays[tenant].get(size)) for s in settings]
            lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        (
            f"Multi-GPU jobs (2+ GPUs) that waited over {EXCESS_MINUTES:g} min longer than on their private cluster; "
            "GPU utilisation and nodes in use (with a GPU busy) over the arrival window"
        ),
        "",
        "| setting | " + " | ".join(first.delays) + " | GPU utilisation | nodes in use |",
        "|---|" + "---|" * (len(first.delays) + 2),
    ]
    for setting, summary in summaries.items():
        longer = summary.longer_than_private
        shares = [("–" if longer is None else f"{100 * longer[t]:.1f}%") for t in first.delays]
        lines.append(
            f"| {setting} | " + " | ".join(shares) + f" | {100 * summary.utilisation:.1f}% | {100 * summary.nodes_in_use:.1f}% |"
        )
    return "\n".join(lines) + "\n"


def document(summaries: Mapping[str, HivedSummary], *, settings: dict[str, object]) -> dict[str, object]:
    return {"settings": settings, "results": {name: summary.to_document() for name, summary in summaries.items()}}


def sweep_table(points: Sequence[HivedSweepPoint]) -> str:
    """Per load: the node- and rack-level jobs' (a whole node or more, every tenant) mean queueing
    delay under each setting, the share of them that waited over ``EXCESS_MINUTES`` longer than
    privately, and the GPU utilisation."""
    settings = list(points[0].summaries)
    lines = [
        "Jobs of a whole node or more (every tenant): mean queueing delay [min], share waiting over "
        f"{EXCESS_MINUTES:g} min longer than privately, GPU utilisation",
        "",
        "| load | " + " | ".join(f"{s} delay" for s in settings) + " | " + " | ".join(f"{s} longer" for s in settings)
        + " | " + " | ".join(f"{s} util." for s in settings) + " |",
        "|---|" + "---|" * (3 * len(settings)),
    ]
    for point in points:
        cells: list[str] = []
        for summary in point.summaries.values():
            cells.append("–" if summary.node_level is None else f"{summary.node_level.mean:,.0f}")
        for summary in point.summaries.values():
            share = summary.node_level_longer_than_private
            cells.append("–" if share is None else f"{100 * share:.1f}%")
        cells += [f"{100 * summary.utilisation:.1f}%" for summary in point.summaries.values()]
        lines.append(f"| {point.value:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def sweep_document(points: Sequence[HivedSweepPoint], *, settings: dict[str, object]) -> dict[str, object]:
    return {
        "settings": settings,
        "sweep": "load",
        "points": [{"load": p.value, "results": {n: s.to_document() for n, s in p.summaries.items()}} for p in points],
    }
