"""FitGpp's candidates leave out guaranteed pods of another VC before it chooses
(FitGppEngine._claimable), from the VC each tracked pod holds as its own, kept pod by pod as the
watch shows it: without another VC's pod held anywhere, the per-row check is skipped. A pod
relabelled to another VC (its metadata labels may change while it runs) moves with its label,
both ways, and a pod gone leaves no VC behind."""

from __future__ import annotations

import msgspec

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine

GI = 2**30


def be(vc: str) -> PodInfo:
    return PodInfo(uid="be-0", namespace="ml", name="be-0", requests=Resources(1000, GI, 8), node_name="n1", phase="Running",
                   labels={"cellfit.io/job-class": "best-effort", "cellfit.io/virtual-cluster": vc},
                   owner=OwnerRef("Job", "be", "job-be"))


def trial(uid: str, vc: str) -> PodInfo:
    return PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(1000, GI, 8),
                   labels={"cellfit.io/job-class": "trial", "cellfit.io/virtual-cluster": vc})


def engine() -> FitGppEngine:
    made = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=None))
    made.apply_node(NodeInfo(name="n1", allocatable=Resources(32000, 256 * GI, 8)))
    return made


def test_a_pod_relabelled_into_the_preemptors_vc_may_be_taken() -> None:
    made = engine()
    made.apply_pod(be("speech"))
    assert made.select_victims(trial("te-1", "vision"), {"n1": []}, {}) == {}
    made.apply_pod(be("vision"))
    assert made.select_victims(trial("te-2", "vision"), {"n1": []}, {}) == {"n1": ["be-0"]}


def test_a_pod_relabelled_out_of_the_preemptors_vc_is_no_longer_taken() -> None:
    made = engine()
    made.apply_pod(be("vision"))
    made.apply_pod(be("speech"))
    choice = made.decide_preemption(trial("te-1", "vision"), {"n1": []}, {})
    assert choice.victims == {} and choice.refusal is not None and "ml/be-0" in choice.refusal


def test_a_pod_gone_leaves_no_vc_behind() -> None:
    made = engine()
    made.apply_pod(be("speech"))
    made.delete_pod("be-0")
    made.apply_pod(msgspec.structs.replace(be("vision"), uid="be-1", name="be-1"))
    assert made.select_victims(trial("te-1", "vision"), {"n1": []}, {}) == {"n1": ["be-1"]}
    assert made._holding_vcs == {"vision": 1}
