"""``kubectl cellfit why`` of a pod FitGpp preempted a whole gang for (fbceb94): its Preempting
Event names the gang, not a pod ("preempting the gang ml-a/gang-bert (2 pods, 16 GPUs) on node
gpu-2 and its pods on node gpu-3, which cellfit deletes itself (score ...)"), which the parser
read as no preemption, so the answer fell back to kube-scheduler's nomination alone. The
wording's pieces are pinned against FitGpp's source by test_why.py."""

from __future__ import annotations

from scheduler.kubectl.objects import PREEMPTING, events_from, pod_from
from scheduler.kubectl.objects import CellfitView
from scheduler.kubectl.why import explain_pod
from tests.kubectl.test_why import event

GANG = ("preempting the gang ml-a/gang-bert (2 pods, 16 GPUs) on node gpu-2 and its pods on node gpu-3, which cellfit "
        "deletes itself (score 6.00 = size 2.00 + 4.0 x grace 1.00: the gang's share of the node)")


def test_the_gang_preempting_message_is_read() -> None:
    found = PREEMPTING.match(GANG)
    assert found is not None
    assert (found["victim"], found["node"]) == ("the gang ml-a/gang-bert (2 pods, 16 GPUs)", "gpu-2")
    assert found["why"] == "score 6.00 = size 2.00 + 4.0 x grace 1.00: the gang's share of the node"
    single = PREEMPTING.match("preempting ml-a/be-1-x on node gpu-0 (score 0.63 = size 0.50 + 4.0 x grace 0.03)")
    assert single is not None and (single["victim"], single["node"]) == ("ml-a/be-1-x", "gpu-0")


def test_the_preemptor_is_told_fitgpp_preempted_the_gang_for_it() -> None:
    body = {"metadata": {"name": "te-q", "namespace": "ml-a", "uid": "u-te-q", "labels": {"cellfit.io/virtual-cluster": "team-a"}},
            "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending", "nominatedNodeName": "gpu-2"}}
    pod = pod_from(body, events=events_from([event("Preempting", GANG, name="te-q")]))
    answer = explain_pod(pod, CellfitView())
    assert answer.reason == "preempting", answer
    assert answer.summary.startswith("nominated to node gpu-2, where FitGpp preempted the gang ml-a/gang-bert (2 pods, 16 GPUs) "
                                     "for it"), answer
