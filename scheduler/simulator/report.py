"""What every workload's report shares: the plain-text table layout (:func:`aligned`), number
formats, relative changes, and the JSON documents of ``--output-json`` (the ``fitgpp`` and
``allox`` workloads). No I/O: functions return strings and plain dicts. The tables themselves
are each workload's (``fitgpp/report.py``, ``allox/report.py``, ``hived/report.py``)."""

from __future__ import annotations

import math
from typing import Mapping, Protocol, Sequence


def number(value: float | None) -> str:
    """Three significant figures as the paper prints them: 9.38, 33.4, 1.00, 120."""
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def percent(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0%"
    return f"{100 * value:.3g}%"


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: the first column left-aligned, the others right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).rjust(width) if i else str(cell).ljust(width) for i, (cell, width) in enumerate(zip(row, widths))) for row in [header, *rows]]
    return "\n".join(line.rstrip() for line in lines)


def signed(value: float | None) -> str:
    """A relative change as a signed percentage: +18.0%, -96.6%."""
    return "-" if value is None else f"{100 * value:+.1f}%"


def change(new: float | None, old: float | None) -> float | None:
    """Relative change ``new / old - 1`` (None when undefined)."""
    if new is None or old is None or old == 0 or math.isnan(old):
        return None
    return new / old - 1.0


class Documented(Protocol):
    """A policy's summary in any workload: its ``--output-json`` form."""

    def to_document(self, *, per_seed: bool = ...) -> dict[str, object]: ...


class DocumentedPoint(Protocol):
    """A sweep's point in any workload: the swept value, a summary per policy."""

    @property
    def value(self) -> float: ...

    @property
    def summaries(self) -> Mapping[str, Documented]: ...


def document(
    summaries: Mapping[str, Documented],
    *,
    settings: Mapping[str, object],
    unlimited: Mapping[str, Documented] | None = None,
) -> dict[str, object]:
    """``--output-json`` (the ``fitgpp`` and ``allox`` workloads): one key per policy, its
    summary's document (fitgpp: ``{"te": {"slowdown": {"p50", "p95", "p99"}}, "be": {...},
    "preempted_fraction", "rescheduling_interval_minutes": {...}, "jobs", ...}``) plus the
    settings it ran under (and Table 4's unlimited-P figures when run)."""
    out: dict[str, object] = {}
    for label, summary in summaries.items():
        entry = summary.to_document()
        entry["settings"] = dict(settings)
        if unlimited and label in unlimited:
            entry["unlimited_preemptions"] = unlimited[label].to_document(per_seed=False)
        out[label] = entry
    return out


def sweep_document(name: str, points: Sequence[DocumentedPoint], *, settings: Mapping[str, object]) -> dict[str, object]:
    """A sweep's ``--output-json`` (the ``fitgpp`` and ``allox`` workloads): per point, the
    value ("unlimited" for P = inf) and each policy's summary, its seeds averaged."""
    return {
        "sweep": name,
        "settings": dict(settings),
        "points": [
            {
                "value": "unlimited" if math.isinf(point.value) else point.value,
                "policies": {label: s.to_document(per_seed=False) for label, s in point.summaries.items()},
            }
            for point in points
        ],
    }
