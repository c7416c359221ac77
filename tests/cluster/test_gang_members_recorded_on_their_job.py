"""The members a gang preemption left running on other nodes are named on the gang's Job too
(``cellfit.io/gang-preempted``, scheduler/preemption/gang_records.py), so that a replica that
(re)starts after the preemptor's record went (the trial pod finished or was deleted, a list of
unfinished pods leaving it out; its hold gave up and took it off) still deletes them (review27
R2): a replica's memory keeps such a record only while it lives. Named by a replica that reads a
young record it did not decide (a list), or sees it go (the preemptor ending, its record taken
off), and by the deciding replica whose own deletion of a member gave up; taken off each member
once it is deleted or runs no more.

The killed replica's state is tests/cluster/test_gang_recovery_after_the_preemptors_binding.py's;
the API double also serves the gang's Job ml/gang as the API server would (reads, JSON Patches).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import msgspec
import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache
from scheduler.constants import ANNOTATION_GANG_PREEMPTED
from scheduler.core.fit import ResourceFitEngine
from scheduler.kube import wire
from scheduler.preemption import FitGppSettings, gang_records
from scheduler.preemption.engine import FitGppEngine
from tests.cluster.test_gang_member_preemption_retried import FailingDeletionApi
from tests.cluster.test_gang_preemption_recovered import done
from tests.cluster.test_gang_recovery_after_the_preemptors_binding import RecoveringApi, crashed, record_cleared
from tests.cluster.test_gang_recovery_waits_for_deciding_replica import Timers
from tests.cluster.test_preemptor_record_write import replica, trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.json_patch import patched
from tests.support.kube_objects import node


class GangJobApi(RecoveringApi):
    """Also holds the gang's Job ml/gang (UID uid-gang) as the API server does."""

    def __init__(self, *, job_annotations: dict[str, str] | None = None, **lists: Any) -> None:
        self.job: dict[str, Any] = {"metadata": {"name": "gang", "namespace": "ml", "uid": "uid-gang", "resourceVersion": "1",
                                                 "annotations": dict(job_annotations or {})}}
        super().__init__(jobs=[self.job], **lists)

    @property
    def named(self) -> dict[str, gang_records.LeftMember]:
        return gang_records.decode(self.job["metadata"].get("annotations", {}).get(ANNOTATION_GANG_PREEMPTED, ""))

    def get_job(self, *, namespace: str, name: str) -> Any:
        return msgspec.convert(self.job, wire.Job) if (namespace, name) == ("ml", "gang") else None

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        self.writes.append(("PATCH", f"job {name}", operations, "application/json-patch+json"))
        self.job = patched(self.job, operations)
        self.job["metadata"]["resourceVersion"] = str(int(self.job["metadata"]["resourceVersion"]) + 1)
        self.jobs[:] = [self.job]


def gang_api(api: FailingDeletionApi) -> GangJobApi:
    """``api``'s cluster, with the gang's Job."""
    return GangJobApi(failures=api.failures, status=api.status, nodes=api.nodes, pods=api.pods)


def started(api: GangJobApi, *, jobs_first: bool = False) -> ClusterCache:
    """A replica (re)started: the nodes, then the Jobs and the pods listed in either order."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = ClusterCache(api=api, engine=engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=engine.pods, jobs=engine)
    assert cache.jobs is not None
    cache.nodes._list_and_replace()
    for reflector in ([cache.jobs, cache.pods] if jobs_first else [cache.pods, cache.jobs]):
        reflector._list_and_replace()
    return cache


LEFT = gang_records.LeftMember(by="ml/te-0", node="gpu-a", at=time.time() - cache_module.GANG_RECOVERY_AFTER_SECONDS - 60)


def test_a_replica_reading_a_young_record_names_the_member_on_its_gangs_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "_timer", Timers())
    decided_at = time.time() - 10
    api = gang_api(crashed(decided_at))
    done(started(api))
    assert api.named == {"uid-be-1": gang_records.LeftMember(by="ml/te-0", node="gpu-a", at=decided_at)}
    assert api.deleted == {}  # young: the deciding replica may still be at it


@pytest.mark.parametrize("jobs_first", [False, True], ids=["pods-then-jobs", "jobs-then-pods"])
def test_a_restart_after_the_trial_pod_went_deletes_the_member_its_job_names_and_takes_it_off(jobs_first: bool) -> None:
    api = GangJobApi(job_annotations={ANNOTATION_GANG_PREEMPTED: gang_records.encode({"uid-be-1": LEFT})},
                     failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[member(1, "gpu-b")])
    done(started(api, jobs_first=jobs_first))
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert ANNOTATION_GANG_PREEMPTED not in api.job["metadata"]["annotations"]
    (told,) = [e["message"] for e in api.events if e["reason"] == "Preempted"]
    assert told.startswith("preempted with its gang ml/gang: the trial pod ml/te-0 takes the gang's room on node gpu-a; this pod ran on "
                           "node gpu-b")


def test_the_whole_story_a_restart_after_the_trial_pod_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    """B lists A's young record (+10 s), binds te-0, te-0 finishes, then every replica restarts
    (+300 s): the new one lists neither te-0 nor its record, only the Job's."""
    monkeypatch.setattr(cache_module, "_timer", Timers())
    decided_at = time.time() - 10
    api = gang_api(crashed(decided_at))
    done(started(api))
    api.pods = [member(1, "gpu-b")]  # te-0 finished: a list of unfinished pods leaves it out
    monkeypatch.setattr(time, "time", lambda: decided_at + cache_module.GANG_RECOVERY_AFTER_SECONDS + 1)
    done(started(api))
    assert api.deleted == {"ml/gang-1": "uid-be-1"}


