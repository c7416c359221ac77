"""A preempted Job whose pod is still exiting (checkpointing in its grace period), and a pod
kube-scheduler nominated to a node after preempting there for it.

Live, ``why job/opp-a`` said "…; now no pod yet: the Job controller has not created one (or all
have ended)" with "now: pending" while its pod was checkpointing; and the preemptor said
"pending: Insufficient nvidia.com/gpu" with its nomination only as a detail."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView, Facts, events_from, job_from, pod_from, preemption_from
from scheduler.kubectl.why import explain, explain_job
from tests.kubectl.test_why import T0, a_pod, event, job_json, pod_json

UID = "1e844d1f-7735-4253-9934-681a0eb57d7f"


def test_a_preempted_jobs_pod_still_exiting_is_said_to_be_exiting_not_missing() -> None:
    theirs = event("Preempted", f"Preempted by pod {UID} on node gpu-node-2", warning=True, name="opp-a-x7k2q")
    found = preemption_from(victim="ns/opp-a-x7k2q", preempted=events_from([theirs])[0], preemptor_events=())
    job = job_from(job_json("opp-a", annotations={"cellfit.io/preemptions": "1"}),
                   pods=(a_pod("opp-a-x7k2q", node="gpu-node-2", phase="Running", deleting=True),), preemptions=(found,))
    answer = explain_job(job, CellfitView())
    assert answer.reason == "preempted"
    assert answer.summary == (f"preempted 1 time, last by pod {UID} on node gpu-node-2; now pod opp-a-x7k2q is exiting after "
                              "its preemption (in its grace period); its next pod is made once it has exited")
    # The details say "now" as the summary does (L4: "now: pending" beside "now no pod yet").
    assert f"now: {answer.summary.partition('; now ')[2]}" in answer.details and "now: pending" not in answer.details


def test_a_deleted_pod_not_preempted_is_said_to_be_terminating() -> None:
    job = job_from(job_json("be"), pods=(a_pod("be-x7k2q", node="n1", phase="Running", deleting=True),))
    answer = explain_job(job, CellfitView())
    assert (answer.reason, answer.summary) == ("terminating", "pod be-x7k2q is terminating (deleted, in its grace period); its next pod is made once it has exited")


def test_a_pod_kube_scheduler_preempted_for_waits_for_its_victims() -> None:
    preemptor = pod_json("trial-0")
    preemptor["status"]["nominatedNodeName"] = "gpu-node-2"
    failed = event("FailedScheduling", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
                   "available: 1 node(s) had victims, 2 No preemption victims found for incoming pod.", at=T0, warning=True)
    answer = explain(Facts(pod=pod_from(preemptor, events=events_from([failed]))))
    assert answer.reason == "preempting"
    assert answer.summary == ("nominated to node gpu-node-2 by kube-scheduler, which preempted pods there for it: it is placed "
                              "there once its victims have left (their grace period); its last attempt: Insufficient nvidia.com/gpu")
