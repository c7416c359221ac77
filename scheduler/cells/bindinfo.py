"""The ``cellfit.io/bind-info`` annotation: HiveD's durable record of a placement.

Written at bind time, read back on restart so that every running pod gets exactly the cells it
had. Compact JSON with sorted keys (stable bytes for the same placement); a ``version`` field so
a future format can still read old pods. For a gang, every pod carries the whole group's
placement, so the first pod recovered re-books the slots of its siblings too (all-or-nothing
survives a restart even when some siblings have not been bound yet).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Sequence

import msgspec

from scheduler.cells.booking import Booking, Group
from scheduler.cells.request import Priority
from scheduler.cells.search import contains
from scheduler.cells.topology import Cell
from scheduler.constants import ANNOTATION_BIND_INFO
from scheduler.errors import InvalidAnnotation

VERSION: Final = 1
_FIELD: Final = f"annotation {ANNOTATION_BIND_INFO}"


@dataclass(frozen=True, slots=True)
class SlotInfo:
    node: str
    gpu_indices: tuple[int, ...]
    vc_cell: str | None


@dataclass(frozen=True, slots=True)
class GangInfo:
    key: str
    name: str
    size: int
    slots: tuple[SlotInfo, ...]


@dataclass(frozen=True, slots=True)
class BindInfo:
    node: str
    vc: str
    priority: Priority
    cell_type: str
    vc_cell: str | None
    gpu_indices: tuple[int, ...]
    gang: GangInfo | None


def _slot(booking: Booking) -> dict[str, Any]:
    return {
        "node": booking.node,
        "gpuIndices": booking.gpu_indices,
        "vcCell": booking.root.id if booking.root is not None and booking.holds == "guaranteed" else None,
    }


def _lowest_common_cell(booking: Booking) -> str | None:
    if not booking.gpus:
        return None
    cell: Cell | None = booking.gpus[0]
    while cell is not None and not all(contains(cell, g) for g in booking.gpus):
        cell = cell.parent
    return cell.id if cell is not None else None


def encode(booking: Booking) -> str:
    data: dict[str, Any] = {
        "version": VERSION,
        **_slot(booking),
        "vc": booking.vc,
        "priority": booking.priority.value,
        "cellType": booking.cell_type,
        "cell": _lowest_common_cell(booking),
        "cells": [g.id for g in sorted(booking.gpus, key=lambda g: g.gpu_index)],
    }
    group: Group | None = booking.group
    if group is not None:
        data["gang"] = {
            "key": group.key,
            "name": group.name,
            "size": group.size,
            "placements": [_slot(slot) for slot in group.slots],
        }
    return _compact_sorted_json(data)


# msgspec's sorted compact JSON is json.dumps(sort_keys=True, separators=(",", ":"))'s text
# wherever json escapes nothing, in ~1/15 of its time (one per binding). json.dumps escapes
# every character outside printable ASCII (as \uXXXX) where msgspec writes DEL and non-ASCII
# as they are: a text holding any of them, or an escape (a backslash), is json's, as before.
_SORTED_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def _compact_sorted_json(data: dict[str, Any]) -> str:
    encoded = _SORTED_ENCODER.encode(data)
    if b"\\" in encoded or b"\x7f" in encoded or not encoded.isascii():
        return json.dumps(data, sort_keys=True, separators=(",", ":"))
    return encoded.decode("ascii")


def gpu_indices_annotation(booking: Booking) -> str:
    """``"0,1"``: the value of ``cellfit.io/gpu-indices`` (for NVIDIA_VISIBLE_DEVICES)."""
    return ",".join(str(i) for i in booking.gpu_indices)


def _str(data: dict[str, Any], key: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidAnnotation(f"{key!r} must be a non-empty string", field=_FIELD)
    return value


def _indices(data: dict[str, Any]) -> tuple[int, ...]:
    value = data.get("gpuIndices")
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value):
        raise InvalidAnnotation("'gpuIndices' must be a list of GPU indices", field=_FIELD)
    return tuple(value)


def _slot_info(data: Any) -> SlotInfo:
    if not isinstance(data, dict):
        raise InvalidAnnotation("a gang placement must be an object", field=_FIELD)
    return SlotInfo(node=_str(data, "node"), gpu_indices=_indices(data), vc_cell=_str(data, "vcCell", optional=True))


def decode(text: str) -> BindInfo:
    """Parse a bind-info annotation; raises :class:`InvalidAnnotation` on anything malformed."""
    try:
        data = json.loads(text)
    except ValueError:
        raise InvalidAnnotation("is not JSON", field=_FIELD) from None
    if not isinstance(data, dict):
        raise InvalidAnnotation("must be a JSON object", field=_FIELD)
    if data.get("version") != VERSION:
        raise InvalidAnnotation(f"unsupported version {data.get('version')!r}", field=_FIELD)
    try:
        priority = Priority(data.get("priority"))
    except ValueError:
        raise InvalidAnnotation(f"unknown priority {data.get('priority')!r}", field=_FIELD) from None
    gang = None
    raw_gang = data.get("gang")
    if raw_gang is not None:
        if not isinstance(raw_gang, dict) or not isinstance(raw_gang.get("placements"), list):
            raise InvalidAnnotation("'gang' must be an object with 'placements'", field=_FIELD)
        size = raw_gang.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise InvalidAnnotation("'gang.size' must be a positive integer", field=_FIELD)
        slots: Sequence[SlotInfo] = [_slot_info(s) for s in raw_gang["placements"]]
        gang = GangInfo(key=_str(raw_gang, "key"), name=_str(raw_gang, "name"), size=size, slots=tuple(slots))
    return BindInfo(
        node=_str(data, "node"),
        vc=_str(data, "vc"),
        priority=priority,
        cell_type=_str(data, "cellType"),
        vc_cell=_str(data, "vcCell", optional=True),
        gpu_indices=_indices(data),
        gang=gang,
    )
