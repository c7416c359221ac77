"""``kubectl cellfit why`` reads where and why a pod was preempted from the victim's own
``Preempted`` Event (scheduler/kubectl/objects.py), which FitGpp writes with the node and its
score (scheduler/preemption/fitgpp.py): the user of a best-effort Job that another tenant's
trial pod preempted may not read that tenant's events, where the ``Preempting`` Event is."""

from __future__ import annotations

from typing import Any, Mapping

from scheduler.kubectl.objects import CellfitView, events_from, job_from, preemption_from
from scheduler.kubectl.why import explain_job
from scheduler.preemption.fitgpp import PreemptionDecision, VictimScore
from scheduler.preemption.model import FitGppSettings

UNREAD = "its score is in the events of namespace team-b, which you may not read"
BREAKDOWN = ("score 0.31 = size 0.12 + 4.0 x grace 0.05: its share of its node's CPU, memory and GPUs is 12% of the largest "
             "best-effort pod's, and its grace period to checkpoint, 30 s, is 5% of the longest, 10 min")


def victim(uid: str, *, score: float) -> VictimScore:
    return VictimScore(uid=uid, key=f"ml/{uid}", node="gpu-7", size=4.0, size_term=0.12, grace_period_seconds=30.0,
                       grace_term=0.05, score=score, preemptions=0, largest_size=33.3, longest_grace_seconds=600.0)


def decision(*victims: VictimScore, rule: Any) -> PreemptionDecision:
    return PreemptionDecision(preemptor_uid="te-uid", preemptor_key="team-b/trial-0", node="gpu-7", victims=victims, rule=rule,
                              settings=FitGppSettings())


def preempted(message: str) -> Any:
    item: Mapping[str, Any] = {"reason": "Preempted", "message": message, "type": "Warning", "count": 1,
                               "lastTimestamp": "2026-11-28T05:20:06Z", "involvedObject": {"kind": "Pod", "name": "be-x2k9q"},
                               "metadata": {"creationTimestamp": "2026-11-28T05:20:06Z"}}
    (event,) = events_from([item])
    return event


def test_the_victims_own_event_gives_node_and_score_when_the_preemptors_events_are_unreadable() -> None:
    said = decision(victim("be-x2k9q", score=0.31), rule="fitgpp").victim_message()
    found = preemption_from(victim="ml/be-x2k9q", preempted=preempted(said), preemptor_events=(), unread=UNREAD)
    assert (found.by, found.node, found.breakdown, found.unread) == ("team-b/trial-0", "gpu-7", BREAKDOWN, "")
    job = job_from({"metadata": {"name": "be", "namespace": "ml", "uid": "job-uid", "annotations": {"cellfit.io/preemptions": "1"}},
                    "spec": {}, "status": {}}, preemptions=(found,))
    answer = explain_job(job, CellfitView())
    assert answer.summary.startswith(f"preempted 1 time, last by team-b/trial-0 on node gpu-7 ({BREAKDOWN}); "), answer


def test_the_fallbacks_event_gives_the_node_and_still_says_the_score_is_unread() -> None:
    said = decision(victim("be-a", score=0.4), victim("be-b", score=0.5), rule="fallback").victim_message()
    found = preemption_from(victim="ml/be-a", preempted=preempted(said), preemptor_events=(), unread=UNREAD)
    assert (found.by, found.node, found.breakdown, found.unread) == ("team-b/trial-0", "gpu-7", None, UNREAD)


def test_an_older_cellfits_event_says_only_by_whom() -> None:
    found = preemption_from(victim="ml/be-x2k9q", preempted=preempted("preempted by team-b/trial-0"), preemptor_events=(), unread=UNREAD)
    assert (found.by, found.node, found.breakdown, found.unread) == ("team-b/trial-0", None, None, UNREAD)
