"""FitGpp's room holds survive a restart of cellfit: a new engine fed the pods as the watch cache
relists them rebuilds them from what kube-scheduler's preemption left on the pods.

The scene: node n1 (8 GPUs) runs best-effort Jobs a and b (4 GPUs each); trial pod te-1 (4
GPUs) had b's pod preempted. kube-scheduler wrote the DisruptionTarget condition on the victim
and deleted it (it terminates for its grace period), and nominated te-1 to n1. Then cellfit
restarted. The pods come from real API objects (``tests/support/kube_objects.py``) through the
translation the cache uses.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, NodeInfo, PodInfo
from scheduler.core.resources import Resources
from scheduler.kube import translate, wire
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.preemption.test_holds import FakeClock
from tests.support import kube_objects
from scheduler.kube.names import filter_offered

GI = 2**30
GPU = "nvidia.com/gpu"
NODE = NodeInfo(name="n1", allocatable=Resources(32000, 256 * GI, 8))
BE = {"cellfit.io/job-class": "best-effort"}
TRIAL = {"cellfit.io/job-class": "trial"}
BE_PRIORITY, RESUMED_PRIORITY, TRIAL_PRIORITY = 500, 750, 1000
JOB_B = "job-b-uid"
DELETED_AT = "2026-11-27T20:00:00Z"
CELLFIT_PREEMPTION = "cellfit: preempting to accommodate a higher priority Pod"


def as_pod(body: dict[str, Any]) -> PodInfo:
    return translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource=GPU)


def running(name: str, *, job_uid: str, gpus: int = 4, grace: int = 30) -> dict[str, Any]:
    body = kube_objects.pod(name, uid=name, gpus=gpus, node_name="n1", phase="Running", priority=BE_PRIORITY,
                            labels=BE, job_uid=job_uid, grace_period_seconds=grace)
    body["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return body


def preempted(body: dict[str, Any], *, message: str = CELLFIT_PREEMPTION) -> dict[str, Any]:
    """What kube-scheduler's preemption leaves on a victim: DisruptionTarget, then deletion."""
    body["metadata"]["deletionTimestamp"] = DELETED_AT
    body["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": message}
    )
    return body


def trial(name: str = "te-1", *, gpus: int = 4, nominated: str | None = "n1", scheduler: str = "cellfit") -> dict[str, Any]:
    body = kube_objects.pod(name, uid=name, gpus=gpus, priority=TRIAL_PRIORITY, labels=TRIAL, job_uid=f"job-{name}")
    body["spec"]["schedulerName"] = scheduler
    if nominated is not None:
        body["status"]["nominatedNodeName"] = nominated
    return body


def waiter(name: str = "waiter-x", *, gpus: int = 4, priority: int = BE_PRIORITY, job_uid: str = "job-w") -> PodInfo:
    return as_pod(kube_objects.pod(name, uid=name, gpus=gpus, priority=priority, labels=BE, job_uid=job_uid))


