"""How cellfit writes quantities in what users read: Events, conditions, ``kubectl cellfit``.
One place, so that the estimator's Event, AlloX's condition and the plugin's answer say
"12 min" and "2nd" the same way. Pure."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``; under a second ``0.4 s`` (not ``0 s``, which reads as
    none: "27 s ± 0 s" said an estimate had no uncertainty when it had 0.36 s)."""
    if 0 < seconds < 0.95:
        return f"{seconds:.1g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``11th``, ``23rd``."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"
