"""``kubectl cellfit why job/...`` of a Job being estimated from one configuration while no node
could ever run its other. Seen live (user29): "estimating: 0 of 1 samples done; pending gpu long
(...)" and nothing of its cpu configuration, which the estimator will not sample (its
ConfigurationNeverRuns Event, which only ``kubectl describe`` showed): the user read a Job of one
configuration. Now its Event's words are among the details."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView, events_from, job_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why import event, interchangeable

NEVER = ("cpu is not sampled: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than any node has "
         "(64 cores at most): no node could ever run it")


def test_the_configuration_never_sampled_is_told_while_the_other_is_sampled() -> None:
    entry = {"namespace": "ns", "name": "ij", "state": "sampling", "message": "this Job's sampling runs: 1 under way",
             "samples": [{"pod": "ij-gpu-l0-0", "configuration": "gpu", "length": "long", "state": "pending"}]}
    events = events_from([event("ConfigurationNeverRuns", NEVER, warning=True), event("ConfigurationNeverRuns", NEVER, warning=True)])
    answer = explain_job(job_from(interchangeable(), events=events), CellfitView(estimator_entry=entry))
    assert answer.summary == "estimating: 0 of 1 samples done; pending gpu long (ij-gpu-l0-0)"
    assert answer.details[:2] == ("this Job's sampling runs: 1 under way", NEVER)
    assert answer.details.count(NEVER) == 1
