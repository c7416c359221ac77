"""Text tables for the ``allox`` workload (the numbers behind EuroSys'20 Figs. 12–14 and 16–18).
No I/O: functions return strings. Its ``--output-json`` documents are the ``fitgpp`` workload's
(:func:`scheduler.simulator.report.document`, :func:`~scheduler.simulator.report.sweep_document`)."""

from __future__ import annotations

from typing import Final, Mapping, Sequence

from scheduler.simulator.allox.experiment import AlloxSweepPoint
from scheduler.simulator.allox.results import AlloxSummary, total_utilisation
from scheduler.simulator.report import aligned, number, percent, signed
from scheduler.simulator.report import change

# §5.2.2: AlloX (α = 0.1) reduces the average JCT of these baselines by this much (Fig. 13),
# and is 30% above SRPT (9% at α = 1, Fig. 16).
PAPER_REDUCTION: Final = {"drff": -0.95, "drfs": -0.84, "es": -0.88, "drfa": -0.53}
PAPER_ABOVE_SRPT: Final = 0.30


def _util(summary: AlloxSummary, kind: str) -> str:
    value = total_utilisation(summary, kind)
    return "-" if value is None else percent(value)


def _estimation(summary: AlloxSummary, key: str) -> str:
    """One of the estimator's figures as a percentage; "-" where nothing was sampled."""
    figures = summary.estimation
    value = None if figures is None else figures.get(key)
    if value is None:
        return "-"
    return percent(0.0 if abs(value) < 1e-9 else value)  # exact samples: float residue only


def jct_table(summaries: Mapping[str, AlloxSummary]) -> str:
    """Fig. 13's average JCT (and its tail), Fig. 14's progress spread, Fig. 12's utilisation."""
    reference = summaries.get("allox")
    header = [
        "policy",
        "avg JCT [min]",
        "allox vs this",
        "p50",
        "p95",
        "p99",
        "longest 1%",
        "progress sd",
        "GPU util",
        "CPU util",
        "on CPU",
        "CPU work speedup",
        "est. MAE",
        "overhead",
    ]
    rows = []
    for label, s in summaries.items():
        versus = change(reference.average_jct, s.average_jct) if reference is not None and label != "allox" else None
        rows.append(
            [
                label,
                number(s.average_jct),
                signed(versus),
                number(s.jct["p50"]),
                number(s.jct["p95"]),
                number(s.jct["p99"]),
                number(s.longest_jct),
                f"{s.progress_sd:.4f}",
                _util(s, "gpu"),
                _util(s, "cpu"),
                percent(s.on_cpu),
                number(s.cpu_work_speedup),
                _estimation(s, "mae"),
                _estimation(s, "overhead"),
            ]
        )
    return (
        "AlloX (EuroSys'20 Figs. 12-14): job completion time (JCT) [min], users' progress spread "
        "(sd, in dominant shares), utilisation over the arrival window (jobs and samples), jobs that finished "
        "on a CPU, mean speedup of the work CPUs did, the estimator's mean absolute error and its overhead "
        "(sampling time over the job's estimates)\n" + aligned(header, rows)
    )


def claims(summaries: Mapping[str, AlloxSummary]) -> str:
    """The issue's acceptance figures: allox against the baselines and SRPT, beside the paper's."""
    allox = summaries.get("allox")
    if allox is None:
        return ""
    parts = []
    for label, paper in PAPER_REDUCTION.items():
        other = summaries.get(label)
        if other is not None:
            parts.append(f"vs {label} {signed(change(allox.average_jct, other.average_jct))} (paper {signed(paper)})")
    srpt = summaries.get("srpt")
    if srpt is not None:
        parts.append(
            f"vs srpt {signed(change(allox.average_jct, srpt.average_jct))} (paper {signed(PAPER_ABOVE_SRPT)} at alpha 0.1)"
        )
    return "allox average JCT " + ", ".join(parts) if parts else ""


def tables(summaries: Mapping[str, AlloxSummary]) -> str:
    parts = [jct_table(summaries)]
    line = claims(summaries)
    if line:
        parts.append(line)
    return "\n\n".join(parts) + "\n"


def sweep_table(name: str, points: Sequence[AlloxSweepPoint]) -> str:
    header = [
        "value",
        "policy",
        "avg JCT [min]",
        "p95",
        "longest 1%",
        "progress sd",
        "GPU util",
        "CPU util",
        "on CPU",
        "est. MAE",
        "est. sd",
        "overhead",
    ]
    rows = []
    for point in points:
        for label, s in point.summaries.items():
            rows.append(
                [
                    f"{point.value:g}",
                    label,
                    number(s.average_jct),
                    number(s.jct["p95"]),
                    number(s.longest_jct),
                    f"{s.progress_sd:.4f}",
                    _util(s, "gpu"),
                    _util(s, "cpu"),
                    percent(s.on_cpu),
                    _estimation(s, "mae"),
                    _estimation(s, "error_sd"),
                    _estimation(s, "overhead"),
                ]
            )
    return f"Sweep over {name}\n" + aligned(header, rows) + "\n"
