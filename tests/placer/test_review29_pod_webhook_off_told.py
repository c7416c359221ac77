"""cellfit restarted with admission.enabled: false after AlloX started Jobs through its pod-create
webhook: the pods the Job controller makes later (a retry, a replacement after a preemption) run
as the template says, in no configuration, and nothing said so. The leader's placer now tells
each such running Job once a term (a PodWebhookOff Warning Event naming admission.enabled), the
operator in one log line for all of them (not one a pass), and /v1/inspect/allox lists them.

The Jobs are started by the real placer, with the webhook on, through either mechanism; the
patches applied as the API server applies them; then a new term's placer, the webhook off, sees
them running."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable

import pytest

from estimator.objects import JOB_DECODER, Job
from placer import pod_webhook_off
from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import CONFIGURATIONS, Jobs, RecordingApi
from tests.placer.test_user29_no_pod_webhook import placer_of
from tests.support.json_patch import patched

TOLD = ("its new pods get no configuration: cellfit's pod-create webhook, which gave this Job's pods their gpu configuration, "
        "is off (admission.enabled: false)")


def suspended(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "7",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                                     "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 100}, "gpu": {"seconds": 10}})}},
        "spec": {"suspend": True, "template": {"metadata": {"labels": {"job-name": name}},
                                               "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}},
    }


def started(name: str, mechanism: str) -> dict[str, Any]:
    """The Job as the API server holds it once a placer with the webhook on started it, running."""
    body = suspended(name)
    api = RecordingApi()
    placer_of(api, [decoded(body)], mechanism=mechanism, pod_webhook=True).admit()
    ((_, operations),) = api.patches
    running = patched(body, operations)
    running["metadata"]["resourceVersion"] = "8"
    running["status"] = {"startTime": "2026-01-01T00:01:40Z", "active": 1}
    return running


def decoded(body: dict[str, Any]) -> Job:
    return JOB_DECODER.decode(json.dumps(body).encode())


def term(api: RecordingApi, bodies: list[dict[str, Any]], *, pod_webhook: bool = False,
         clock: Callable[[], float] = lambda: 1767225700.0) -> tuple[PlacerController, list[Job]]:
    """A term's placer, over the Jobs the watch holds (the list, changed between passes below)."""
    jobs = [decoded(body) for body in bodies]
    placer = PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1)},
        capacity=lambda: Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1), clock=clock, pod_webhook=pod_webhook,
    )
    return placer, jobs


def told(api: RecordingApi) -> list[tuple[str, str]]:
    return [(name, message) for name, reason, message in api.events if reason == "PodWebhookOff"]


def test_a_job_placed_through_the_webhook_is_told_once_a_term_and_the_operator_once(caplog: pytest.LogCaptureFixture) -> None:
    by_webhook = [started("w1", "webhook"), started("w2", "webhook")]
    by_template = started("t", "template")
    api = RecordingApi()
    placer, jobs = term(api, [*by_webhook, by_template])
    with caplog.at_level(logging.WARNING, logger=pod_webhook_off.__name__):
        placer.admit()
        for version in ("9", "10"):  # later passes, its status changing: told nothing again
            for body in by_webhook:
                body["metadata"]["resourceVersion"] = version
            jobs[:] = [decoded(body) for body in [*by_webhook, by_template]]
            placer.admit()
    assert told(api) == [("w1", TOLD), ("w2", TOLD)]  # not the Job whose template is in its configuration
    (line,) = [r for r in caplog.records if "admission.enabled: false" in r.getMessage()]
    assert (line.jobs, line.count) == (["alice/w1", "alice/w2"], 2)  # type: ignore[attr-defined]
    assert placer.inspect()["runningWithoutPodWebhook"] == ["alice/w1", "alice/w2"]
    # The next term (a restart, another leader) tells each again.
    again = RecordingApi()
    term(again, by_webhook)[0].admit()
    assert told(again) == [("w1", TOLD), ("w2", TOLD)]


def test_with_the_webhook_on_or_a_job_suspended_or_finished_nothing_is_told() -> None:
    api = RecordingApi()
    term(api, [started("w", "webhook")], pod_webhook=True)[0].admit()
    assert told(api) == []
    waiting, ended = started("s", "webhook"), started("f", "webhook")
    waiting["spec"]["suspend"] = True
    ended["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    api = RecordingApi()
    placer, _ = term(api, [waiting, ended])
    placer.admit()
    assert told(api) == [] and placer.inspect()["runningWithoutPodWebhook"] == []


def test_a_job_told_later_in_the_term_waits_for_the_next_log_line(caplog: pytest.LogCaptureFixture) -> None:
    api = RecordingApi()
    first = started("w1", "webhook")
    clock = [1767225700.0]
    placer, jobs = term(api, [first], clock=lambda: clock[0])
    with caplog.at_level(logging.WARNING, logger=pod_webhook_off.__name__):
        placer.admit()
        jobs[:] = [decoded(first), decoded(started("w2", "webhook"))]
        placer.admit()  # told at once; logged with the next line due
        clock[0] += pod_webhook_off.LOG_EVERY_SECONDS
        placer.admit()
    lines = [(r.jobs, r.count) for r in caplog.records if "admission.enabled: false" in r.getMessage()]  # type: ignore[attr-defined]
    assert lines == [(["alice/w1"], 1), (["alice/w2"], 1)]
    assert told(api) == [("w1", TOLD), ("w2", TOLD)]