def restarted(pods: list[dict[str, Any]], *, preemptions_of_b: int = 1, clock: FakeClock | None = None,
              hold_seconds: float | None = None) -> FitGppEngine:
    """A new engine fed the cluster as a relist feeds it: nodes, pods, Jobs."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=hold_seconds, clock=clock)
    engine.apply_node(NODE)
    for body in pods:
        engine.apply_pod(as_pod(body))
    engine.apply_job(JobInfo(uid=JOB_B, namespace="ml", name="be-b",
                             annotations={"cellfit.io/preemptions": str(preemptions_of_b)}))
    return engine


def mid_preemption() -> list[dict[str, Any]]:
    return [running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), trial()]


def test_the_translation_carries_the_nomination_the_scheduler_and_the_disruption():
    victim = as_pod(preempted(running("be-b-0", job_uid=JOB_B)))
    assert victim.terminating and victim.disruption is not None
    assert (victim.disruption.reason, victim.disruption.message) == ("PreemptionByScheduler", CELLFIT_PREEMPTION)
    preemptor = as_pod(trial())
    assert (preemptor.nominated_node_name, preemptor.scheduler_name, preemptor.disruption) == ("n1", "cellfit", None)


def test_after_a_restart_the_preemptor_keeps_its_room_from_a_lower_priority_pod():
    engine = restarted(mid_preemption())
    engine.delete_pod("be-b-0")  # the victim exits; kube-scheduler has cleared te-1's nomination meanwhile
    engine.apply_pod(as_pod(trial(nominated=None)))
    decision = filter_offered(engine, waiter(), ["n1"])
    assert list(decision.feasible) == []
    assert decision.unresolvable["n1"].startswith("its free resources are kept for ml/te-1, for which FitGpp preempted")
    assert list(filter_offered(engine, as_pod(trial()), ["n1"]).feasible) == ["n1"]
    assert [(h.node, h.kind, h.pods) for h in engine.holds.holds()] == [("n1", "preemptor", ("ml/te-1",))]


def test_after_a_restart_the_rebuilt_preemptor_hold_takes_no_second_victim():
    engine = restarted(mid_preemption())
    choice = engine.decide_preemption(as_pod(trial()), {"n1": ["be-a-0"]}, {})
    assert choice.victims == {} and choice.refusal is not None and "already terminating on node n1" in choice.refusal


def test_after_a_restart_the_resumed_job_keeps_its_room():
    engine = restarted(mid_preemption())
    engine.delete_pod("be-b-0")
    engine.apply_pod(as_pod({**trial(nominated=None), "spec": {**trial()["spec"], "nodeName": "n1"}}))  # te-1 bound
    engine.delete_pod("te-1")  # and finished
    resumed = as_pod(kube_objects.pod("be-b-1", uid="be-b-1", gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B))
    engine.apply_pod(resumed)
    decision = filter_offered(engine, waiter(), ["n1"])
    assert list(decision.feasible) == []
    assert "kept for ml/be-b-1, of a best-effort Job preempted there" in decision.unresolvable["n1"]
    assert list(filter_offered(engine, resumed, ["n1"]).feasible) == ["n1"]
    assert engine.stats()["resumeHolds"] == 1


def test_the_job_may_come_after_its_pods_in_the_relist():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_job(JobInfo(uid=JOB_B, namespace="ml", name="be-b", annotations={"cellfit.io/preemptions": "1"}))
    for body in mid_preemption():
        engine.apply_pod(as_pod(body))
    engine.delete_pod("be-b-0")
    engine.apply_pod(as_pod(kube_objects.pod("be-b-1", uid="be-b-1", gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B)))
    assert sorted(h.kind for h in engine.holds.holds()) == ["preemptor", "resume"]


def test_a_rebuilt_hold_gives_up_after_hold_seconds_and_is_not_rebuilt():
    clock = FakeClock()
    # te-1 wants 2 GPUs; two victims of cellfit's preemptions leave n1, one of them slowly.
    pods = [running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B, gpus=2)),
            preempted(running("be-c-0", job_uid="job-c", gpus=2)), trial(gpus=2)]
    engine = restarted(pods, preemptions_of_b=0, clock=clock, hold_seconds=60)  # the preemptor hold alone
    engine.delete_pod("be-b-0")
    small_waiter = waiter(gpus=2)
    assert list(filter_offered(engine, small_waiter, ["n1"]).feasible) == []  # the clock starts
    clock.now += 61
    assert list(filter_offered(engine, small_waiter, ["n1"]).feasible) == ["n1"]
    assert engine.stats()["resumeHoldsLapsed"] == 1
    # te-1 still nominated there, be-c-0 still terminating: the evidence stands, the hold stays given up
    engine.apply_pod(as_pod(trial(gpus=2)))
    assert list(filter_offered(engine, small_waiter, ["n1"]).feasible) == ["n1"]
    assert engine.holds.holds() == []


@pytest.mark.parametrize(
    ("pods", "why"),
    [
        ([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B), message="default-scheduler: preempting to accommodate a higher priority Pod"),
          trial()], "the victim is kube-scheduler's own preemption for another profile"),
        ([running("be-a-0", job_uid="job-a"), trial()], "the nominated node has no victim terminating (a stale nomination)"),
        ([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), trial(scheduler="default-scheduler")],
         "the nominated pod is another scheduler's"),
        ([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)),
          {**trial(), "metadata": {**trial()["metadata"], "labels": BE}}], "FitGpp preempts for trial pods only"),
    ],
)
def test_untrusted_evidence_rebuilds_no_preemptor_hold(pods: list[dict[str, Any]], why: str):
    engine = restarted(pods, preemptions_of_b=0)
    engine.delete_pod("be-b-0")
    assert list(filter_offered(engine, waiter(), ["n1"]).feasible) == ["n1"], why
    assert engine.holds.holds() == [], why


def test_a_victim_of_a_job_never_preempted_by_fitgpp_rebuilds_no_resume_hold():
    engine = restarted([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B))], preemptions_of_b=0)
    engine.delete_pod("be-b-0")
    engine.apply_pod(as_pod(kube_objects.pod("be-b-1", uid="be-b-1", gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B)))
    assert engine.holds.holds() == []


def test_without_a_restart_the_watched_evidence_adds_no_second_hold():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_pod(as_pod(running("be-a-0", job_uid="job-a", grace=600)))  # FitGpp takes the short grace period
    engine.apply_pod(as_pod(running("be-b-0", job_uid=JOB_B)))
    preemptor = as_pod(trial(nominated=None))
    engine.apply_pod(preemptor)
    assert engine.select_victims(preemptor, {"n1": ["be-a-0", "be-b-0"]}, {}) == {"n1": ["be-b-0"]}
    engine.apply_job(JobInfo(uid=JOB_B, namespace="ml", name="be-b", annotations={"cellfit.io/preemptions": "1"}))
    # the watch echoes the preemption: the victim terminating with its condition, te-1 nominated
    engine.apply_pod(as_pod(preempted(running("be-b-0", job_uid=JOB_B))))
    engine.apply_pod(as_pod(trial()))
    engine.delete_pod("be-b-0")
    for name in ("be-b-1", "be-b-2"):
        engine.apply_pod(as_pod(kube_objects.pod(name, uid=name, gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B)))
    assert [(h.kind, h.pods) for h in engine.holds.holds()] == [("preemptor", ("ml/te-1",)), ("resume", ("ml/be-b-1",))]


def _simulator_composition(settings, clock):
    from scheduler.composition import compose

    return compose(settings, connected=False, clock=clock)


def _served_composition(settings, clock):
    from scheduler.extender.runtime import build_composition

    return build_composition(settings, None)  # what `cellfit serve` builds (standalone: no API)


@pytest.mark.parametrize("build", [_simulator_composition, _served_composition], ids=["simulator", "serve"])
def test_the_composition_trusts_the_preemptions_of_the_profile_it_is_configured_for(build):
    """``nudge.schedulerName`` names the profile served (the chart sets it from its own
    ``schedulerName``): a renamed profile's preemptions rebuild holds, another's do not; in the
    composition `cellfit serve` builds as in the simulator's."""
    from scheduler.config import parse_settings

    def rebuilt(profile: str) -> list[str]:
        engine = build(parse_settings(f"nudge: {{schedulerName: {profile}}}\n"), FakeClock()).engine
        engine.apply_node(NODE)
        pods = [running("be-a-0", job_uid="job-a"),
                preempted(running("be-b-0", job_uid=JOB_B), message="gpu-batch: preempting to accommodate a higher priority Pod"),
                trial(scheduler="gpu-batch")]
        for body in pods:
            engine.apply_pod(as_pod(body))
        assert isinstance(engine, FitGppEngine)
        return [h.kind for h in engine.holds.holds()]

    assert rebuilt("gpu-batch") == ["preemptor"]
    assert rebuilt("cellfit") == []
