"""FitGpp under HiveD takes an opportunistic victim only where freeing it can add to a cell its
guaranteed preemptor could get (``HivedEngine.preemption_helps``, review23b): one of the
request's level (a target: chain and level), inside the VC's cells or in free space the VC may
still bind at that level or above. Before, an opportunistic pod on free cells helped whenever
the VC could bind a cell *anywhere* in its chains, and one on a VC's cell whenever any cell
around it was the VC's:

* an opportunistic pod on a free A100 node helped a pod of a VC owning V100 nodes only, and
  with its own V100 node cordoned (or held at the preemptor's priority) kube-scheduler offered
  the node of vc-a's best-effort pod and the A100 node: FitGpp preempted the A100 pod (eq. 4,
  the shorter grace period) and the trial pod stayed Pending;
* an opportunistic pod in vc-a's 2-GPU switch cell helped an 8-GPU request, which that cell
  can never hold, vc-a's node quota being used; so did one in a free switch of a node split
  for another VC, which vc-a can never bind as a node.

On FitGppEngine around the real HivedEngine (production's composition)."""

from __future__ import annotations

import copy
from typing import Callable

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.model import JobInfo, PodInfo
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import V100_TYPES, node, schedule
from tests.preemption.test_hived_fitgpp_candidates import job_pod

V100, A100 = ["n-a", "n-b"], ["n-c"]


def engine(vcs: dict[str, object], *, a100: bool = True) -> FitGppEngine:
    types = copy.deepcopy(V100_TYPES)
    cells = [{"cellType": "V100-NODE", "nodeName": name} for name in V100]
    if a100:
        types["A100-NODE"] = {"childType": "A100", "childCount": 8, "isNodeLevel": True}
        cells += [{"cellType": "A100-NODE", "nodeName": name} for name in A100]
    made = FitGppEngine(HivedEngine.from_config({"topology": {"cellTypes": types, "physicalCells": cells},
                                                 "virtualClusters": vcs}), settings=FitGppSettings())
    for cell in cells:
        made.apply_node(node(str(cell["nodeName"])))
    return made


def cross_chain() -> FitGppEngine:
    """vc-a owns 2 V100 nodes, vc-b 1 A100 node."""
    return engine({"vc-a": [{"cellType": "V100-NODE", "count": 2}], "vc-b": [{"cellType": "A100-NODE", "count": 1}]})


def opportunistic(uid: str, gpus: int, vc: str, job: str, *, grace: int = 1) -> PodInfo:
    made = job_pod(uid, gpus, vc, job, "best-effort", grace=grace)
    return msgspec.structs.replace(made, labels={**made.labels, "cellfit.io/priority": "opportunistic"})


def place(made: FitGppEngine, p: PodInfo, nodes: list[str]) -> str:
    """Bind ``p`` where HiveD places it among ``nodes``, keeping its priority and grace period."""
    assert p.owner is not None
    made.apply_job(JobInfo(uid=p.owner.uid, namespace="ns", name=p.owner.name))
    placed = schedule(made, p, nodes)  # type: ignore[arg-type]
    assert placed is not None and placed.node_name is not None, p.uid
    made.apply_pod(msgspec.structs.replace(placed, priority=p.priority, grace_period_seconds=p.grace_period_seconds))
    return placed.node_name


def trial(made: FitGppEngine, uid: str = "te-x-0", gpus: int = 8) -> PodInfo:
    te_x = job_pod(uid, gpus, "vc-a", uid.rsplit("-", 1)[0], "trial")
    assert te_x.owner is not None
    made.apply_job(JobInfo(uid=te_x.owner.uid, namespace="ns", name=te_x.owner.name))
    made.apply_pod(te_x)
    return te_x


def helps(made: FitGppEngine, preemptor: PodInfo) -> Callable[[str], bool]:
    hived = made.inner
    assert isinstance(hived, HivedEngine)
    judge = hived.preemption_helps(preemptor)
    assert judge is not None

    def of(uid: str) -> bool:
        victim = made.victim(uid)
        assert victim is not None
        return judge(victim)

    return of


def test_an_opportunistic_pod_on_a_chain_the_vc_owns_no_cell_of_does_not_help() -> None:
    made = cross_chain()
    assert place(made, job_pod("be-p-0", 8, "vc-a", "be-p", "best-effort", grace=600), V100) in V100
    assert place(made, opportunistic("opp-0", 8, "vc-b", "opp"), A100) == "n-c"  # vc-b's quota unbound
    assert place(made, opportunistic("opp-2", 8, "vc-b", "opp2"), V100) in V100  # the other V100 node, free
    judge = helps(made, trial(made))
    assert not judge("opp-0")  # vc-a may still bind a V100 node, never an A100 one
    assert judge("opp-2") and judge("be-p-0")