def test_a_jobs_record_of_members_that_run_no_more_is_taken_off() -> None:
    api = GangJobApi(job_annotations={ANNOTATION_GANG_PREEMPTED: gang_records.encode({"uid-be-1": LEFT, "uid-be-2": LEFT})},
                     failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[])
    done(started(api))
    assert api.deleted == {} and ANNOTATION_GANG_PREEMPTED not in api.job["metadata"]["annotations"]


def test_a_young_jobs_record_waits_for_the_deciding_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    timers = Timers()
    monkeypatch.setattr(cache_module, "_timer", timers)
    young = gang_records.LeftMember(by="ml/te-0", node="gpu-a", at=time.time() - 10)
    api = GangJobApi(job_annotations={ANNOTATION_GANG_PREEMPTED: gang_records.encode({"uid-be-1": young})},
                     failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[member(1, "gpu-b")])
    done(started(api))
    assert api.deleted == {} and api.named == {"uid-be-1": young}
    assert [round(delay) for delay, _ in timers.asked] == [round(cache_module.GANG_RECOVERY_AFTER_SECONDS - 10)]


def test_a_jobs_record_naming_a_pod_of_another_job_deletes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    other = member(1, "gpu-b")
    other["metadata"]["ownerReferences"][0].update(name="other", uid="uid-other")
    api = GangJobApi(job_annotations={ANNOTATION_GANG_PREEMPTED: gang_records.encode({"uid-be-1": LEFT})},
                     failures=0, status=500, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[other])
    done(started(api))
    assert api.deleted == {}
    assert "no member of its gang" in caplog.text


def test_the_deciding_replica_names_the_member_whose_deletion_it_gave_up_on_its_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "_timer", Timers())
    monkeypatch.setattr(cache_module, "PREEMPT_PAUSES_SECONDS", (0.0, 0.0, 0.0, 0.0))
    api = GangJobApi(failures=len(cache_module.PREEMPT_PAUSES_SECONDS) + 1, status=503,
                     nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[member(0, "gpu-a"), member(1, "gpu-b"), trial_pod()])
    cache, service, _ = replica(api)
    body = {"Pod": trial_pod(), "NodeNameToMetaVictims": {"gpu-a": {"Pods": [{"UID": "uid-be-0"}], "NumPDBViolations": 0}}}
    service.preempt(json.dumps(body).encode())
    done(cache)
    assert api.deleted == {}
    (left,) = api.named.values()
    assert (list(api.named), left.by, left.node) == (["uid-be-1"], "ml/te-0", "gpu-a")


def test_a_member_deleted_by_the_recovery_is_taken_off_its_job() -> None:
    """A replica lists A's old record on te-0 and a Job that names gang-1 (B named it, then died)."""
    api = gang_api(crashed(LEFT.at))
    api.job["metadata"]["annotations"] = {ANNOTATION_GANG_PREEMPTED: gang_records.encode({"uid-be-1": LEFT})}
    cache = started(api)
    done(cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert ANNOTATION_GANG_PREEMPTED not in api.job["metadata"]["annotations"]
    assert len([e for e in api.events if e["reason"] == "Preempted"]) == 1  # named twice, preempted once


def test_a_record_whose_hold_gave_up_is_named_on_the_job_as_it_is_taken_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "_timer", Timers())
    api = gang_api(crashed(time.time() - 10))
    cache = started(api)
    cache._writes.submit(lambda: None).result()
    # The Job as if that list had not named gang-1 (a replica that only watched): the hold's end must.
    api.job["metadata"]["annotations"] = {}
    api.jobs[:] = [api.job]
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    cache._forget_node("gpu-a")  # the hold gives up and takes the record off
    done(cache)
    assert len(record_cleared(api)) == 1
    assert list(api.named) == ["uid-be-1"]
