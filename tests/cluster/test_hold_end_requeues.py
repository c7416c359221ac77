"""user26 #2: a room hold that ends without its pod bound requeues the pods it kept off.

kube-scheduler parks the pods a hold keeps off (unschedulable on every node): when the hold then
lapsed after resumeHoldSeconds (the resumed pod never came there), nothing told kube-scheduler the
room was free and a node stayed idle ~70 s until unrelated pod events requeued the waiting pods;
nothing was logged either. A hold is also looked at only when a filter asks, which kube-scheduler
does not while the pods are parked. Now the cache gives up the holds past their time now and then
(``ClusterCache.look_at_holds``), and a hold that kept a pod off and ends without its pod bound
logs the Job (or preemptor) and the node and asks for the requeue signal (nudge.py
``VictimRequeue.hold_ended``), as victims gone and cells changed do.

Through ClusterCache and the extender service over the API double of
tests/cluster/test_resume_holds_write.py, with the hold's clock driven by hand."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from scheduler.cluster import nudge
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD, ANNOTATION_RESUME_HOLDS
from scheduler.kube.names import filter_offered
from tests.cluster.test_preemptor_record_write import RECORD, replica, trial_pod, victim_pod
from tests.cluster.test_resume_holds_write import RECORDED, JobServingApi, resumed_pod, shown, waiter
from tests.preemption.test_holds import FakeClock
from tests.support.kube_objects import node


def resume_hold(clock: FakeClock) -> tuple[Any, Any, list[str]]:
    """A replica keeping gpu-a's room for be-1 (its Job's record), other-0 pending; the requeue
    signals it asks for, counted."""
    api = JobServingApi(job_annotations={ANNOTATION_RESUME_HOLDS: RECORDED}, nodes=[node("gpu-a", gpus=8)], pods=[resumed_pod(), waiter()])
    cache, _, engine = replica(api, clock=clock, hold_seconds=60)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    asked: list[str] = []
    cache.on_hold_ended = lambda: asked.append("hold-ended")
    return cache, engine, asked


def test_a_resume_hold_that_lapses_after_keeping_a_pod_off_requeues_it_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    cache, engine, asked = resume_hold(clock)
    with cache._lock:
        assert list(filter_offered(engine, engine.pods.get("uid-other-0"), ["gpu-a"]).feasible) == []
    # kube-scheduler parks other-0 and asks nothing more; be-1 never comes to gpu-a.
    clock.now += 30
    cache.look_at_holds()
    assert asked == []  # not yet past resumeHoldSeconds
    clock.now += 31
    with caplog.at_level(logging.INFO, logger="scheduler.cluster.cache"):
        cache.look_at_holds()
    assert asked == ["hold-ended"]  # before: [], other-0 parked until an unrelated event
    assert engine.holds.holds() == []
    (said,) = [r for r in caplog.records if r.getMessage().startswith("room hold ended")]
    assert (said.held, said.node, said.why) == ("job ml/be", "gpu-a", "lapsed")  # type: ignore[attr-defined]
    cache.look_at_holds()
    assert asked == ["hold-ended"]  # once
    cache.stop()


def test_a_hold_a_filter_finds_lapsed_asks_too() -> None:
    clock = FakeClock()
    cache, engine, asked = resume_hold(clock)
    with cache._lock:
        assert list(filter_offered(engine, engine.pods.get("uid-other-0"), ["gpu-a"]).feasible) == []
        clock.now += 61
        assert list(filter_offered(engine, engine.pods.get("uid-other-0"), ["gpu-a"]).feasible) == ["gpu-a"]
    assert asked == ["hold-ended"]  # before: [] (other pods it kept off stay parked)


def test_a_hold_that_kept_no_pod_off_or_ends_with_its_pod_bound_asks_for_nothing() -> None:
    clock = FakeClock()
    cache, engine, asked = resume_hold(clock)
    clock.now += 61  # no pod kept off: idle, with its pod pending (it never lapses so)
    cache.look_at_holds()
    assert asked == []
    with cache._lock:
        assert list(filter_offered(engine, engine.pods.get("uid-other-0"), ["gpu-a"]).feasible) == []
    bound = resumed_pod()
    bound["spec"]["nodeName"] = "gpu-a"
    bound["status"]["phase"] = "Running"
    cache._apply_pod(shown(bound))  # be-1 bound there: the hold did its work
    clock.now += 61
    cache.look_at_holds()
    assert asked == [] and engine.holds.holds() == []
    cache.stop()


def test_a_preemptor_hold_that_lapses_after_keeping_a_pod_off_requeues_it() -> None:
    clock = FakeClock()
    api = JobServingApi(nodes=[node("gpu-a", gpus=8)], pods=[victim_pod(leaving=True), trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: RECORD})])
    cache, _, engine = replica(api, clock=clock, hold_seconds=60)
    asked: list[str] = []
    cache.on_hold_ended = lambda: asked.append("hold-ended")
    cache._delete_pod(shown(victim_pod(leaving=True)))  # be-0 exits
    cache._apply_pod(shown(waiter()))
    other = engine.pods.get("uid-other-0")
    assert other is not None
    with cache._lock:
        assert list(filter_offered(engine, other, ["gpu-a"]).feasible) == []
    clock.now += 61  # te-0 never binds there (a taint FitGpp cannot see)
    cache.look_at_holds()
    assert asked == ["hold-ended"]
    cache.stop()


def test_a_hold_ended_is_a_reason_of_its_own_for_the_requeue_signal() -> None:
    counted: list[str] = []
    requeue = nudge.VictimRequeue(api=None, namespace="cellfit", on_hold_signal=lambda: counted.append("hold-ended"))  # type: ignore[arg-type]
    requeue.hold_ended()
    reasons = requeue._take_reasons()
    assert reasons == {nudge.HOLD_ENDED}
    requeue._signalled(reasons)
    assert counted == ["hold-ended"]
