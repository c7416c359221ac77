"""``kubectl cellfit why`` of a pod with several annotation mistakes names what to change for
each (scheduler/kubectl/why.py): the filter's refusal now lists every mistake, each
``field: problem``, joined by ``; `` (scheduler/cells/request.py), and the advice named only
the first field."""

from __future__ import annotations

import msgspec

from scheduler.cells.request import parse_request
from scheduler.errors import InvalidAnnotation
from scheduler.kubectl.objects import CellfitView, events_from, pod_from
from scheduler.kubectl.why import explain_pod
from tests.cells.helpers import pod as engine_pod


def filter_reason() -> str:
    """The filter's reason for a gang pod with a bad priority and a bad gang-size: the parser's."""
    gang_pod = engine_pod("w-0", 1, vc="a", priority="high", gang=("train", 2))
    bad = msgspec.structs.replace(gang_pod, annotations={**gang_pod.annotations, "cellfit.io/gang-size": "abc"})
    try:
        parse_request(bad)
    except InvalidAnnotation as error:
        return str(error)
    raise AssertionError("the request was accepted")


def test_why_names_every_field_to_change() -> None:
    reason = filter_reason()
    body = {
        "metadata": {"name": "w-0", "namespace": "ml", "uid": "uid-w-0", "labels": {}},
        "spec": {"schedulerName": "cellfit"},
        "status": {"phase": "Pending"},
    }
    event = {
        "reason": "FailedScheduling",
        "type": "Warning",
        "count": 1,
        "lastTimestamp": "2026-11-28T18:59:40Z",
        "message": f"0/4 nodes are available: 4 {reason}.",
        "involvedObject": {"kind": "Pod", "name": "w-0"},
        "metadata": {"creationTimestamp": "2026-11-28T18:59:40Z"},
    }
    answer = explain_pod(pod_from(body, events=events_from([event])), CellfitView())
    assert answer.reason == "never-placeable", answer
    assert answer.summary == (
        "can never be placed as written: label cellfit.io/priority: 'high' is not 'guaranteed' or 'opportunistic'; "
        "annotation cellfit.io/gang-size: 'abc' is not an integer (give each of label cellfit.io/priority and "
        "annotation cellfit.io/gang-size a value it takes)"
    ), answer
