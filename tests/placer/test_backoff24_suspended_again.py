"""A Job AlloX suspended again (none of its pods bound within 300 s) is not started in that kind
again at once (user24b, NEW-2): live, AlloX started it again 1.5 s later on the same room, which
a taint on every GPU node AlloX does not read left unusable, and the 300 s cycle repeated for
ever. Now AlloX backs off that kind for the Job: 300 s (the NotBound limit), doubling per repeat,
at most 30 min, up to the minute; it may start the Job in its other kind meanwhile, or it waits,
told why. A Job whose configurations are edited is not held back."""

from __future__ import annotations

import json
from typing import Any

from placer.holding import JobPods
from tests.placer.test_holding import NOW, placer_with
from tests.placer.test_placer24_suspend_again import LONG_AGO, SuspendingApi
from tests.placer.test_controller import job


def gpu_only(name: str, *, suspend: bool, placement: str | None = "gpu", started: str | None = None,
             version: str = "7", configurations: str | None = None, placed: dict[str, str] | None = None,
             recorded: str | None = None) -> Any:
    """A Job estimated on gpu alone (so it has no other kind to start in)."""
    base = job(name, gpu=120, cpu=300, suspend=suspend, placement=placement, started=started, version=version)
    body = json.loads(json.dumps({"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": version,
                                               "creationTimestamp": "2026-01-01T00:00:00Z",
                                               "annotations": {**base.annotations,
                                                               "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 120}}),
                                                               **({"cellfit.io/configurations": configurations}
                                                                  if configurations else {})}},
                                  "spec": {"suspend": suspend, "template": json.loads(bytes(base.spec.template))},
                                  "status": {**({"startTime": started} if started else {}),
                                             **({"conditions": [{"type": "Placed", "status": "False", **placed}]} if placed else {})}}))
    if recorded:
        body["spec"]["template"]["metadata"]["annotations"] = {"cellfit.io/configurations": recorded}
    from estimator.objects import JOB_DECODER
    return JOB_DECODER.decode(json.dumps(body).encode())


def starts(decision: Any) -> list[tuple[str, str]]:
    return [(s.key, s.kind) for s in decision.starts]


def test_a_job_suspended_again_is_not_started_in_that_kind_until_its_back_off_ends_then_it_doubles() -> None:
    api = SuspendingApi()
    placer = placer_with(api, [gpu_only("q", suspend=False, started=LONG_AGO)], {"uid-q": JobPods(unbound=1)})
    placer.admit()  # at NOW (00:01:40): suspended again
    assert [name for name, _ in api.suspends] == ["q"]
    # 1.5 s later the watch shows it suspended, on the same unusable room: not started in gpu.
    placer._jobs.jobs = [gpu_only("q", suspend=True, version="8")]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 1.5
    decision = placer.admit()
    assert starts(decision) == [] and api.patches == []
    # Back-off 300 s from 00:01:40, up to the minute: not before 00:07 UTC.
    message = ("gpu start failed: no pod was bound within 300 s; not started in gpu again before 2026-01-01T00:07:00Z "
               "(suspended again 1 time; AlloX waits 300 s, doubling each time, at most 30 min)")
    told = [(c["reason"], c["message"]) for name, c in api.conditions if name == "q"]
    assert told[-1] == ("SuspendedAgain", message)
    assert placer.inspect()["waiting"] == [{"job": "alice/q", "reason": "SuspendedAgain", "message": message}]
    # Told once: a later pass in the back-off writes nothing again.
    placer._clock = lambda: NOW + 200
    placer.admit()
    assert [(r, m) for name, c in api.conditions if name == "q" for r, m in [(c["reason"], c["message"])]] == told
    # Once it ends (00:07:00), it starts in gpu again.
    placer._clock = lambda: NOW + 320
    assert starts(placer.admit()) == [("alice/q", "gpu")]
    # None of its pods bound again: suspended again a second time, and backed off 600 s.
    placer._jobs.jobs = [gpu_only("q", suspend=False, started="2026-01-01T00:07:00Z", version="9")]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 320 + 301
    placer.admit()
    assert [name for name, _ in api.suspends] == ["q", "q"]
    placer._jobs.jobs = [gpu_only("q", suspend=True, version="10")]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 320 + 302
    assert starts(placer.admit()) == []
    assert "not started in gpu again before 2026-01-01T00:23:00Z (suspended again 2 times" in api.conditions[-1][1]["message"]
    placer._clock = lambda: NOW + 320 + 301 + 600 + 60
    assert starts(placer.admit()) == [("alice/q", "gpu")]


