"""The preempt verb's refusal says HiveD's wait for its VC's cells being freed (35d5540).

When kube-scheduler's own filters turn every node away (the node a pod of the VC still holds
while it terminates is full for them too), cellfit's filter is never asked, and the preempt
verb's refusal is all the pod's user reads of why nothing is preempted. HiveD names no victim
while the VC's own cells are being freed, and FitGpp then refused with words of its own that do
not hold: "a best-effort pod never preempts others" for a guaranteed pod of no job class, or,
for a trial pod, that the opportunistic pod on the offered node is on cells its VC "can neither
use nor bind" (they are its VC's to bind). Now the refusal is the filter's sentence.

FitGppEngine around the real HivedEngine: two 8-GPU nodes, vc-a's quota both; vc-a's g1 fills n-a
and terminates, vc-b's opportunistic opp fills n-b."""

from __future__ import annotations

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node, pod, schedule
from tests.cells.test_no_preemption_while_vc_cells_free import NODES, config

WAITS = (
    "HiveD waits for cell n-a of virtual cluster 'vc-a' on node n-a, which pods leaving free (ns/g1): no opportunistic "
    "pod is preempted for this pod while its virtual cluster's own cells are being freed"
)


def scene() -> FitGppEngine:
    engine = FitGppEngine(HivedEngine.from_config(config()), settings=FitGppSettings())
    for name in NODES:
        engine.apply_node(node(name))
    running = []
    for p, where in ((pod("g1", 8, "vc-a"), "n-a"), (pod("opp", 8, "vc-b", priority="opportunistic"), "n-b")):
        placed = schedule(engine, p, [where])  # type: ignore[arg-type]
        assert placed is not None
        running.append(msgspec.structs.replace(placed, phase="Running"))
        engine.apply_pod(running[-1])
    engine.apply_pod(msgspec.structs.replace(running[0], terminating=True))
    return engine


def trial(p: PodInfo) -> PodInfo:
    return msgspec.structs.replace(p, labels={**p.labels, "cellfit.io/job-class": "trial"})


def test_a_guaranteed_pod_of_no_job_class_is_told_it_waits_for_its_vcs_cells() -> None:
    choice = scene().decide_preemption(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {})
    assert choice.victims == {}
    assert choice.refusal == WAITS


def test_a_trial_pod_is_told_it_waits_not_that_the_cells_are_of_no_use() -> None:
    choice = scene().decide_preemption(trial(pod("g2", 8, "vc-a")), {"n-b": ["opp"]}, {})
    assert choice.victims == {}
    assert choice.refusal == WAITS


def test_with_nothing_of_the_vc_leaving_fitgpps_own_refusal_stands() -> None:
    engine = scene()
    engine.delete_pod("g1")
    g2 = pod("g2", 4, "vc-b", priority="opportunistic")  # an opportunistic pod: HiveD reclaims nothing for it
    choice = engine.decide_preemption(g2, {"n-b": ["opp"]}, {})
    assert choice.refusal == "a best-effort pod never preempts others (FitGpp)"
