"""Bad offers and requests are refused at posting with a message naming the field."""

from __future__ import annotations

import math

import pytest

from scheduler.cells.config import CellTypeSpec, VirtualCellSpec, VirtualClusterSpec
from scheduler.cells.exchange import CellCatalog, Offer, Request, Window, cells_of, namespace_virtual_cluster, offer_problems, request_problems
from tests.cells.helpers import V100_TYPES

CATALOG = CellCatalog({name: CellTypeSpec.model_validate(spec) for name, spec in V100_TYPES.items()})
HOUR = 3600.0
VCS = {
    "a": VirtualClusterSpec(cells=(VirtualCellSpec(cell_type="V100-NODE", count=2), VirtualCellSpec(cell_type="V100-SWITCH", count=1))),
    "b": VirtualClusterSpec(cells=(VirtualCellSpec(cell_type="V100-NODE", count=1),)),
}


def offer(id="o1", tenant="a", cells=None, start=0.0, end=4 * HOUR, posted=0.0) -> Offer:
    return Offer(id=id, tenant=tenant, cells=cells_of(cells or {"V100-NODE": 1}), window=Window(start=start, end=end), posted=posted)


def check(o: Offer, posted: list[Offer] | None = None) -> list[str]:
    return offer_problems(offer=o, catalog=CATALOG, virtual_clusters=VCS, posted_offers=posted or [])


def test_a_valid_offer_has_no_problems():
    assert check(offer()) == []
    assert check(offer(cells={"V100-NODE": 2, "V100-SWITCH": 1})) == []


def test_offering_more_than_the_vc_holds_names_the_count():
    assert check(offer(cells={"V100-NODE": 3})) == ["spec.cells[0].count: virtual cluster 'a' holds 2 V100-NODE cells and cannot offer 3"]


def test_offering_a_type_the_vc_does_not_hold():
    assert check(offer(tenant="b", cells={"V100-SOCKET": 1})) == [
        "spec.cells[0].count: virtual cluster 'b' holds 0 V100-SOCKET cells and cannot offer 1"
    ]


def test_unknown_cell_type_names_the_field_and_the_known_types():
    (problem,) = check(offer(cells={"H100-NODE": 1}))
    assert problem.startswith("spec.cells[0].cellType: unknown cell type 'H100-NODE' (known: V100, V100-NODE, V100-RACK")


@pytest.mark.parametrize("count", [0, -2])
def test_zero_or_negative_counts(count):
    assert check(offer(cells={"V100-NODE": count})) == [f"spec.cells[0].count: must be >= 1, not {count}"]


def test_no_cells():
    o = Offer(id="o1", tenant="a", cells=(), window=Window(start=0, end=HOUR), posted=0)
    assert check(o) == ["spec.cells: must name at least one cell"]


@pytest.mark.parametrize(
    "start, end, posted, problem",
    [
        (HOUR, HOUR, 0, "spec.window.end: must be after spec.window.start (3600 <= 3600)"),
        (HOUR, 0, 0, "spec.window.end: must be after spec.window.start (0 <= 3600)"),
        (0, HOUR, 2 * HOUR, "spec.window.end: 3600 has already passed (posted at 7200)"),
        (math.nan, HOUR, 0, "spec.window.start: must be a finite time, not nan"),
        (0, math.inf, 0, "spec.window.end: must be a finite time, not inf"),
    ],
)
def test_empty_negative_or_past_windows(start, end, posted, problem):
    assert check(offer(start=start, end=end, posted=posted)) == [problem]


def test_overlapping_offers_count_against_the_quota():
    posted = [offer("o1", start=0, end=2 * HOUR), offer("o2", start=HOUR, end=3 * HOUR, posted=1)]
    # a holds 2 nodes: o1 and o2 both lend one during [1h, 2h); a third node then is too many.
    (problem,) = check(offer("o3", start=90 * 60, end=100 * 60, posted=2), posted)
    assert problem == (
        "spec.window: [5400, 6000) overlaps offers of virtual cluster 'a' that already lend 2 of its 2 V100-NODE cells then "
        "(o1 (1 V100-NODE, [0, 7200)), o2 (1 V100-NODE, [3600, 10800))); 1 more would be more than it holds"
    )
    # Overlapping only one of them, or back to back with both (half-open windows): fine.
    assert check(offer("o3", start=2 * HOUR, end=5 * HOUR, posted=2), posted) == []
    assert check(offer("o3", start=0, end=HOUR, posted=2), posted) == []
    assert check(offer("o3", start=3 * HOUR, end=4 * HOUR, posted=2), posted) == []


