"""The ``hived`` experiment's tables (Markdown, so that the README shows what the command
prints) and its ``--output-json`` document."""

from __future__ import annotations

from collections.abc import Mapping

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
