"""Only a batch/v1 Job is told of its preempted pod (PodPreempted, a4414b4). The victim's owner
was taken as a Job by its kind alone, so a pod of Volcano's Job (batch.volcano.sh, kind "Job")
had an Event written whose involvedObject says batch/v1: shown on no object, a wasted write.
The owner's apiVersion now travels with it (OwnerRef.api_version, from the pod's
ownerReference), through each writer: the replica that answered the preempt verb, one finishing
a killed replica's record (the watched victim's owner before the record's, which carries no
apiVersion) and HiveD's reclaim."""

from __future__ import annotations

from typing import Any

import pytest

import tests.cluster.test_reclaim_victim_job_outcome as reclaim_tests
from tests.cluster.test_reclaim import Api as ReclaimApi
from scheduler.cluster import cache as cache_module
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from tests.cluster.test_preemption_finished_after_kill import ClusterApi, killed_after_the_record, restarted
from tests.cluster.test_preemptor_record_write import WritingApi, preempt, replica, trial_pod, victim_pod
from tests.preemption.test_hived_reclaim_victim_event import IGNORE_RULE, job
from tests.support.kube_objects import node

VOLCANO = "batch.volcano.sh/v1alpha1"
BATCH = "batch/v1"


def owned_by(body: dict[str, Any], api_version: str) -> dict[str, Any]:
    (reference,) = body["metadata"]["ownerReferences"]
    reference["apiVersion"] = api_version
    return body


def reasons(api: Any) -> list[str]:
    return [e["reason"] for e in api.events]


@pytest.mark.parametrize(("api_version", "told"), [(VOLCANO, ["Preempting", "Preempted"]), (BATCH, ["Preempting", "Preempted", "PodPreempted"])])
def test_the_preempt_verb_tells_only_a_batch_job(api_version: str, told: list[str]) -> None:
    api = WritingApi(nodes=[node("gpu-a", gpus=8)], pods=[owned_by(victim_pod(), api_version), trial_pod()])
    cache, service, _ = replica(api)
    preempt(service, cache)
    assert reasons(api) == told


@pytest.mark.parametrize(("api_version", "told"), [(VOLCANO, ["Preempted"]), (BATCH, ["Preempted", "PodPreempted"])])
def test_a_finisher_tells_only_a_batch_job_of_a_victim_it_still_watches(api_version: str, told: list[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))
    record = killed_after_the_record()  # it names be-0 under its Job's resume hold
    api = ClusterApi(nodes=[node("gpu-a", gpus=8)],
                     pods=[owned_by(victim_pod(leaving=True), api_version), trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})])
    _, cache, _, _ = restarted(record, api=api)
    cache._writes.shutdown(wait=True)
    assert reasons(api) == told


@pytest.mark.parametrize(("api_version", "told"), [(VOLCANO, []), (BATCH, ["ob-"])])
def test_hived_reclaim_tells_only_a_batch_job(api_version: str, told: list[str]) -> None:
    api = ReclaimApi()
    reclaim_tests.reclaimed_message(job("ob", backoff_limit=6, rules=[IGNORE_RULE]), owner_api_version=api_version, api=api)
    assert "Preempted" in reasons(api)
    assert [e["pod_name"][:3] for e in api.events if e["reason"] == "PodPreempted"] == told
