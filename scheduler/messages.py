"""Bounds on what an error message may echo back: a configuration error names the field and shows
the value, but a 1 MB value or 100,000 problems must not become a 1 MB log line or event."""

from __future__ import annotations

from typing import Final, Sequence

# Characters of a value kept in a message; the rest is counted, not shown.
CLIP_CHARS: Final = 80
# Problems listed in one message; the rest are counted (fix these, run the check again).
MAX_PROBLEMS: Final = 20


def clip(text: str, *, keep: int = CLIP_CHARS) -> str:
    """``text`` when short, else its first ``keep`` characters and ``... (N bytes)``."""
    if len(text) <= keep:
        return text
    return f"{text[:keep]}... ({len(text.encode('utf-8', 'surrogatepass')):,} bytes)"


def quoted(value: object) -> str:
    """``repr(value)``, clipped: how messages show a value the user wrote."""
    return clip(repr(value))


def first_problems(problems: Sequence[str], *, separator: str, total: int | None = None) -> str:
    """The first :data:`MAX_PROBLEMS` problems joined, and how many more there are.
    ``total``: how many there are in all, when ``problems`` holds only the first ones."""
    shown = problems[:MAX_PROBLEMS]
    hidden = (len(problems) if total is None else total) - len(shown)
    text = separator.join(shown)
    return f"{text}{separator}... and {hidden:,} more problems" if hidden > 0 else text
