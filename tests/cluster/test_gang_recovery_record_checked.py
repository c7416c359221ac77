"""A preemptor's record (``cellfit.io/preemptor-hold``) orders the deletion of a gang's members
on other nodes after a restart (gang_recovery.py), and it is an annotation: where the chart's
state policy is off or audit-only, anyone who may update a pod can write one. So a restarted
replica deletes only what FitGpp could have decided: on a preemptor of cellfit's scheduler, a pod
of cellfit's gang (``cellfit.io/gang: "true"``, cellfit's scheduler) that a Job the record
names (``gangs``) owns. Every other pod the record names stays, with a warning naming the record.

Before (review25 #3), any running pod a record's ``elsewhere`` named was marked and deleted:
another tenant's prod/db-0 included.

tests/cluster/test_gang_preemption_recovered.py's crash: the record on ml/te-0, gang-0 leaving
gpu-a, the pod named elsewhere running on gpu-b."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from scheduler.cluster import gang_recovery
from scheduler.constants import ANNOTATION_GANG, ANNOTATION_PREEMPTOR_HOLD
from scheduler.preemption import records
from tests.cluster.test_gang_preemption_recovered import DECIDED_AT, crashed_state, done, preempted_events, restarted
from tests.cluster.test_preemptor_record_write import trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.kube_objects import pod


def unrelated_pod() -> dict[str, Any]:
    """Another tenant's running pod, of another Job, in another namespace, no gang at all."""
    return pod("db-0", namespace="prod", uid="uid-db-0", gpus=8, node_name="gpu-b", phase="Running", priority=1000, job_uid="uid-db")


def named(*, uid: str = "uid-be-1", gangs: tuple[str, ...] = ("uid-gang",)) -> str:
    return records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=(uid,), gangs=gangs, decided_at=DECIDED_AT)


def not_a_gang_member() -> dict[str, Any]:
    body = member(1, "gpu-b")
    body["metadata"]["annotations"] = {k: v for k, v in body["metadata"]["annotations"].items() if k != ANNOTATION_GANG}
    return body


def of_another_scheduler() -> dict[str, Any]:
    body = member(1, "gpu-b")
    body["spec"]["schedulerName"] = "default-scheduler"
    return body


def test_a_record_naming_another_tenants_pod_deletes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    api = crashed_state(record=named(uid="uid-db-0", gangs=("uid-db",)), member_1=unrelated_pod())
    with caplog.at_level(logging.WARNING, logger=gang_recovery.__name__):
        done(restarted(api))
    assert (api.deleted, preempted_events(api)) == ({}, [])
    (warning,) = [r for r in caplog.records if r.name == gang_recovery.__name__]
    assert (warning.pod, warning.member) == ("ml/te-0", "prod/db-0")  # type: ignore[attr-defined]
    assert "uid-db-0" in warning.record  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("record", "member_1"),
    [
        pytest.param(named(gangs=("uid-other",)), None, id="member-of-a-job-the-record-does-not-name"),
        pytest.param(named(), not_a_gang_member(), id="pod-of-the-named-job-without-the-gang-annotation"),
        pytest.param(named(), of_another_scheduler(), id="member-of-another-scheduler"),
        pytest.param(records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",)), None, id="record-naming-no-gang"),
        pytest.param(records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1",), gangs=("uid-gang",)), None,
                     id="record-naming-no-decision-time"),
    ],
)
def test_a_record_naming_no_member_of_a_gang_it_names_deletes_nothing(record: str, member_1: dict[str, Any] | None) -> None:
    api = crashed_state(record=record, member_1=member_1)
    done(restarted(api))
    assert (api.deleted, preempted_events(api)) == ({}, [])


def test_a_record_on_a_pod_of_another_scheduler_deletes_nothing() -> None:
    api = crashed_state()
    preemptor = trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: named()})
    preemptor["spec"]["schedulerName"] = "default-scheduler"
    api.pods = [p for p in api.pods if p["metadata"]["name"] != "te-0"] + [preemptor]
    done(restarted(api))
    assert (api.deleted, preempted_events(api)) == ({}, [])


def test_the_gangs_member_is_still_finished() -> None:
    api = crashed_state(record=named())
    done(restarted(api))
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
