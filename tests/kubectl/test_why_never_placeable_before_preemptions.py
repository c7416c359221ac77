"""``kubectl cellfit why job/NAME``: a pod cellfit can never place as written comes first (README,
the ``why`` row), before the Job's earlier preemptions, which follow as facts. A Job FitGpp
preempted once, whose next pod names a virtual cluster cellfit no longer knows, read "preempted
1 time, last by ...; now pod train-0: can never be placed as written: ..." as if the preemption
were what it waits on; no wait ends it until its user changes the label."""

from __future__ import annotations

import json

from scheduler.kubectl.objects import CellfitView, Preemption, events_from, job_from, pod_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why_never_placeable import TRAIN_0, UNKNOWN_VC_EVENT

NEVER = (
    "can never be placed as written: unknown virtual cluster 'research' (known: a, b) (set label "
    "cellfit.io/virtual-cluster to a virtual cluster it may use, one of those known); the other nodes: 20 Insufficient "
    "nvidia.com/gpu"
)


def test_a_preempted_jobs_never_placeable_pod_is_its_answer_and_the_preemption_a_fact() -> None:
    pod = pod_from(json.loads(json.dumps(TRAIN_0)), events=events_from([UNKNOWN_VC_EVENT]))
    earlier = Preemption(victim="ml/train-abcde", by="ml/te-1", node="gpu-2", when="2026-11-28T08:30:00Z")
    job = job_from(
        {
            "metadata": {"name": "train", "namespace": "ml", "uid": "uid-train", "annotations": {"cellfit.io/preemptions": "1"}},
            "spec": {"suspend": False},
            "status": {},
        },
        pods=(pod,),
        preemptions=(earlier,),
    )
    answer = explain_job(job, CellfitView())
    assert (answer.reason, answer.summary) == ("never-placeable", f"pod train-0: {NEVER}"), answer
    assert "preempted 1 time, last by ml/te-1 on node gpu-2" in answer.details, answer
    assert "ml/train-abcde preempted by ml/te-1 on node gpu-2 at 2026-11-28T08:30:00Z" in answer.details, answer


def test_a_job_allox_put_on_cpus_whose_pod_is_never_placeable_says_that_first() -> None:
    pod = pod_from(json.loads(json.dumps(TRAIN_0)), events=events_from([UNKNOWN_VC_EVENT]))
    job = job_from(
        {
            "metadata": {"name": "train", "namespace": "ml", "uid": "uid-train", "annotations": {"cellfit.io/placement": "cpu"}},
            "spec": {"suspend": False},
            "status": {},
        },
        pods=(pod,),
    )
    answer = explain_job(job, CellfitView())
    assert (answer.reason, answer.summary) == ("never-placeable", f"pod train-0: {NEVER}"), answer
    assert "on CPU instead of GPU (AlloX's choice)" in answer.details, answer
