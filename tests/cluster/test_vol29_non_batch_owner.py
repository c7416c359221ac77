"""A pod whose owner is another group's kind "Job" (Volcano's batch.volcano.sh/v1alpha1) gets none
of the handling meant for a batch/v1 Job (OwnerRef.is_batch_job): preempted by FitGpp, its
owner gets no cellfit.io/preemptions count (no Job read, no patch), no resume hold on its node
(none in memory, none in the preemptor's record), and its Preempted Event says what is true of
a pod another controller creates again, not that cellfit has not read its Job yet. A batch/v1
owner, through the same preempt verb, still gets all of it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.model import OwnerRef
from scheduler.wording import UNKNOWN_JOB_OUTCOME
from tests.cluster.test_preemptor_record_write import WritingApi, preempt, replica, trial_pod, victim_pod
from tests.cluster.test_review29_only_batch_jobs_told_of_preemption import BATCH, VOLCANO, owned_by
from tests.support.kube_objects import node


def preempted(api_version: str) -> tuple[WritingApi, Any]:
    api = WritingApi(nodes=[node("gpu-a", gpus=8)], pods=[owned_by(victim_pod(), api_version), trial_pod()])
    cache, service, engine = replica(api)
    answer = preempt(service, cache)
    assert answer["NodeNameToMetaVictims"] == {"gpu-a": {"Pods": [{"UID": "uid-be-0"}], "NumPDBViolations": 0}}
    return api, engine


def recorded(api: WritingApi) -> dict[str, Any]:
    (record,) = [w[2]["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] for w in api.writes
                 if w[1] == "/api/v1/namespaces/ml/pods/te-0/status"]
    decoded: dict[str, Any] = json.loads(record)
    return decoded


def victim_message(api: WritingApi) -> str:
    (message,) = [e["message"] for e in api.events if e["reason"] == "Preempted"]
    return str(message)


def test_a_volcano_owned_victim_gets_no_job_count() -> None:
    api, engine = preempted(VOLCANO)
    assert [w for w in api.writes if w[1].startswith("job ") or "/jobs/" in w[1]] == []  # no batch/v1 Job read or patched
    assert engine.victim_jobs(["uid-be-0"]) == []
    assert recorded(api).get("owed", {}).get("jobs", {}) == {}  # nor one a finishing replica would write


def test_a_volcano_owned_victim_gets_no_resume_hold() -> None:
    api, engine = preempted(VOLCANO)
    assert not engine.holds.holds_for(job_uid="uid-be", victim_uid="uid-be-0")
    assert "resumes" not in recorded(api)  # nor one a restart would rebuild


def test_a_volcano_owned_victim_is_told_its_controller_makes_it_again_not_that_its_job_is_unread() -> None:
    api, _ = preempted(VOLCANO)
    message = victim_message(api)
    assert UNKNOWN_JOB_OUTCOME not in message
    assert "quickest to resume" in message  # as a ReplicaSet's pod is told: its controller makes it again


def test_a_batch_job_owned_victim_still_gets_its_count_and_resume_hold() -> None:
    api, engine = preempted(BATCH)
    assert ("GET", "job be") in [w[:2] for w in api.writes]
    assert [job.uid for job, _ in engine.victim_jobs(["uid-be-0"])] == ["uid-be"]
    assert engine.holds.holds_for(job_uid="uid-be", victim_uid="uid-be-0")
    record = recorded(api)
    assert record["resumes"] == {"uid-be-0": "uid-be"}
    assert set(record["owed"]["jobs"]) == {"uid-be"}
    assert UNKNOWN_JOB_OUTCOME in victim_message(api)  # the test double's Job watch shows no Job


@pytest.mark.parametrize("api_version", [VOLCANO, BATCH])
def test_the_owner_is_a_batch_job_only_of_the_batch_group(api_version: str) -> None:
    owner = OwnerRef(kind="Job", name="be", uid="uid-be", api_version=api_version)
    assert owner.is_batch_job is (api_version == BATCH)
    assert OwnerRef(kind="Job", name="be", uid="uid-be").is_batch_job  # built in process, with no apiVersion