BACKED_OFF = {"reason": "SuspendedAgain", "message": (
    "gpu start failed: no pod was bound within 300 s; not started in gpu again before 2026-01-01T00:07:00Z "
    "(suspended again 2 times; AlloX waits 300 s, doubling each time, at most 30 min)")}


def test_a_restarted_cellfit_reads_the_back_off_from_the_condition_and_keeps_counting() -> None:
    api = SuspendingApi()
    placer = placer_with(api, [gpu_only("q", suspend=True, version="8", placed=BACKED_OFF)], {"uid-q": JobPods(unbound=1)})
    placer._clock = lambda: NOW + 1.5
    assert starts(placer.admit()) == []
    assert api.conditions == []  # the condition already says it
    placer._clock = lambda: NOW + 330  # 00:07:10: its back-off over
    assert starts(placer.admit()) == [("alice/q", "gpu")]
    placer._jobs.jobs = [gpu_only("q", suspend=False, started="2026-01-01T00:07:10Z", version="9")]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 330 + 301  # 00:12:11, none bound: a third time, 1200 s
    placer.admit()
    placer._jobs.jobs = [gpu_only("q", suspend=True, version="10")]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 330 + 302
    assert starts(placer.admit()) == []
    assert "before 2026-01-01T00:33:00Z (suspended again 3 times" in api.conditions[-1][1]["message"]


def test_a_restarted_cellfit_does_not_hold_back_a_job_whose_configuration_was_edited_since() -> None:
    from tests.placer.test_controller import CONFIGURATIONS
    edited = json.dumps({**CONFIGURATIONS, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "2"}}})
    api = SuspendingApi()
    placer = placer_with(api, [gpu_only("q", suspend=True, version="8", placed=BACKED_OFF, configurations=edited,
                                        recorded=json.dumps(CONFIGURATIONS))], {})
    placer._clock = lambda: NOW + 1.5
    assert starts(placer.admit()) == [("alice/q", "gpu")]


def test_the_back_off_is_at_most_30_minutes() -> None:
    from placer.controller import suspended_again_back_off
    assert [suspended_again_back_off(n, base_seconds=300) for n in (1, 2, 3, 4, 5, 9)] == [300, 600, 1200, 1800, 1800, 1800]


def test_a_job_with_another_kind_may_start_in_it_meanwhile() -> None:
    api = SuspendingApi()
    placer = placer_with(api, [job("q", gpu=120, cpu=300, suspend=False, placement="gpu", started=LONG_AGO, version="7")],
                         {"uid-q": JobPods(unbound=1)})
    placer.admit()
    placer._jobs.jobs = [job("q", gpu=120, cpu=300, suspend=True, placement="gpu", version="8")]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 1.5
    assert starts(placer.admit()) == [("alice/q", "cpu")]  # the GPU is free, but not for it now


def test_a_job_whose_configurations_are_edited_is_not_held_back() -> None:
    api = SuspendingApi()
    placer = placer_with(api, [gpu_only("q", suspend=False, started=LONG_AGO)], {"uid-q": JobPods(unbound=1)})
    placer.admit()
    edited = json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "2"}}})
    placer._jobs.jobs = [gpu_only("q", suspend=True, version="9", configurations=edited)]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 1.5
    assert starts(placer.admit()) == [("alice/q", "gpu")]
