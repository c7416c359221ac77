"""The ``fitgpp`` workload's text tables in the paper's layout (Tables 1–4 of arXiv:1902.01613)
and its sweeps' table, in the layout every workload shares (:mod:`scheduler.simulator.report`).
No I/O: functions return strings."""

from __future__ import annotations

import math
from typing import Final, Mapping, Sequence

from scheduler.preemption.fitgpp import format_weight
from scheduler.simulator.fitgpp.experiment import SweepPoint
from scheduler.simulator.fitgpp.results import Summary
from scheduler.simulator.report import aligned, change, number, percent, signed

# The paper's numbers (synthetic workload, 84 nodes, load 2.0, P = 1, s = 4), for comparison.
PAPER_TABLE1: Final = {
    "fifo": (9.38, 33.4, 48.5, 2.78, 4.89, 8.21),
    "lrtp": (1.00, 1.17, 1.58, 3.78, 7.25, 12.5),
    "rand": (1.00, 1.17, 1.58, 3.87, 7.49, 12.9),
    "fitgpp": (1.00, 1.15, 1.54, 3.28, 6.06, 10.3),
}
PAPER_TABLE2: Final = {"lrtp": (4.0, 4.0, 5.0, 7.0), "rand": (4.0, 4.0, 6.0, 7.0), "fitgpp": (2.0, 2.0, 4.0, 6.0)}
PAPER_TABLE3: Final = {"lrtp": 0.096, "rand": 0.097, "fitgpp": 0.0063}
PAPER_TABLE4: Final = {
    "lrtp": (0.063, 0.012, 0.0034),
    "rand": (0.088, 0.0048, 0.00019),
    "fitgpp": (0.0052, 0.00038, 0.000098),
}


def table1(summaries: Mapping[str, Summary], *, paper: bool = False) -> str:
    header = ["policy", "TE 50th", "TE 95th", "TE 99th", "BE 50th", "BE 95th", "BE 99th"]
    rows = []
    for label, s in summaries.items():
        t, b = s.te_slowdown, s.be_slowdown
        rows.append([label, *(number(t[k]) for k in ("p50", "p95", "p99")), *(number(b[k]) for k in ("p50", "p95", "p99"))])
        if paper and label in PAPER_TABLE1:
            rows.append([f"  paper {label}", *(number(v) for v in PAPER_TABLE1[label])])
    return "Table 1: percentiles of slowdown rates (1 + wait / execution time)\n" + aligned(header, rows)


def table2(summaries: Mapping[str, Summary], *, paper: bool = False) -> str:
    header = ["policy", "50th", "75th", "95th", "99th"]
    rows = []
    for label, s in summaries.items():
        if not s.preemption_decisions and label == "fifo":
            continue
        i = s.rescheduling_interval_minutes
        rows.append([label, *(number(i[k]) for k in ("p50", "p75", "p95", "p99"))])
        if paper and label in PAPER_TABLE2:
            rows.append([f"  paper {label}", *(number(v) for v in PAPER_TABLE2[label])])
    return (
        "Table 2: re-scheduling intervals [min] (preemption signal to restart, grace period included)\n"
        + aligned(header, rows)
    )


def table3(summaries: Mapping[str, Summary], *, limit: str, paper: bool = False) -> str:
    header = ["policy", "preempted", "decisions", "victims", "fallbacks"]
    rows = []
    for label, s in summaries.items():
        if label == "fifo":
            continue
        rows.append(
            [
                label,
                percent(s.preempted_fraction),
                f"{s.preemption_decisions:.0f}",
                f"{s.victims:.0f}",
                f"{s.rules.get('fallback', 0.0):.0f}",
            ]
        )
        if paper and label in PAPER_TABLE3:
            rows.append([f"  paper {label}", percent(PAPER_TABLE3[label]), "", "", ""])
    return f"Table 3: proportion of preempted jobs (P = {limit})\n" + aligned(header, rows)


def table4(summaries: Mapping[str, Summary], *, limit: str, paper: bool = False) -> str:
    header = ["policy", "1", "2", ">=3"]
    rows = []
    for label, s in summaries.items():
        if label == "fifo":
            continue
        c = s.preempted_by_count
        rows.append([label, percent(c.get("1")), percent(c.get("2")), percent(c.get(">=3"))])
        if paper and label in PAPER_TABLE4:
            rows.append([f"  paper {label}", *(percent(v) for v in PAPER_TABLE4[label])])
    return f"Table 4: proportion of jobs preempted N times (P = {limit})\n" + aligned(header, rows)


def claims(summaries: Mapping[str, Summary]) -> str:
    """The issue's acceptance figures: fitgpp against fifo, lrtp and rand."""
    lines = []
    fifo, fitgpp = summaries.get("fifo"), summaries.get("fitgpp")
    if fifo and fitgpp:
        te = change(fitgpp.te_slowdown["p95"], fifo.te_slowdown["p95"])
        be = change(fitgpp.be_slowdown["p50"], fifo.be_slowdown["p50"])
        be95 = change(fitgpp.be_slowdown["p95"], fifo.be_slowdown["p95"])
        lines.append(
            f"fitgpp vs fifo: TE p95 slowdown {signed(te)} (paper -96.6%), BE p50 {signed(be)} "
            f"(paper +18.0%), BE p95 {signed(be95)} (paper +23.9%)"
        )
    for other in ("lrtp", "rand"):
        base = summaries.get(other)
        if fitgpp and base:
            ratio = (
                f"{base.preempted_fraction / fitgpp.preempted_fraction:.1f}x fewer"
                if fitgpp.preempted_fraction
                else "fitgpp preempted none"
            )
            lines.append(
                f"fitgpp vs {other}: preempted {percent(fitgpp.preempted_fraction)} vs "
                f"{percent(base.preempted_fraction)} ({ratio}), median re-scheduling interval "
                f"{number(fitgpp.rescheduling_interval_minutes['p50'])} vs {number(base.rescheduling_interval_minutes['p50'])} min"
            )
    return "\n".join(lines)


def tables(
    summaries: Mapping[str, Summary],
    *,
    limit: str,
    unlimited: Mapping[str, Summary] | None = None,
    paper: bool = False,
) -> str:
    parts = [table1(summaries, paper=paper)]
    if any(label != "fifo" for label in summaries):
        parts += [table2(summaries, paper=paper), table3(summaries, limit=limit, paper=paper)]
        parts.append(
            table4(unlimited, limit="unlimited", paper=paper) if unlimited else table4(summaries, limit=limit)
        )
    summary = claims(summaries)
    if summary:
        parts.append(summary)
    return "\n\n".join(parts) + "\n"


def sweep_table(name: str, points: Sequence[SweepPoint]) -> str:
    header = ["value", "policy", "TE 50th", "TE 95th", "TE 99th", "BE 50th", "BE 95th", "BE 99th", "preempted"]
    rows = []
    for point in points:
        for label, s in point.summaries.items():
            t, b = s.te_slowdown, s.be_slowdown
            rows.append(
                [
                    _value(name, point.value),
                    label,
                    *(number(t[k]) for k in ("p50", "p95", "p99")),
                    *(number(b[k]) for k in ("p50", "p95", "p99")),
                    percent(s.preempted_fraction),
                ]
            )
    return f"Sweep over {name}\n" + aligned(header, rows) + "\n"


def _value(name: str, value: float) -> str:
    if math.isinf(value):
        return "inf"
    return format_weight(value) if name in ("s", "gp-scale") else f"{value:g}"
