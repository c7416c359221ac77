"""``kubectl cellfit why job/...`` tells a configuration's ConfigurationNeverRuns Event (230b82c)
only while that configuration is not being sampled. The Event stays an hour; a node that can run
the configuration may join before (estimator.nodesMayJoin, an autoscaler), and the estimator
then samples it: why said "estimating: 0 of 2 samples done; pending cpu long (...), gpu long
(...)" and, below, "cpu is not sampled: ... no node could ever run it", the one contradicting
the other."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView, events_from, job_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why import event, interchangeable

NEVER = ("cpu is not sampled: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than any node has "
         "(64 cores at most): no node could ever run it")
BOTH = "big and cpu are not sampled: no node could ever run them"


def sample(kind: str) -> dict[str, str]:
    return {"pod": f"ij-{kind}-l0-0", "configuration": kind, "length": "long", "state": "pending"}


def details(samples: list[dict[str, str]], *messages: str) -> tuple[str, ...]:
    entry = {"namespace": "ns", "name": "ij", "state": "sampling", "message": "this Job's sampling runs: under way",
             "samples": samples}
    events = events_from([event("ConfigurationNeverRuns", message, warning=True) for message in messages])
    return explain_job(job_from(interchangeable(), events=events), CellfitView(estimator_entry=entry)).details


def test_a_configuration_sampled_since_its_event_is_not_told_never_sampled() -> None:
    assert NEVER not in details([sample("gpu"), sample("cpu")], NEVER)


def test_a_configuration_still_not_sampled_is_told() -> None:
    assert NEVER in details([sample("gpu")], NEVER)


def test_an_event_naming_several_is_told_while_any_of_them_is_not_sampled() -> None:
    assert BOTH in details([sample("gpu"), sample("cpu")], BOTH)
    assert BOTH not in details([sample("gpu"), sample("cpu"), sample("big")], BOTH)
