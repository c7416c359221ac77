"""A Job the API server will not rewrite on its template (env: KEP-5440 covers resources only)
is placed through cellfit's pod-create webhook; with that webhook off (``admission.enabled:
false``, as `cellfit serve` runs by default) no pod would get the configuration. Seen live
(user29): such Jobs were unsuspended, told "running on gpu", and their pods ran with the
template's own resources, without the GPU, on a CPU node. Now the Job is refused in that kind,
told why naming the setting, and nothing is unsuspended."""

from __future__ import annotations

from typing import Any

from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi, job


def placer_of(api: RecordingApi, jobs: list[Any], *, mechanism: str, pod_webhook: bool) -> PlacerController:
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism=mechanism, solver_process=False),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1)},
        capacity=lambda: Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1),
        clock=lambda: 1767225700.0, pod_webhook=pod_webhook,
    )


def refusals(api: RecordingApi) -> list[str]:
    return [c["message"] for _, c in api.conditions if c["reason"] == "Refused" and c["status"] == "False"]


def test_a_start_only_the_webhook_could_configure_is_refused_when_the_webhook_is_off() -> None:
    api = RecordingApi(refuse_template_resources=True)
    placer = placer_of(api, [job("a")], mechanism="auto", pod_webhook=False)
    placer.admit()
    assert api.patches == []  # not unsuspended
    assert not [e for e in api.events if e[1] == "Placed"]
    told, = refusals(api)
    assert told.startswith("AlloX does not start this Job on gpu: ")
    assert "admission.enabled: false" in told and "field is immutable" in told
    assert ("a", "PlacementRefused", told) in api.events


def test_mechanism_webhook_with_the_webhook_off_is_refused_naming_both_settings() -> None:
    api = RecordingApi()
    placer = placer_of(api, [job("a")], mechanism="webhook", pod_webhook=False)
    placer.admit()
    assert api.patches == []
    told, = refusals(api)
    assert "allox.mechanism is webhook" in told and "admission.enabled: false" in told


def test_the_template_mechanism_needs_no_webhook() -> None:
    api = RecordingApi()
    placer = placer_of(api, [job("a")], mechanism="auto", pod_webhook=False)
    placer.admit()
    (name, _), = api.patches
    assert name == "a" and refusals(api) == []


def test_with_the_webhook_on_the_fallback_still_places_through_it() -> None:
    api = RecordingApi(refuse_template_resources=True)
    placer = placer_of(api, [job("a")], mechanism="auto", pod_webhook=True)
    placer.admit()
    (name, _), = api.patches
    assert name == "a" and placer.inspect()["startsByMechanism"] == {"webhook": 1}
