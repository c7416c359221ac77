"""A sampling run the API server refuses for good is told once per refusal, not once per pod.
Seen live (user29): a configuration whose toleration the API server refused gave six
SamplingPodRejected Events (one per pod name: the API server's message names the pod), then
SamplingFailed, all saying the same thing."""

from __future__ import annotations

from tests.estimator.test_review_62 import CREATED_AT, Clock, RefusingApi, estimator_for, play
from tests.estimator.test_controller import job


def test_one_event_per_refusal_whatever_the_pods_names() -> None:
    api = RefusingApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    wide_cpu = job("limited", cpu="64")  # every cpu run refused by the namespace's LimitRange
    estimator._replace_jobs([wide_cpu])
    play(estimator, api, wide_cpu, passes=10)
    rejected = [message for reason, message in api.events if reason == "SamplingPodRejected"]
    assert len(rejected) == 1, rejected
    assert "maximum cpu usage per Container is 16" in rejected[0]
    assert [reason for reason, _ in api.events].count("SamplingFailed") == 1
