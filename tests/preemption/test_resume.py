"""A preempted best-effort Job's new pods go to the head of the BE queue (resumed PriorityClass)."""

from __future__ import annotations

import pytest

from scheduler.core.model import JobInfo
from scheduler.core.fit import ResourceFitEngine
from scheduler.preemption import FitGppSettings, InvalidPreemptionSettings, ResumedPriorityClass, resumed_pod_patch
from scheduler.preemption.engine import FitGppEngine

from tests.preemption.test_engine import full_node, te

RESUMED = ResumedPriorityClass(name="cellfit-resumed", value=750)
BE = {"cellfit.io/job-class": "best-effort"}


def test_new_pod_of_a_preempted_best_effort_job_gets_the_resumed_class_priority_and_policy():
    patch = resumed_pod_patch(labels=BE, priority=500, job_preemptions=1, resumed=RESUMED)
    assert patch == [
        {"op": "add", "path": "/spec/priorityClassName", "value": "cellfit-resumed"},
        {"op": "add", "path": "/spec/priority", "value": 750},
        {"op": "add", "path": "/spec/preemptionPolicy", "value": "PreemptLowerPriority"},
    ]


def test_unlabelled_pods_are_best_effort_and_move_too():
    assert resumed_pod_patch(labels={}, priority=None, job_preemptions=2, resumed=RESUMED)


@pytest.mark.parametrize(
    ("labels", "priority", "preemptions"),
    [
        (BE, 500, 0),  # never preempted: its place in the queue is its own
        ({"cellfit.io/job-class": "trial"}, 1000, 1),  # TE pods are not queued behind BE anyway
        ({"cellfit.io/job-class": "trail"}, 500, 1),  # a typo: the filter verb says so; admission lets it be
        (BE, 750, 1),  # already there
        (BE, 2000, 1),  # a class above "resumed": never lowered
    ],
)
def test_other_pods_are_left_alone(labels, priority, preemptions):
    assert resumed_pod_patch(labels=labels, priority=priority, job_preemptions=preemptions, resumed=RESUMED) == []


def test_a_resumed_class_needs_a_name_and_a_real_preemption_policy():
    with pytest.raises(InvalidPreemptionSettings, match="name"):
        ResumedPriorityClass(name="", value=1)
    with pytest.raises(InvalidPreemptionSettings, match="preemptionPolicy: 'Sometimes'"):
        ResumedPriorityClass(name="x", value=1, preemption_policy="Sometimes")


def test_engine_counts_a_jobs_preemptions_from_its_decisions_and_its_annotation():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine)
    assert engine.preemptions_of_job("job-b") == 0
    engine.select_victims(te(), {"n1": ["be-long", "be-short"]}, {})
    assert engine.preemptions_of_job("job-b") == 1  # raised at decision time, before the watch echoes it
    engine.apply_job(JobInfo(uid="job-a", namespace="ml", name="a", annotations={"cellfit.io/preemptions": "1"}))
    assert engine.preemptions_of_job("job-a") == 1
    assert engine.preemptions_of_job("job-unknown") == 0
