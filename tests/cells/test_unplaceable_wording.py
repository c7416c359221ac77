"""HiveD's reasons for a pod it can never place tell the user what to write instead
(scheduler/cells/planning.py, gangs.py). These sentences reach users unchanged: in the
FailedScheduling Event, ``kubectl cellfit why`` and the validating webhook's warning.

Seen by hand on the local control plane (VCs fit, gang and quota; cell types E2E-GPU and
E2E-NODE): a GPU Job without a VC label read "the pod has no cellfit.io/virtual-cluster label"
and a wrong cell type "unknown cell type 'A100-NODE' in annotation cellfit.io/cell-type", neither
saying what the cluster has; a two-pod gang its VC holds once read "can hold at most 1 such pods"."""

from __future__ import annotations

import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.request import parse_request
from scheduler.core.model import PodInfo
from scheduler.kube.names import filter_offered
from tests.cells.helpers import node_names, pod, rack_cluster, schedule


NODES = node_names()


@pytest.fixture
def engine() -> HivedEngine:
    return HivedEngine.from_config(rack_cluster(vcs={"speech": [{"cellType": "V100-NODE", "count": 1}],
                                                     "vision": [{"cellType": "V100-NODE", "count": 2}]}))


def problem(engine: HivedEngine, p: PodInfo) -> str:
    found = engine.request_problem(parse_request(p))
    assert found is not None, p
    return found[1].reason


def test_a_gpu_pod_without_a_vc_is_told_which_vcs_it_may_name(engine: HivedEngine) -> None:
    assert problem(engine, pod("no-vc", 1, vc=None)) == (
        "the pod has no cellfit.io/virtual-cluster label: set it to one of speech, vision")


def test_an_unknown_cell_type_is_told_the_types_a_pod_may_name(engine: HivedEngine) -> None:
    """Types above the node level are left out: a pod may not name them."""
    assert problem(engine, pod("typo", 1, vc="speech", cell_type="A100-NODE")) == (
        "unknown cell type 'A100-NODE' in annotation cellfit.io/cell-type (known: V100, V100-SWITCH, V100-SOCKET, V100-NODE)")


@pytest.mark.parametrize(("size", "said"), [(2, "at most 1 such pod even"), (3, "at most 2 such pods even")])
def test_a_gang_its_vc_can_never_hold_counts_pods_in_good_english(engine: HivedEngine, size: int, said: str) -> None:
    vc = "speech" if size == 2 else "vision"
    decision = filter_offered(engine, pod("g-0", 8, vc=vc, gang=("big", size)), NODES)
    reasons = set(decision.unresolvable.values())
    assert len(reasons) == 1, reasons
    (reason,) = reasons
    assert reason == f"gang ns/big needs {size} pods x 8 GPUs but virtual cluster {vc!r} can hold {said} when idle", reason


def test_a_vc_whose_quota_is_in_use_says_so_without_hived_jargon(engine: HivedEngine) -> None:
    """HiveD's "no unbound cell left" meant nothing to a user: every cell of the VC's quota
    already holds pods or is booked for some, so the pod waits for one of them to leave."""
    assert schedule(engine, pod("holder", 8, vc="speech"), NODES) is not None
    reasons = set(filter_offered(engine, pod("waiter", 8, vc="speech"), NODES).unresolvable.values())
    assert reasons == {"virtual cluster 'speech' quota exhausted at level 'V100-NODE': none of its cells of type 'V100-NODE' "
                       "or larger has 8 free GPUs in one 'V100-NODE', and every cell of its quota is already in use"}, reasons
