"""Under HiveD a guaranteed trial pod gets GPUs only in its VC's cells: FitGpp took an
opportunistic pod on another VC's idle cells as its victim (eq. 4: it freed 8 GPUs alone, the
cheapest), preempted it, and the trial pod stayed Pending, its VC's quota still held by its own
best-effort pods; the victim was preempted for nothing (found beside the live session's H1). Now
the placement engine says which victims can free room it would give the preemptor
(``HivedEngine.preemption_helps``): pods of its VC, opportunistic pods on its VC's cells, and
opportunistic pods on free cells while its VC may still bind one.

On FitGppEngine around the real HivedEngine: vc-a and vc-b own one 8-GPU node cell each."""

from __future__ import annotations

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from scheduler.kube.names import filter_offered
from tests.preemption.test_hived_fitgpp_candidates import NODES, engine, job_pod, run


def opportunistic(uid: str, gpus: int, vc: str, job: str, *, grace: int = 1) -> PodInfo:
    made = job_pod(uid, gpus, vc, job, "best-effort", grace=grace)
    return msgspec.structs.replace(made, labels={**made.labels, "cellfit.io/priority": "opportunistic"})


def test_an_opportunistic_pod_on_cells_its_vc_cannot_bind_is_no_victim() -> None:
    made = engine()
    where = run(made, opportunistic("opp-0", 8, "vc-b", "opp"),
                job_pod("be-p-0", 4, "vc-a", "be-p", "best-effort", grace=600),
                job_pod("be-p-1", 4, "vc-a", "be-p", "best-effort", grace=600))
    assert where["opp-0"] != where["be-p-0"]
    te_x = job_pod("te-x-0", 8, "vc-a", "te-x", "trial")
    made.apply_pod(te_x)
    choice = made.decide_preemption(te_x, {name: [] for name in NODES}, {})
    assert (choice.rule, sorted(choice.victim_uids)) == ("fallback", ["be-p-0", "be-p-1"])
    refused = made.decide_preemption(job_pod("te-y-0", 8, "vc-a", "te-y", "trial"), {where["opp-0"]: []}, {})
    assert refused.victims == {}
    assert refused.refusal == ("every best-effort pod on the offered nodes (ns/opp-0) is an opportunistic pod on cells this "
                               "pod's virtual cluster can neither use nor bind")


def test_an_opportunistic_pod_on_its_vcs_own_cell_is_a_victim() -> None:
    made = engine()
    run(made, job_pod("vcb-be-0", 8, "vc-b", "vcb-be", "best-effort"), job_pod("be-p-0", 4, "vc-a", "be-p", "best-effort"))
    where = run(made, opportunistic("opp-0", 4, "vc-b", "opp"))  # the only idle GPUs: vc-a's cell
    te_x = job_pod("te-x-0", 8, "vc-a", "te-x", "trial")
    made.apply_pod(te_x)
    assert filter_offered(made, te_x, NODES).feasible == []
    choice = made.decide_preemption(te_x, {name: [] for name in NODES}, {})
    assert choice.refusal is None and sorted(choice.victim_uids) == ["be-p-0", "opp-0"]
    assert list(choice.victims) == [where["opp-0"]]


def test_while_its_vc_may_still_bind_a_cell_an_opportunistic_pod_on_free_cells_helps() -> None:
    made = engine()
    run(made, opportunistic("opp-0", 8, "vc-b", "opp"))
    hived = made.inner
    assert isinstance(hived, HivedEngine)
    opp = made.victim("opp-0")
    assert opp is not None
    te_x = job_pod("te-x-0", 8, "vc-a", "te-x", "trial")
    helps = hived.preemption_helps(te_x)
    assert helps is not None and helps(opp)  # vc-a's quota is unbound: the free cell may become its
    run(made, job_pod("be-p-0", 8, "vc-a", "be-p", "best-effort"))
    helps = hived.preemption_helps(te_x)
    be_p = made.victim("be-p-0")
    assert helps is not None and be_p is not None and helps(be_p) and not helps(opp)
    assert hived.preemption_helps(opportunistic("te-o", 8, "vc-a", "te-o")) is None  # takes idle GPUs anywhere
