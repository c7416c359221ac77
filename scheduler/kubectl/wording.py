"""Small phrases shared by the answers and the tables."""

from __future__ import annotations

from typing import Iterable

# Names beyond this many are counted, not listed: an answer stays one line.
MAX_NAMED = 4


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def listed(names: Iterable[str], *, noun: str) -> str:
    """``a, b, c, d and 3 more``; ``no pod`` when empty."""
    shown = list(names)
    if not shown:
        return f"no {noun}"
    head = ", ".join(shown[:MAX_NAMED])
    return head + (f" and {len(shown) - MAX_NAMED} more" if len(shown) > MAX_NAMED else "")
