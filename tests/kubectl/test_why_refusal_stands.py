"""``kubectl cellfit why`` of a pending pod adds cellfit's last refusal to preempt for it (its
PreemptionRefused Event, 695c093) only while that refusal stands: it appended the last one
whatever came after it, so a pod refused at 05:00, preempted for at 05:10 and failing for
another reason at 05:20 was still told the refusal (review23). The preempt verb writes a refusal
once per pod and reason, not on each retry, so a refusal older than the latest FailedScheduling
of the same failure still stands; a later Preempting or Nominated Event, or a failure to schedule
other than the one it came with, ends it."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView, Event, PodFacts
from scheduler.kubectl.why import explain_pod

REFUSED = ("cellfit preempts no one for this pod: every best-effort pod on the offered nodes (xvc/vcb-be-0) is a guaranteed "
           "pod of another virtual cluster, whose cells it never loses")
GPU = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
QUOTA = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."


def refused(at: str) -> Event:
    return Event(reason="PreemptionRefused", message=REFUSED, warning=True, last_seen=f"2026-11-28T{at}Z")


def failed(message: str, at: str, count: int = 1) -> Event:
    return Event(reason="FailedScheduling", message=message, warning=True, count=count, last_seen=f"2026-11-28T{at}Z")


def preempting(at: str) -> Event:
    return Event(reason="Preempting", message="preempted ml/be-1 on node n2 for this pod (FitGpp score 1)", warning=False,
                 last_seen=f"2026-11-28T{at}Z")


def told(*events: Event) -> bool:
    pod = PodFacts(namespace="ml", name="te-0", phase="Pending", node=None, scheduler_name="cellfit", vc="vc-a",
                   job_class="trial", events=events)
    answer = explain_pod(pod, CellfitView())
    assert answer.summary.startswith("pending: "), answer.summary
    return REFUSED in answer.summary


def test_a_refusal_followed_by_a_preemption_and_another_failure_is_not_told() -> None:
    assert not told(refused("05:00:00"), preempting("05:10:00"), failed(GPU, "05:20:00"))


def test_a_refusal_followed_by_a_preemption_is_not_told_whatever_the_failure() -> None:
    assert not told(failed(GPU, "05:00:00", count=4), refused("05:00:01"), preempting("05:10:00"), failed(GPU, "05:20:00", count=5))
    nominated = Event(reason="Nominated", message="nominated to node n2", warning=False, last_seen="2026-11-28T05:10:00Z")
    assert not told(failed(GPU, "05:00:00"), refused("05:00:01"), nominated, failed(GPU, "05:20:00", count=3))


def test_a_refusal_told_once_stands_while_the_pod_fails_alike() -> None:
    # the verb refuses again on each retry without a new Event: the FailedScheduling's series moves on
    assert told(refused("05:00:01"), failed(GPU, "05:20:00", count=12))
    assert told(failed(QUOTA, "04:50:00"), refused("05:00:01"), failed(GPU, "05:20:00", count=12))


def test_a_refusal_the_pod_failed_otherwise_since_is_not_told() -> None:
    # the attempt it came with failed for one reason, the latest for another
    assert not told(refused("05:00:00"), failed(QUOTA, "05:00:01", count=2), failed(GPU, "05:20:00", count=3))
    # one attempt after the refusal, whose FailedScheduling is the only one left
    assert not told(refused("05:00:00"), failed(GPU, "05:20:00"))


def test_a_refusal_after_a_preemption_is_told() -> None:
    assert told(preempting("04:50:00"), failed(GPU, "05:00:00", count=2), refused("05:00:01"))
    assert told(failed(GPU, "05:00:00"), refused("05:00:01"))  # the Events of one attempt
