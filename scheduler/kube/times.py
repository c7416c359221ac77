"""Times as the Kubernetes API writes them (RFC 3339, ``2026-11-26T10:00:00Z``), read into seconds
since the epoch: for every layer that reads objects' timestamps (the cell exchange's controller,
the estimator, the placer), so none of them depends on another for it."""

from __future__ import annotations

from datetime import datetime


def timestamp(text: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp as the API writes it; None when there is
    none or it does not read."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
