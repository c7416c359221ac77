"""A preemptor's binding leaves its record on it while a gang member the record names elsewhere
still runs (scheduler/preemption/bound_records.py; review28): gang recovery finishes the gang's
preemption from it should the replica that decided have died. The engine follows such a record on
a bound pod and has it taken off (the driver's ``clear_record``) once the last member it saw
running leaves: not before a member shows (a restart lists pods node by node, the preemptor
perhaps first), and not for a record the pod carries no more. The binding of a pod whose record
names no member still running, or is of the format before ``gangs`` and ``at``, empties it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import PodInfo
from scheduler.kube import translate, wire
from scheduler.preemption import FitGppSettings, records
from scheduler.preemption.engine import FitGppEngine
from tests.cluster.test_gang_preemption_recovered import leaving
from tests.cluster.test_preemptor_record_write import trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.kube_objects import node

LEFT = records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",), decided_at=1_790_000_000.0)


def info(body: dict[str, Any]) -> PodInfo:
    return translate.pod_info(wire.POD_DECODER.decode(json.dumps(body).encode()), gpu_resource="nvidia.com/gpu")


def bound_te_0(record: str) -> dict[str, Any]:
    body = trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})
    body["spec"]["nodeName"] = "gpu-a"
    body["status"]["phase"] = "Running"
    return body


def following() -> tuple[FitGppEngine, list[tuple[str, str]]]:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    for name in ("gpu-a", "gpu-b"):
        engine.apply_node(translate.node_info(wire.NODE_DECODER.decode(json.dumps(node(name, gpus=8)).encode()), gpu_resource="nvidia.com/gpu"))
    cleared: list[tuple[str, str]] = []
    engine.follow_preemptor_records(watch_victims=lambda _: None, clear_record=lambda pod, text: cleared.append((pod.uid, text)))
    return engine, cleared


def test_a_restart_listing_the_preemptor_first_takes_its_record_off_once_the_member_shown_running_leaves() -> None:
    engine, cleared = following()
    engine.apply_pod(info(bound_te_0(LEFT)))  # gang-1 not listed yet: not taken for gone
    assert cleared == []
    engine.apply_pod(info(member(1, "gpu-b")))
    assert cleared == []
    engine.apply_pod(info(leaving(member(1, "gpu-b"))))
    assert cleared == [("uid-te-0", LEFT)]
    engine.delete_pod("uid-be-1")
    assert cleared == [("uid-te-0", LEFT)]  # once


def test_a_member_deleted_while_running_takes_the_record_off() -> None:
    engine, cleared = following()
    engine.apply_pod(info(member(1, "gpu-b")))
    engine.apply_pod(info(bound_te_0(LEFT)))
    engine.delete_pod("uid-be-1")
    assert cleared == [("uid-te-0", LEFT)]


@pytest.mark.parametrize("then", ["emptied", "deleted"])
def test_a_record_the_preemptor_carries_no_more_is_not_taken_off(then: str) -> None:
    engine, cleared = following()
    engine.apply_pod(info(member(1, "gpu-b")))
    engine.apply_pod(info(bound_te_0(LEFT)))
    if then == "emptied":  # another replica took it off first
        engine.apply_pod(info(bound_te_0("")))
    else:
        engine.delete_pod("uid-te-0")
    engine.apply_pod(info(leaving(member(1, "gpu-b"))))
    assert cleared == []


def reserved(engine: FitGppEngine, record: str) -> str:
    pending = info(trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record}))
    engine.apply_pod(pending)
    return engine.reserve(pending, "gpu-a").annotations[ANNOTATION_PREEMPTOR_HOLD]


def test_the_binding_leaves_the_record_less_its_resumed_jobs_while_a_member_runs_and_it_goes_when_the_member_does() -> None:
    engine, cleared = following()
    engine.apply_pod(info(member(1, "gpu-b")))
    decided = records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",), decided_at=1_790_000_000.0,
                             resumes={"uid-be-0": "uid-gang"})
    assert reserved(engine, decided) == LEFT
    engine.apply_pod(info(leaving(member(1, "gpu-b"))))  # the bound pod not shown yet: followed from the binding
    assert cleared == [("uid-te-0", LEFT)]


@pytest.mark.parametrize("record", [
    pytest.param(LEFT, id="member-not-running"),
    pytest.param(records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",)), id="no-gangs-nor-time"),
    pytest.param(records.encode(node="gpu-a", victims=("uid-be-0",)), id="no-member-elsewhere"),
    pytest.param('{"node":"gpu-a"}', id="does-not-read"),
])
def test_the_binding_empties_a_record_no_recovery_would_act_on(record: str) -> None:
    engine, cleared = following()
    engine.apply_pod(info(leaving(member(1, "gpu-b"))))
    assert reserved(engine, record) == ""
    assert cleared == []




def test_a_binding_that_failed_leaves_the_pending_pods_record_alone() -> None:
    engine, cleared = following()
    engine.apply_pod(info(member(1, "gpu-b")))
    assert reserved(engine, LEFT) == LEFT
    engine.unreserve("uid-te-0")
    engine.apply_pod(info(leaving(member(1, "gpu-b"))))
    assert cleared == []
