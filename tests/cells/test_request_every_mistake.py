"""A pod's every independent mistake in its HiveD labels and annotations is told at once
(scheduler/cells/request.py): the FailedScheduling message named only the first one, so a user
with a bad priority and a bad gang-size fixed the priority, re-applied, and only then learnt of
the gang-size. A mistake that only follows from another (a gang's size where the gang itself is
in error) is left out."""

from __future__ import annotations

import msgspec
import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.request import InvalidAnnotations, parse_request, read_request
from scheduler.core.model import PodInfo
from scheduler.errors import InvalidAnnotation
from scheduler.kube.names import filter_offered
from tests.cells.helpers import node, node_names, pod, rack_cluster

PRIORITY = "label cellfit.io/priority: 'high' is not 'guaranteed' or 'opportunistic'"
GANG_SIZE = "annotation cellfit.io/gang-size: 'abc' is not an integer"


def with_annotations(p: PodInfo, **changed: str) -> PodInfo:
    annotations = {**p.annotations, **{f"cellfit.io/{k.replace('_', '-')}": v for k, v in changed.items()}}
    return msgspec.structs.replace(p, annotations=annotations)


def two_mistakes() -> PodInfo:
    return with_annotations(pod("w-0", 1, vc="a", priority="high", gang=("train", 2)), gang_size="abc")


def message(p: PodInfo) -> str:
    with pytest.raises(InvalidAnnotation) as raised:
        parse_request(p)
    return str(raised.value)


def test_a_bad_priority_and_a_bad_gang_size_are_both_named_each_with_its_field() -> None:
    with pytest.raises(InvalidAnnotations) as raised:
        parse_request(two_mistakes())
    assert str(raised.value) == f"{PRIORITY}; {GANG_SIZE}"
    assert [m.field for m in raised.value.mistakes] == ["label cellfit.io/priority", "annotation cellfit.io/gang-size"]


def test_one_mistake_is_told_as_before() -> None:
    error = message(with_annotations(pod("w-0", 1, vc="a", gang=("train", 2)), gang_size="abc"))
    assert error == GANG_SIZE


def test_mistakes_that_follow_from_another_are_left_out() -> None:
    # No gang: its size is not read at all.
    assert parse_request(with_annotations(pod("w-0", 1, vc="a"), gang_size="abc")).gang is None
    # A gang without a size is a mistake only where the gang reads "true".
    unsized = msgspec.structs.replace(pod("w-0", 1, vc="a", gang=("t", 2)), annotations={"cellfit.io/gang": "yes"})
    assert message(unsized) == "annotation cellfit.io/gang: 'yes' is not 'true' or 'false'"
    # A gang without an owner: the gang's mistake, not its size's too.
    ownerless = msgspec.structs.replace(with_annotations(pod("w-0", 1, vc="a", gang=("t", 2)), gang_size="0"), owner=None)
    assert message(ownerless) == "annotation cellfit.io/gang: a gang pod must be owned by a Job (it has no owner)"


def test_the_gang_size_beside_an_unreadable_gang_is_judged_as_a_gangs() -> None:
    both = with_annotations(pod("w-0", 1, vc="a", gang=("t", 2)), gang="yes", gang_size="abc")
    assert message(both) == f"annotation cellfit.io/gang: 'yes' is not 'true' or 'false'; {GANG_SIZE}"


def test_the_request_read_with_the_keys_in_error_set_aside_is_still_checked() -> None:
    request, mistakes = read_request(two_mistakes())
    assert (request.vc, request.priority.value, request.gang) == ("a", "guaranteed", None)
    assert [str(m) for m in mistakes] == [PRIORITY, GANG_SIZE]


def test_the_filters_refusal_names_both_mistakes() -> None:
    engine = HivedEngine.from_config(rack_cluster(1, 4, vcs={"a": [{"cellType": "V100-NODE", "count": 1}]}))
    nodes = node_names(1, 4)
    for name in nodes:
        engine.apply_node(node(name))
    decision = filter_offered(engine, two_mistakes(), nodes)
    assert set(decision.unresolvable.values()) == {f"{PRIORITY}; {GANG_SIZE}"}, decision
