"""user26 #2: a guaranteed pod waiting for its virtual cluster's cells that a pod of the VC
leaving frees was told only "Insufficient nvidia.com/gpu" by ``kubectl cellfit why``:
kube-scheduler's own filter turned every node away (it still counts the leaving pod), and its
dry run found no victim, so neither cellfit's filter nor its preempt verb, which say "HiveD waits
for cell ... which pods leaving free", was asked. ``why`` now reads it from cellfit's state:
the VC's inspect view names, per cell, the GPUs pods leaving free and those pods.

The view is the real engine's (two 8-GPU nodes, vc-a's quota both; vc-a's g1 on n-a is
terminating, vc-b's opportunistic opp fills n-b)."""

from __future__ import annotations

from dataclasses import replace

from scheduler.cells import HivedEngine
from scheduler.kubectl.objects import CellfitView, Event, PodFacts
from scheduler.kubectl.why import explain_pod
from tests.cells.test_no_preemption_while_vc_cells_free import scene, terminating

GPU = ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: "
       "2 No preemption victims found for incoming pod.")
FAILED = Event(reason="FailedScheduling", message=GPU, warning=True, count=2, last_seen="2026-11-29T02:00:00.100000Z")
G2 = PodFacts(namespace="ns", name="g2", phase="Pending", node=None, scheduler_name="cellfit", vc="vc-a",
              job_class="best-effort", gpus=8, events=(FAILED,))


def engine_with_g1_leaving() -> HivedEngine:
    engine, g1, _ = scene()
    engine.apply_pod(terminating(g1))
    return engine


def test_why_says_hived_waits_for_the_cell_the_vcs_leaving_pod_frees() -> None:
    view = CellfitView(virtual_cluster=engine_with_g1_leaving().inspect_virtual_cluster("vc-a"))
    answer = explain_pod(G2, view)
    assert answer.reason == "freeing", answer
    assert answer.summary.startswith(
        "pending: HiveD waits for cell n-a of virtual cluster 'vc-a' on node n-a, which pods leaving free (ns/g1): "
        "no opportunistic pod is preempted for this pod while its virtual cluster's own cells are being freed"), answer.summary
    assert answer.summary.endswith("kube-scheduler's last attempt: Insufficient nvidia.com/gpu"), answer.summary
    assert any("Insufficient nvidia.com/gpu" in line for line in answer.details)


def test_once_the_leaving_pod_is_gone_why_says_kube_schedulers_message_alone() -> None:
    engine = engine_with_g1_leaving()
    engine.delete_pod("g1")
    answer = explain_pod(G2, CellfitView(virtual_cluster=engine.inspect_virtual_cluster("vc-a")))
    assert answer.reason == "pending", answer
    assert "HiveD waits" not in answer.summary


def test_a_pod_the_freed_cell_cannot_hold_or_an_opportunistic_pod_is_not_told_so() -> None:
    view = CellfitView(virtual_cluster=engine_with_g1_leaving().inspect_virtual_cluster("vc-a"))
    assert explain_pod(replace(G2, gpus=16), view).reason != "freeing"
    assert explain_pod(replace(G2, priority="opportunistic"), view).reason != "freeing"
    assert explain_pod(replace(G2, vc="vc-b"), view).reason != "freeing"


def test_a_pod_with_cells_booked_is_not_told_it_waits_for_a_cell_being_freed() -> None:
    vc = engine_with_g1_leaving().inspect_virtual_cluster("vc-a")
    assert vc is not None
    booked = {**vc, "placements": [*vc["placements"], {"pod": "ns/g2", "vc": "vc-a", "priority": "guaranteed", "node": "n-b"}]}
    assert explain_pod(G2, CellfitView(virtual_cluster=booked)).reason != "freeing"