def test_offered_only_the_a100_node_fitgpp_preempts_no_one() -> None:
    made = cross_chain()
    place(made, job_pod("be-p-0", 8, "vc-a", "be-p", "best-effort", grace=600), V100)
    place(made, opportunistic("opp-1", 8, "vc-b", "opp1", grace=600), V100)
    place(made, opportunistic("opp-0", 8, "vc-b", "opp"), A100)
    choice = made.decide_preemption(trial(made), {"n-c": []}, {})
    assert choice.victims == {}
    assert choice.refusal == ("every best-effort pod on the offered nodes (ns/opp-0) is an opportunistic pod on cells this "
                              "pod's virtual cluster can neither use nor bind")


def _offered_n_a_and_n_c(hold_n_b: Callable[[FitGppEngine], object]) -> dict[str, list[str]]:
    """vc-a's be-p fills n-a, vc-b's opportunistic opp-0 (a shorter grace period: eq. 4's pick)
    the A100 node n-c, and ``hold_n_b`` keeps vc-a's other V100 node from te-x: kube-scheduler's
    own filters fail every node, so its dry run offers the nodes where removing lower-priority
    pods frees 8 GPUs, n-a and n-c."""
    made = cross_chain()
    place(made, job_pod("be-p-0", 8, "vc-a", "be-p", "best-effort", grace=600), ["n-a"])
    place(made, opportunistic("opp-0", 8, "vc-b", "opp"), A100)
    hold_n_b(made)
    return made.decide_preemption(trial(made), {"n-a": [], "n-c": []}, {}).victims


def test_with_vc_as_free_node_cordoned_fitgpp_preempts_its_best_effort_pod_not_the_a100_one() -> None:
    assert _offered_n_a_and_n_c(lambda made: made.apply_node(node("n-b", unschedulable=True))) == {"n-a": ["be-p-0"]}


def test_with_vc_as_free_node_held_at_trial_priority_fitgpp_preempts_its_best_effort_pod() -> None:
    held = msgspec.structs.replace(opportunistic("opp-1", 8, "vc-b", "opp1", grace=600), priority=100)
    assert _offered_n_a_and_n_c(lambda made: place(made, held, ["n-b"])) == {"n-a": ["be-p-0"]}


def test_an_opportunistic_pod_in_the_vcs_cell_smaller_than_the_request_does_not_help() -> None:
    """vc-a owns a V100 node (its be-p's) and a 2-GPU V100 switch, bound by its 1-GPU pod g."""
    made = engine({"vc-a": [{"cellType": "V100-NODE", "count": 1}, {"cellType": "V100-SWITCH", "count": 1}]}, a100=False)
    n_be = place(made, job_pod("be-p-0", 8, "vc-a", "be-p", "best-effort", grace=600), V100)
    other = [name for name in V100 if name != n_be]
    place(made, job_pod("g-0", 1, "vc-a", "g", "trial"), other)
    place(made, opportunistic("opp-0", 1, "vc-a", "opp"), other)  # beside g, in vc-a's switch
    place(made, opportunistic("opp-1", 2, "vc-a", "opp1"), other)  # a free switch of the split node
    hived = made.inner
    assert isinstance(hived, HivedEngine)
    switch = hived.allocator.by_pod["opp-0"].gpus[0].parent
    assert switch is not None and switch.vc == "vc-a" and switch.cell_type == "V100-SWITCH"
    judge = helps(made, trial(made))
    assert not judge("opp-0")  # a switch never holds 8 GPUs, and vc-a's node quota is be-p's
    assert not judge("opp-1")  # vc-a may bind no node; the free switch is not one
    assert judge("be-p-0")
    small = helps(made, trial(made, "te-s-0", 1))
    assert small("opp-0")  # a 1-GPU pod fits in vc-a's switch


def test_a_free_switch_of_a_node_split_for_another_vc_does_not_help_a_node_sized_request() -> None:
    """vc-a may still bind a V100 node, but not the one vc-b's switch splits."""
    made = engine({"vc-a": [{"cellType": "V100-NODE", "count": 1}], "vc-b": [{"cellType": "V100-SWITCH", "count": 1}]},
                  a100=False)
    n_g = place(made, job_pod("g-0", 1, "vc-b", "g", "trial"), ["n-a"])
    place(made, opportunistic("opp-0", 2, "vc-b", "opp"), [n_g])  # a free switch of n-a
    place(made, opportunistic("opp-1", 8, "vc-b", "opp1"), ["n-b"])  # the free node
    judge = helps(made, trial(made))
    assert not judge("opp-0")
    assert judge("opp-1")
