"""``kubectl cellfit why`` of the pods of HiveD's reclaim, with the Events cellfit now writes for
it (scheduler/preemption/reclaimed.py; before, only kube-scheduler's own). The victim's Event
says why itself, with no FitGpp score: a reclaimed pod whose preemptor's Events its user may not
read (another tenant's namespace, the usual case: another VC's guaranteed pod) was told "its
score is in the events of namespace ..., which you may not read", a score there is none of. The
preemptor, nominated while its victims leave, read "where FitGpp preempted ...". And a pod the
leader's reclaim deleted itself (scheduler/cluster/reclaim.py: "preempted for guaranteed pod
..."), whose Event the answer did not read, was "preempted by ?"."""

from __future__ import annotations

from dataclasses import replace

from scheduler.cluster.reclaim import Reclaim, victim_message
from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.kubectl.objects import CellfitView, GoneFacts, events_from, job_from, preempted_event, preemption_from
from scheduler.kubectl.why import explain_gone, explain_job, explain_pod
from scheduler.preemption.reclaimed import ReclaimDecision
from tests.kubectl.test_why import a_pod, event, job_json

UNREAD = "its score is in the events of namespace team-a, which you may not read"


def reclaim() -> ReclaimDecision:
    """team-a's guaranteed pod g (VC a) reclaims the cells team-b's opportunistic pod ob-0-7xk2p (VC b) ran on."""
    g = PodInfo(uid="g", namespace="team-a", name="g", requests=Resources(1000, 2**30, 8), labels={"cellfit.io/virtual-cluster": "a"})
    victim = PodInfo(
        uid="v",
        namespace="team-b",
        name="ob-0-7xk2p",
        requests=Resources(1000, 2**30, 8),
        labels={"cellfit.io/virtual-cluster": "b", "cellfit.io/priority": "opportunistic"},
        node_name="gpu-0",
    )
    return ReclaimDecision.of(preemptor=g, node="gpu-0", victims=(victim,))


def victims_event() -> dict[str, object]:
    return event("Preempted", reclaim().victim_message("v", not_resumed=None), warning=True, name="ob-0-7xk2p")


def test_a_reclaimed_pod_gone_is_told_hiveds_reclaim_and_no_missing_score() -> None:
    (preempted,) = events_from([victims_event()])
    found = preemption_from(victim="team-b/ob-0-7xk2p", preempted=preempted, preemptor_events=(), unread=UNREAD)
    answer = explain_gone(GoneFacts(kind="pod", namespace="team-b", name="ob-0-7xk2p", events=(preempted,), preemption=found))
    assert answer.summary == "deleted: preempted by team-a/g on node gpu-0 (HiveD reclaimed cells of virtual cluster a for it)"
    assert UNREAD not in answer.details, answer.details


def test_its_job_says_who_reclaimed_it() -> None:
    (preempted,) = events_from([victims_event()])
    found = preemption_from(victim="team-b/ob-0-7xk2p", preempted=preempted, preemptor_events=(), unread=UNREAD)
    body = job_json("ob-0")
    body["metadata"]["namespace"] = "team-b"
    answer = explain_job(job_from(body, pods=(a_pod("ob-0-n3w9x", node="gpu-1", phase="Running"),), preemptions=(found,)), CellfitView())
    assert answer.summary.startswith("preempted 1 time, last by team-a/g on node gpu-0 (HiveD reclaimed cells of virtual cluster a for it); now running"), (
        answer.summary
    )


def test_the_nominated_preemptor_is_told_hiveds_reclaim_not_fitgpps() -> None:
    (message,) = reclaim().preemptor_messages()
    waiting = replace(a_pod("g", [event("Preempting", message, name="g")]), nominated_node="gpu-0")
    answer = explain_pod(waiting, CellfitView())
    assert answer.reason == "preempting"
    assert answer.summary == (
        "nominated to node gpu-0, where HiveD reclaimed its virtual cluster's cells from team-b/ob-0-7xk2p for it: it is placed "
        "there once its victims have left (their grace period)"
    )


def test_a_pod_the_leaders_reclaim_deleted_is_told_by_whom_from_its_event() -> None:
    decision = reclaim()
    g = PodInfo(uid="g", namespace="team-a", name="g", requests=Resources(1000, 2**30, 8), priority=100)
    victim = PodInfo(uid="v", namespace="team-b", name="ob-0-7xk2p", requests=Resources(1000, 2**30, 8), priority=100)
    message = victim_message(Reclaim(waiting=g, victim=victim, vc=decision.vc, cell="gpu-0/0", node="gpu-0"))
    kube_scheduler = event("Preempted", "Preempted by pod g on node gpu-0", name="ob-0-7xk2p", at="2026-11-26T12:00:05Z")
    events = events_from([event("Preempted", message, warning=True, name="ob-0-7xk2p"), kube_scheduler])
    preempted = preempted_event(events)
    assert preempted is not None and preempted.message == message  # the reclaim's, over kube-scheduler's
    found = preemption_from(victim="team-b/ob-0-7xk2p", preempted=preempted, preemptor_events=(), unread=UNREAD)
    answer = explain_gone(GoneFacts(kind="pod", namespace="team-b", name="ob-0-7xk2p", events=events, preemption=found))
    assert answer.summary == "deleted: preempted by team-a/g on node gpu-0 (HiveD reclaimed cells of virtual cluster a for it)"