def test_overlap_counts_only_the_same_tenant_and_cell_type():
    posted = [offer("o1", cells={"V100-NODE": 2}), offer("ob", tenant="b"), offer("os", cells={"V100-SWITCH": 1})]
    assert check(offer("o2", cells={"V100-SWITCH": 1}), [posted[0], posted[1]]) == []
    assert check(offer("o2", tenant="b", cells={"V100-NODE": 1}), [posted[0]]) == []
    assert "already lend 1 of its 1 V100-SWITCH" in check(offer("o2", cells={"V100-SWITCH": 1}), posted)[0]
    # An offer re-validated (e.g. on update) does not count against itself.
    assert check(posted[0], posted) == []


def test_an_offer_of_a_vc_that_is_not_configured():
    assert check(offer(tenant="ghost")) == ["metadata.namespace: virtual cluster 'ghost' is not configured"]


def test_every_problem_is_reported_at_once():
    o = Offer(id="o1", tenant="a", cells=cells_of({"V100-NODE": 0, "NOPE": 1}), window=Window(start=5, end=1), posted=0)
    problems = check(o)
    assert [p.split(":")[0] for p in problems] == ["spec.cells[0].count", "spec.cells[1].cellType", "spec.window.end"]


def test_request_problems():
    good = Request(id="r1", tenant="b", cells=cells_of({"V100": 8}), window=Window(start=0, end=HOUR), posted=0)
    assert request_problems(request=good, catalog=CATALOG, virtual_clusters=VCS) == []
    bad = Request(id="r1", tenant="zz", cells=cells_of([("V100-POD", 1), ("V100", -1), ("V100", 2)]), window=Window(start=HOUR, end=0), posted=0)
    assert request_problems(request=bad, catalog=CATALOG, virtual_clusters=VCS) == [
        "metadata.namespace: virtual cluster 'zz' is not configured",
        "spec.cells[0].cellType: unknown cell type 'V100-POD' (known: V100, V100-NODE, V100-RACK, V100-SOCKET, V100-SWITCH)",
        "spec.cells[1].count: must be >= 1, not -1",
        "spec.cells[2].cellType: 'V100' is listed twice",
        "spec.window.end: must be after spec.window.start (0 <= 3600)",
    ]


def test_namespace_maps_to_a_vc_by_its_label():
    assert namespace_virtual_cluster(namespace="vision", labels={"cellfit.io/virtual-cluster": "a"}, virtual_clusters=VCS) == ("a", [])
    vc, problems = namespace_virtual_cluster(namespace="vision", labels={"team": "x"}, virtual_clusters=VCS)
    assert vc is None and problems == [
        "metadata.namespace: namespace 'vision' has no label cellfit.io/virtual-cluster, so it maps to no virtual cluster "
        "(its administrators label it with the virtual cluster it trades for)"
    ]
    vc, problems = namespace_virtual_cluster(namespace="vision", labels={"cellfit.io/virtual-cluster": "nlp"}, virtual_clusters=VCS)
    assert vc is None and problems == [
        "metadata.namespace: namespace 'vision' is labelled cellfit.io/virtual-cluster='nlp', which is not a configured virtual cluster (known: a, b)"
    ]
    assert namespace_virtual_cluster(namespace="gone", labels=None, virtual_clusters=VCS) == (None, ["metadata.namespace: namespace 'gone' does not exist"])
    assert namespace_virtual_cluster(namespace="x", labels={"cellfit.io/virtual-cluster": ""}, virtual_clusters=VCS)[0] is None
