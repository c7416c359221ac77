"""Small phrases shared by the answers and the tables."""

from __future__ import annotations

from typing import Iterable

from scheduler.wording import duration, ordinal

__all__ = ["MAX_NAMED", "duration", "listed", "ordinal", "times"]

# Names beyond this many are counted, not listed: an answer stays one line.
MAX_NAMED = 4


def listed(names: Iterable[str], *, noun: str) -> str:
    """``a, b, c, d and 3 more``; ``no pod`` when empty."""
    shown = list(names)
    if not shown:
        return f"no {noun}"
    head = ", ".join(shown[:MAX_NAMED])
    return head + (f" and {len(shown) - MAX_NAMED} more" if len(shown) > MAX_NAMED else "")


def times(count: int) -> str:
    """``1 time``, ``3 times``."""
    return f"{count} time{'s' if count != 1 else ''}"
