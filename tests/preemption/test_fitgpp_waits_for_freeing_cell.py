"""While a cell of the pod's VC is being freed by pods leaving, FitGpp chooses no victim at all for
it, the VC's own best-effort pods included, and answers HiveD's wait (review24 F5 of 35d5540:
HiveD named no opportunistic victim then, and FitGpp's own choice suspended the VC's own
best-effort g2 instead, while n-a was a moment from free).

Three 8-GPU nodes; vc-a's quota is all three. vc-a's g1 (8 GPUs) fills n-a and is terminating
(deleted by its user); vc-a's best-effort g2 (8 GPUs) fills n-c; vc-b's opportunistic opp fills
n-b. vc-a's trial pod te (4 GPUs) arrives; kube-scheduler's preemption offers n-b (opp) and n-c
(g2)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import V100_TYPES, node, pod, schedule

NODES = ["n-a", "n-b", "n-c"]
BE, TRIAL, OPP = 10, 100, 5


def config() -> dict[str, Any]:
    return {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in NODES]},
        "virtualClusters": {"vc-a": [{"cellType": "V100-NODE", "count": 3}], "vc-b": []},
    }


def ours(p: PodInfo, *, priority: int, job_class: str) -> PodInfo:
    return msgspec.structs.replace(p, priority=priority, scheduler_name="cellfit", labels={**p.labels, "cellfit.io/job-class": job_class},
                                   owner=OwnerRef(kind="Job", name=f"job-{p.name}", uid=f"uid-job-{p.name}"))


def run(engine: FitGppEngine, p: PodInfo, where: str) -> PodInfo:
    placed = schedule(engine, p, [where])  # type: ignore[arg-type]
    assert placed is not None and placed.node_name == where, p.uid
    placed = msgspec.structs.replace(placed, phase="Running")
    engine.apply_pod(placed)
    return placed


def scene() -> tuple[FitGppEngine, PodInfo]:
    engine = FitGppEngine(HivedEngine.from_config(config()), settings=FitGppSettings())
    for name in NODES:
        engine.apply_node(node(name))
    g1 = run(engine, ours(pod("g1", 8, "vc-a"), priority=BE, job_class="best-effort"), "n-a")
    run(engine, ours(pod("g2", 8, "vc-a"), priority=BE, job_class="best-effort"), "n-c")
    run(engine, ours(pod("opp", 8, "vc-b", priority="opportunistic"), priority=OPP, job_class="best-effort"), "n-b")
    engine.apply_pod(msgspec.structs.replace(g1, terminating=True))  # its user deleted it: n-a is being freed
    te = ours(pod("te", 4, "vc-a"), priority=TRIAL, job_class="trial")
    engine.apply_pod(te)
    return engine, te


def test_no_own_best_effort_pod_is_preempted_while_the_vcs_cell_is_being_freed() -> None:
    engine, te = scene()
    assert filter_offered(engine, te, NODES).feasible == []
    choice = engine.decide_preemption(te, {"n-b": ["opp"], "n-c": ["g2"]}, {})
    assert choice.victims == {}, (choice.rule, choice.victims)
    assert choice.refusal is not None and choice.refusal.startswith("HiveD waits for cell n-a/"), choice.refusal
