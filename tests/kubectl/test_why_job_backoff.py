"""``kubectl cellfit why job/NAME`` for a Job with no pod while the Job controller backs off after
failed pods (user25 #11): after 6 preemptions b-opp had no pod for ~7 min, and ``why`` said only
"no pod yet: the Job controller has not created one (or all have ended)". The Job controller waits
10 s after a failed pod, doubled per failed pod since the last success, at most 10 min
(pkg/controller/job: DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff); cellfit's preempted
pods are failed ones unless the Job's podFailurePolicy ignores DisruptionTarget."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scheduler.kube.times import timestamp
from scheduler.kubectl.objects import CellfitView, Preemption, job_from, pod_from
from scheduler.kubectl.why import explain_job

IGNORE_PREEMPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}


def b_opp(*, failed: int, succeeded: int = 0, policy: dict[str, Any] | None = None, pods: tuple[Any, ...] = (),
          preempted: int = 0) -> Any:
    spec: dict[str, Any] = {"suspend": False, "backoffLimit": 100}
    if policy is not None:
        spec["podFailurePolicy"] = policy
    body = {"metadata": {"name": "b-opp", "namespace": "team-b", "uid": "u-b", "annotations": {"cellfit.io/preemptions": str(preempted)}},
            "spec": spec, "status": {"failed": failed, "succeeded": succeeded}}
    preemptions = tuple(Preemption(victim=f"team-b/b-opp-{i}abcd", by="team-a/a-guar-x", node="gpu-1",
                                   when=f"2026-11-28T22:{40 + i}:00Z") for i in range(preempted))
    return job_from(body, pods=pods, preemptions=preemptions)


def failed_pod(name: str, *, finished: str) -> Any:
    return pod_from({"metadata": {"name": name, "namespace": "team-b"}, "spec": {"schedulerName": "cellfit", "nodeName": "gpu-1"},
                     "status": {"phase": "Failed", "containerStatuses": [
                         {"name": "main", "state": {"terminated": {"exitCode": 1, "finishedAt": finished}}}]}})


def test_a_preempted_job_without_a_pod_is_told_the_job_controllers_back_off() -> None:
    job = b_opp(failed=6, preempted=6)
    answer = explain_job(job, CellfitView(), now=timestamp("2026-11-28T22:47:00Z"))
    now = answer.summary.partition("; now ")[2]
    assert now == (
        "no pod: the Job controller waits before its next pod after 6 failed pods (its back-off: 10 s after the "
        "first, doubled per failed pod since the last success, at most 10 min); the last failure seen was at "
        "2026-11-28T22:45:00Z: its next pod comes 5 min after, at 2026-11-28T22:50:20Z at the earliest (in ~3 min); "
        "its pods cellfit preempted count among the failed ones, as its spec.podFailurePolicy does not ignore "
        "DisruptionTarget"), answer


def test_a_failed_pods_finish_is_the_last_failure_seen() -> None:
    job = b_opp(failed=1, pods=(failed_pod("b-opp-x1y2z", finished="2026-11-28T22:50:03Z"),))
    answer = explain_job(job, CellfitView(), now=timestamp("2026-11-28T22:50:05Z"))
    assert answer.reason == "backoff", answer
    assert "after 1 failed pod (" in answer.summary, answer
    assert ("the last failure seen was at 2026-11-28T22:50:03Z: its next pod comes 10 s after, at 2026-11-28T22:50:13Z at the "
            "earliest (in ~8 s)") in answer.summary, answer
    assert "preempted" not in answer.summary, answer


def test_after_a_success_the_count_behind_the_back_off_is_not_known() -> None:
    answer = explain_job(b_opp(failed=3, succeeded=1, preempted=3), CellfitView(), now=timestamp("2026-11-28T22:47:00Z"))
    assert "after 3 failed pods (" in answer.summary and "at the earliest" not in answer.summary, answer


def test_preemptions_a_policy_ignores_are_not_said_to_count() -> None:
    answer = explain_job(b_opp(failed=2, policy=IGNORE_PREEMPTION, preempted=1), CellfitView(), now=timestamp("2026-11-28T22:47:00Z"))
    assert "after 2 failed pods (" in answer.summary and "count among" not in answer.summary, answer


def test_a_per_index_limit_is_not_given_a_time() -> None:
    job = replace(b_opp(failed=2, preempted=2), backoff_limit=("backoffLimitPerIndex", 1))
    answer = explain_job(job, CellfitView(), now=timestamp("2026-11-28T22:47:00Z"))
    assert "after 2 failed pods (" in answer.summary and "at the earliest" not in answer.summary, answer


def test_a_job_without_failed_pods_has_no_pod_yet() -> None:
    answer = explain_job(b_opp(failed=0), CellfitView())
    assert answer.summary == "no pod yet: the Job controller has not created one (or all have ended)", answer
