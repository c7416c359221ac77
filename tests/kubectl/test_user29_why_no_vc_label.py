"""``kubectl cellfit why`` of a pod without a ``cellfit.io/virtual-cluster`` label where the
cluster's VCs are named (no ``default``). Seen live (user29): "the pod has no
cellfit.io/virtual-cluster label: set it to one of team-a, team-b (...); and label
cellfit.io/virtual-cluster: unknown virtual cluster 'default' (...)": a label it does not have,
said to name a VC it never named (the implicit one). Now the filter's reason stands alone."""

from __future__ import annotations

from scheduler.cells import HivedEngine
from scheduler.kube.names import filter_offered
from scheduler.kubectl.objects import CellfitView, events_from, pod_from
from scheduler.kubectl.why import explain_pod
from tests.cells.helpers import node_names, pod as engine_pod, rack_cluster
from tests.kubectl.test_why_never_placeable import VCS, failed_scheduling

UNLABELLED = {"metadata": {"name": "train-0", "namespace": "ml", "uid": "uid-train-0", "labels": {},
                            "ownerReferences": [{"kind": "Job", "name": "train", "uid": "uid-train"}]},
              "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}}


def test_no_label_is_not_also_told_as_an_unknown_default_vc() -> None:
    engine = HivedEngine.from_config(rack_cluster(vcs=VCS))
    (reason,) = set(filter_offered(engine, engine_pod("train-0", 1, vc=None), node_names()[:1]).unresolvable.values())
    assert "has no cellfit.io/virtual-cluster label" in str(reason)  # cellfit's own words, not a guess
    event = failed_scheduling({str(reason): 1, "Insufficient nvidia.com/gpu": 3})
    # cellfit's inspect API, asked for the implicit VC of the unlabelled pod, knows none of that name.
    view = CellfitView(unavailable={"virtual-cluster": "cellfit does not serve /v1/inspect/virtual-clusters/default here: "
                                                       "no virtual cluster named 'default'"})
    answer = explain_pod(pod_from(UNLABELLED, events=events_from([event])), view)
    assert answer.summary == (f"can never be placed as written: {reason} (set label cellfit.io/virtual-cluster in the Job's pod "
                              "template); the other nodes: 3 Insufficient nvidia.com/gpu"), answer.summary
