"""Tables as kubectl prints them (upper-case headers, columns padded by three spaces), and the
``-o json`` / ``-o yaml`` of the same data."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import yaml

FORMATS = ("table", "json", "yaml")


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *, empty: str) -> str:
    """``columns`` are the rows' keys in order; a missing or None cell prints as ``-``."""
    if not rows:
        return empty
    cells = [[c.upper() for c in columns]] + [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("   ".join(value.ljust(width) for value, width in zip(line, widths)).rstrip() for line in cells)


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def structured(data: Any, *, format: str) -> str:
    if format == "json":
        return json.dumps(data, indent=2, sort_keys=False)
    if format == "yaml":
        dumped: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)  # a str: no stream given
        return dumped.rstrip()
    raise ValueError(f"not a structured format: {format!r}")
