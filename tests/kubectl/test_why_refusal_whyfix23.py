"""``kubectl cellfit why``'s preemption-refusal line (whyfix23).

N1: the refusal's PreemptionRefused Event has a lastTimestamp of whole seconds (16:32:08Z), while
the FailedScheduling of the same attempt has an eventTime of microseconds (16:32:08.670317Z): a
FailedScheduling seen once was read as an attempt later than the refusal's, so the refusal was
dropped on the pod's first attempt, until kube-scheduler retried (minutes).

N2: a refusal "cellfit cannot place this pod as written, ..." was always left out, as if the
answer had told the never-placeable reason already; where kube-scheduler's own filters turned
every node away, cellfit's filter was never asked and the answer was only kube-scheduler's
"Insufficient nvidia.com/gpu": the user never learnt that its VC is not served."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView, Event, PodFacts
from scheduler.kubectl.why import explain_pod

REFUSED = ("cellfit preempts no one for this pod: every best-effort pod on the offered nodes (xvc/vcb-be-0) is a guaranteed "
           "pod of another virtual cluster, whose cells it never loses")
MISTAKE = "unknown virtual cluster 'research' (known: a, b)"
NEVER_REFUSED = f"cellfit cannot place this pod as written, so it preempts no one for it: {MISTAKE}"
GPU = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


def event(reason: str, message: str, at: str, count: int = 1) -> Event:
    return Event(reason=reason, message=message, warning=True, count=count, last_seen=f"2026-11-28T{at}Z")


def summary(*events: Event) -> str:
    pod = PodFacts(namespace="ml", name="te-0", phase="Pending", node=None, scheduler_name="cellfit", vc="vc-a",
                   job_class="trial", events=events)
    return explain_pod(pod, CellfitView()).summary


def test_the_refusal_of_the_first_attempt_is_told_beside_its_finer_failed_scheduling() -> None:
    said = summary(event("PreemptionRefused", REFUSED, "16:32:08"), event("FailedScheduling", GPU, "16:32:08.670317"))
    assert said.endswith(f"; {REFUSED}"), said


def test_a_single_failed_scheduling_seconds_after_the_refusal_is_a_later_attempt() -> None:
    said = summary(event("PreemptionRefused", REFUSED, "16:32:08"), event("FailedScheduling", GPU, "16:32:40"))
    assert REFUSED not in said, said


def test_a_never_placeable_refusal_is_told_where_kube_schedulers_filters_turned_every_node_away() -> None:
    said = summary(event("FailedScheduling", GPU, "16:32:08.670317"), event("PreemptionRefused", NEVER_REFUSED, "16:32:08"))
    assert said.startswith("pending: "), said
    assert MISTAKE in said, said


def test_a_never_placeable_refusal_is_not_told_twice() -> None:
    failed = f"0/24 nodes are available: 20 Insufficient nvidia.com/gpu, 4 {MISTAKE}."
    said = summary(event("FailedScheduling", failed, "16:32:08.670317"), event("PreemptionRefused", NEVER_REFUSED, "16:32:08"))
    assert said.startswith("can never be placed as written"), said
    assert said.count(MISTAKE) == 1, said
    assert "preempts no one" not in said, said
