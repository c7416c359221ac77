"""user26 #1: a guaranteed pod waiting on its virtual cluster's quota, for which kube-scheduler's
own filter turned every node away ("Insufficient nvidia.com/gpu": cellfit's filter, which says
"quota exhausted", was never asked), was told by ``why`` only kube-scheduler's message and the
preempt verb's refusal, which said HiveD found no opportunistic pod on the offered nodes while
they held some. The refusal now names the quota (tests/preemption/test_refusal_quota_under_hived.py),
and ``why`` answers from it as from the filter's words: the quota, its use and who holds it,
read from cellfit's inspect view; the refusal and kube-scheduler's message as details.

The refusal and the view are the real engine's (the scene of the preemption test)."""

from __future__ import annotations

from dataclasses import replace

from scheduler.cells import HivedEngine
from scheduler.kubectl.objects import CellfitView, Event, PodFacts
from scheduler.kubectl.why import explain_pod
from tests.cells.helpers import pod
from tests.preemption.test_refusal_quota_under_hived import scene

GPU = ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
       "2 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.")


def facts() -> tuple[PodFacts, CellfitView, str]:
    engine = scene()
    refusal = engine.decide_preemption(pod("g3", 8, "vc-a"), {"n-3": ["opp1"], "n-4": ["opp2"]}, {}).refusal
    assert refusal is not None
    inner = engine.inner
    assert isinstance(inner, HivedEngine)
    view = CellfitView(virtual_cluster=inner.inspect_virtual_cluster("vc-a"))
    events = (
        Event(reason="FailedScheduling", message=GPU, warning=True, count=3, last_seen="2026-11-29T02:00:00.100000Z"),
        Event(reason="PreemptionRefused", message=f"cellfit preempts no one for this pod: {refusal}", warning=False,
              last_seen="2026-11-29T02:00:00Z"),
    )
    p = PodFacts(namespace="ns", name="g3", phase="Pending", node=None, scheduler_name="cellfit", vc="vc-a", job_class="best-effort", gpus=8,
                 events=events)
    return p, view, refusal


def test_why_names_the_quota_and_its_holders_where_only_the_refusal_said_it() -> None:
    p, view, refusal = facts()
    answer = explain_pod(p, view)
    assert answer.reason == "quota", answer
    assert answer.summary == ("pending: virtual cluster 'vc-a' has used its quota at level 'V100-NODE' "
                              "(2 of 2 'V100-NODE' cells bound, held by ns/g1, ns/g2)"), answer.summary
    assert "found no opportunistic pod" not in answer.summary
    assert any(refusal in line for line in answer.details)
    assert any("Insufficient nvidia.com/gpu" in line for line in answer.details)


def test_a_refusal_a_later_failure_moved_past_is_not_read_as_the_quota() -> None:
    p, view, _ = facts()
    later = Event(reason="FailedScheduling", message="0/4 nodes are available: 4 node(s) had untolerated taint.", warning=True,
                  last_seen="2026-11-29T02:05:00Z")
    answer = explain_pod(replace(p, events=(*p.events, later)), view)
    assert answer.reason == "pending", answer
