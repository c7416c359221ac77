"""``kubectl cellfit why job/NAME`` for a Job whose pods the API server refuses with a message that
differs each time (a quota's names the generated pod): past ten such FailedCreate Events in ten
minutes, client-go's event correlator records them as one whose message starts with
"(combined from similar events): ". The refusal is still the one told, not that prefix and the
Job controller's "Error creating: " after it."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why_pods_refused import job_event, train_job

REFUSAL = ('pods "train-x8k2p" is forbidden: exceeded quota: compute, requested: requests.cpu=4, '
           'used: requests.cpu=30, limited: requests.cpu=32')


def test_a_combined_failed_create_is_told_as_the_refusal() -> None:
    event = job_event("FailedCreate", f"(combined from similar events): Error creating: {REFUSAL}", at="2026-11-28T09:05:00Z", count=14)
    answer = explain_job(train_job([event]), CellfitView())
    assert answer.reason == "pods-refused", answer
    assert answer.summary == f"no pod: the API server refuses each pod the Job controller creates: {REFUSAL}", answer
