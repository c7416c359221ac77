"""CellOffer and CellRequest objects (charts/cellfit/crds/) -> :class:`Offer` / :class:`Request`.

Pure: the object is the dict the API server returns, the VC is the namespace's (see
``validation.namespace_virtual_cluster``), ``posted`` the time the driver first saw it. The API
server's schema already refuses most malformed objects; this parser still never raises on one
(an object written while an older CRD was installed, a test): every problem names the field.
Times are RFC 3339 (``2026-11-26T10:00:00Z``), as Kubernetes writes them; the core works in
seconds since the epoch.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from scheduler.cells.exchange.model import Cells, Offer, Request, Window
from scheduler.messages import quoted


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def rfc3339(seconds: float) -> str:
    """Seconds since the epoch -> ``2026-11-26T10:00:00Z`` (whole seconds, as status shows them).
    Total: a time no calendar date holds (before year 1, from year 10000 on, not finite) reads as
    ``… seconds since the epoch``, so that no message about it can fail."""
    try:
        # isoformat, not strftime: %Y writes year 1 as "1" on some C libraries.
        return (_EPOCH + timedelta(seconds=round(seconds))).replace(tzinfo=None).isoformat() + "Z"
    except (OverflowError, ValueError):
        return f"{seconds:g} seconds since the epoch"


def _time(value: Any, field: str, problems: list[str]) -> float | None:
    if not isinstance(value, str):
        problems.append(f"{field}: is required, an RFC 3339 time such as 2026-11-26T10:00:00Z" if value is None else f"{field}: must be an RFC 3339 time, not {quoted(value)}")
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        problems.append(f"{field}: {quoted(value)} is not an RFC 3339 time (such as 2026-11-26T10:00:00Z)")
        return None
    if parsed.tzinfo is None:
        problems.append(f"{field}: {quoted(value)} has no time zone (end it with Z for UTC)")
        return None
    return parsed.timestamp()


def seconds_of(value: Any) -> float | None:
    """An RFC 3339 time as cellfit wrote it in a status -> seconds since the epoch (``None``: it
    does not read)."""
    return _time(value, "time", [])


def _cells(value: Any, problems: list[str]) -> Cells:
    if not isinstance(value, list):
        problems.append("spec.cells: is required, a list of {cellType, count}" if value is None else "spec.cells: must be a list of {cellType, count}")
        return ()
    cells: list[tuple[str, int]] = []
    for i, item in enumerate(value):
        where = f"spec.cells[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where}: must be a mapping {{cellType, count}}")
            continue
        extra = sorted(set(item) - {"cellType", "count"})
        if extra:
            problems.append(f"{where}.{extra[0]}: is not a known field (cellType, count)")
        cell_type, count = item.get("cellType"), item.get("count")
        if not isinstance(cell_type, str) or not cell_type:
            problems.append(f"{where}.cellType: is required, a cell type name")
        if isinstance(count, bool) or not isinstance(count, int):
            problems.append(f"{where}.count: is required, a whole number" if count is None else f"{where}.count: must be a whole number, not {quoted(count)}")
        if isinstance(cell_type, str) and cell_type and isinstance(count, int) and not isinstance(count, bool):
            cells.append((cell_type, count))
    return tuple(cells)


def _parse(obj: Mapping[str, Any], problems: list[str]) -> tuple[str, Cells, Window | None]:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        problems.append("spec: is required, with cells and window")
        return name, (), None
    cells = _cells(spec.get("cells"), problems)
    window = spec.get("window")
    if not isinstance(window, Mapping):
        problems.append("spec.window: is required, with start and end")
        return name, cells, None
    start = _time(window.get("start"), "spec.window.start", problems)
    end = _time(window.get("end"), "spec.window.end", problems)
    if start is None or end is None:
        return name, cells, None
    return name, cells, Window(start=start, end=end)


def parse_offer(obj: Mapping[str, Any], *, vc: str, posted: float) -> tuple[Offer | None, list[str]]:
    """A CellOffer object -> its :class:`Offer` (id ``namespace/name``), or the problems. The
    offer still goes through ``validation.offer_problems``."""
    problems: list[str] = []
    name, cells, window = _parse(obj, problems)
    if problems or window is None:
        return None, problems
    return Offer(id=name, tenant=vc, cells=cells, window=window, posted=posted), []


def parse_request(obj: Mapping[str, Any], *, vc: str, posted: float) -> tuple[Request | None, list[str]]:
    """A CellRequest object -> its :class:`Request` (id ``namespace/name``), or the problems."""
    problems: list[str] = []
    name, cells, window = _parse(obj, problems)
    if problems or window is None:
        return None, problems
    return Request(id=name, tenant=vc, cells=cells, window=window, posted=posted), []
