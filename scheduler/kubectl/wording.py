"""Small phrases shared by the answers and the tables."""

from __future__ import annotations

from typing import Iterable

from scheduler.wording import duration, ordinal

__all__ = ["MAX_NAMED", "duration", "expected_start", "listed", "ordinal", "times"]

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


# AlloX rounds a busy machine's expected end up onto a grid, allox.omegaGridSeconds apart (60 s by
# default) for its first ten steps (scheduler/matching/admission.py _on_grid): a Job's expected
# start on it is a bound, which "~60 s" made read as exact (user25 #10). The inspect view does not
# say the grid; the default's points are told as bounds, which holds of an exact figure too.
ALLOX_GRID_SECONDS = 60.0
ALLOX_GRID_STEPS = 10


def expected_start(seconds: float) -> str:
    """``~1 min or less`` for an expected start on AlloX's default grid (a whole number of
    minutes, up to ten), else ``~95 s``."""
    steps = seconds / ALLOX_GRID_SECONDS
    if 0 < seconds <= ALLOX_GRID_SECONDS * ALLOX_GRID_STEPS and abs(steps - round(steps)) < 1e-3:
        return f"~{round(steps)} min or less"
    return f"~{duration(seconds)}"
