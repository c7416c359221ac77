"""CellOffer / CellRequest objects read into offers and requests: every problem names the field,
nothing raises on a malformed object."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cells.exchange import Window, parse_offer, parse_request, rfc3339

T0 = 1_795_684_800.0  # 2026-11-26T09:20:00Z


def obj(spec: Any = None, **metadata: str) -> dict[str, Any]:
    if spec is None:
        spec = {"cells": [{"cellType": "V100-NODE", "count": 1}], "window": {"start": "2026-11-26T10:00:00Z", "end": "2026-11-26T20:00:00+00:00"}}
    return {"apiVersion": "cellfit.io/v1alpha1", "kind": "CellOffer", "metadata": {"namespace": "vision", "name": "idle-node", **metadata}, "spec": spec}


def test_rfc3339_round_trip():
    assert rfc3339(T0) == "2026-11-26T09:20:00Z"
    offer, problems = parse_offer(obj({"cells": [{"cellType": "V100", "count": 8}], "window": {"start": rfc3339(T0), "end": "2026-11-26T11:20:00+02:00"}}), vc="a", posted=T0)
    assert problems == [] and offer.window == Window(start=T0, end=T0)  # +02:00 is two hours earlier in UTC


def test_a_good_offer_and_request():
    offer, problems = parse_offer(obj(), vc="vision", posted=T0)
    assert problems == []
    assert (offer.id, offer.tenant, offer.cells, offer.posted) == ("vision/idle-node", "vision", (("V100-NODE", 1),), T0)
    assert offer.window.hours == pytest.approx(10.0)
    assert rfc3339(offer.window.start) == "2026-11-26T10:00:00Z"
    request, problems = parse_request(obj({"cells": [{"cellType": "V100", "count": 8}, {"cellType": "V100-SWITCH", "count": 1}],
                                           "window": {"start": "2026-11-26T10:00:00Z", "end": "2026-11-26T12:00:00Z"}}), vc="nlp", posted=T0)
    assert problems == [] and request.cells == (("V100", 8), ("V100-SWITCH", 1)) and request.tenant == "nlp"


@pytest.mark.parametrize(
    "spec, problems",
    [
        ("x", ["spec: is required, with cells and window"]),
        ({"window": {"start": "2026-11-26T10:00:00Z", "end": "2026-11-26T12:00:00Z"}}, ["spec.cells: is required, a list of {cellType, count}"]),
        ({"cells": {"V100": 1}, "window": {"start": "2026-11-26T10:00:00Z", "end": "2026-11-26T12:00:00Z"}}, ["spec.cells: must be a list of {cellType, count}"]),
        ({"cells": [{"cellType": "V100", "count": 1}]}, ["spec.window: is required, with start and end"]),
        (
            {"cells": [{"cellType": "V100", "count": "8"}, {"count": 1}, "V100", {"cellTypes": "V100", "cellType": "V100", "count": True}],
             "window": {"start": "tomorrow", "end": "2026-11-26T12:00:00"}},
            [
                "spec.cells[0].count: must be a whole number, not '8'",
                "spec.cells[1].cellType: is required, a cell type name",
                "spec.cells[2]: must be a mapping {cellType, count}",
                "spec.cells[3].cellTypes: is not a known field (cellType, count)",
                "spec.cells[3].count: must be a whole number, not True",
                "spec.window.start: 'tomorrow' is not an RFC 3339 time (such as 2026-11-26T10:00:00Z)",
                "spec.window.end: '2026-11-26T12:00:00' has no time zone (end it with Z for UTC)",
            ],
        ),
        ({"cells": [{"cellType": "V100"}], "window": {"start": 5, "end": None}}, [
            "spec.cells[0].count: is required, a whole number",
            "spec.window.start: must be an RFC 3339 time, not 5",
            "spec.window.end: is required, an RFC 3339 time such as 2026-11-26T10:00:00Z",
        ]),
    ],
)
def test_malformed_objects_name_every_field(spec, problems):
    for parse in (parse_offer, parse_request):
        parsed, found = parse(obj(spec), vc="a", posted=T0)
        assert parsed is None and found == problems


def test_an_object_without_metadata_still_parses():
    offer, problems = parse_offer({"spec": obj()["spec"]}, vc="a", posted=0)
    assert problems == [] and offer.id == "/"


@pytest.mark.parametrize("seconds", [253402300799.0 + 1, 1e300, -1e300, float("inf"), float("nan")])
def test_rfc3339_is_total(seconds: float):
    """Times beyond what a datetime holds (year 10000 on) still read, never raise."""
    assert str(seconds) in rfc3339(seconds) or "since the epoch" in rfc3339(seconds)


def test_rfc3339_at_the_edges_of_the_calendar():
    assert rfc3339(253402300799.0) == "9999-12-31T23:59:59Z"
    assert rfc3339(-62135596800.0) == "0001-01-01T00:00:00Z"
