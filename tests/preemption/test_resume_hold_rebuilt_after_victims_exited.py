"""A restart after FitGpp's victims have exited still keeps their Jobs' room (user25 #4).

Live: vc-b ran best-effort b-new and b-fill, b-wait pending; trial b-te3 preempted b-fill, and
cellfit was killed while b-fill terminated and came back after it was gone. Nothing on the pods
named b-fill any more, so its Job's resume hold was not rebuilt: once the trial ended, b-wait
took the room and the Job's resumed pod stayed Pending. The decision's record on the pending
trial pod (``cellfit.io/preemptor-hold``, ``resumes``) now names the victims' Jobs, and a
restarted engine gives them their resume holds from it.

The scene as in test_holds_recovered.py: node n1 (8 GPUs), best-effort Jobs a and b (4 GPUs
each), trial pod te-1 (4 GPUs) that FitGpp decided to take b's pod for.
"""

from __future__ import annotations

from typing import Any

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings, records
from scheduler.preemption.engine import FitGppEngine
from tests.preemption.test_holds_recovered import (
    BE,
    JOB_B,
    NODE,
    RESUMED_PRIORITY,
    as_pod,
    preempted,
    running,
    trial,
    waiter,
)
from tests.support import kube_objects


def decided() -> tuple[FitGppEngine, str]:
    """An engine that decided FitGpp's preemption for te-1 (be-a-0's long grace period: be-b-0
    is taken), and the record its decision gives te-1."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_pod(as_pod(running("be-a-0", job_uid="job-a", grace=600)))
    engine.apply_pod(as_pod(running("be-b-0", job_uid=JOB_B)))
    choice = engine.decide_preemption(as_pod(trial(nominated=None)), {"n1": ["be-a-0", "be-b-0"]}, {})
    assert choice.victims == {"n1": ["be-b-0"]} and choice.preemptor_record is not None
    return engine, choice.preemptor_record


def decided_record() -> str:
    return decided()[1]


def recorded_trial(record: str, **fields: Any) -> dict[str, Any]:
    body = trial(nominated=None, **fields)  # kube-scheduler cleared the nomination when cellfit was down
    body["metadata"].setdefault("annotations", {})[ANNOTATION_PREEMPTOR_HOLD] = record
    return body


def resumed_pod(name: str = "be-b-1", *, gpus: int = 4) -> dict[str, Any]:
    return kube_objects.pod(name, uid=name, gpus=gpus, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B)


def pods_held_for_b(engine: FitGppEngine) -> list[str]:
    """The pods of b the room is kept for, with two pending that both fit (2 GPUs each): one per
    victim taken, two where its hold was counted twice."""
    for name in ("be-b-1", "be-b-2"):
        engine.apply_pod(as_pod(resumed_pod(name, gpus=2)))
    return [pod for hold in engine.holds.holds() if hold.kind == "resume" for pod in hold.pods]


def restarted_after_the_victim_exited(record: str) -> FitGppEngine:
    """A new engine fed the cluster as the relist shows it once be-b-0 is gone."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    for body in (running("be-a-0", job_uid="job-a", grace=600), recorded_trial(record), resumed_pod()):
        engine.apply_pod(as_pod(body))
    engine.apply_job(JobInfo(uid=JOB_B, namespace="ml", name="be-b", annotations={"cellfit.io/preemptions": "1"}))
    return engine


def trial_ends(engine: FitGppEngine) -> None:
    bound = trial(nominated=None)
    bound["spec"]["nodeName"] = "n1"
    engine.apply_pod(as_pod(bound))  # the binding empties the record
    engine.delete_pod("te-1")


def test_the_decision_records_the_job_each_victim_resumes() -> None:
    assert records.decode(decided_record()) == records.PreemptorRecord(
        node="n1", victims=("be-b-0",), resumes={"be-b-0": JOB_B},
        owed=records.Owed(jobs={JOB_B: records.OwedJob(namespace="ml", name="be-b", count=1, holds={"be-b-0": "n1"})},
                          pods={"be-b-0": "ml/be-b-0"}),
    )


def test_after_a_restart_past_the_victims_exit_the_resumed_pod_gets_the_room_back() -> None:
    engine = restarted_after_the_victim_exited(decided_record())
    assert sorted((h.kind, h.pods) for h in engine.holds.holds()) == [("preemptor", ("ml/te-1",)), ("resume", ("ml/be-b-1",))]
    trial_ends(engine)
    decision = filter_offered(engine, waiter(), ["n1"])  # b-wait, pending all along, backoff over first
    assert list(decision.feasible) == []
    assert "kept for ml/be-b-1, of a best-effort Job preempted there" in decision.unresolvable["n1"]
    assert list(filter_offered(engine, as_pod(resumed_pod()), ["n1"]).feasible) == ["n1"]
    assert engine.stats()["resumeHolds"] == 1


def test_a_relist_that_shows_the_record_again_adds_no_second_hold() -> None:
    record = decided_record()
    engine = restarted_after_the_victim_exited(record)
    engine.apply_pod(as_pod(recorded_trial(record)))
    assert pods_held_for_b(engine) == ["ml/be-b-1"]


def test_a_victim_seen_terminating_after_the_restart_gives_its_job_one_hold() -> None:
    record = decided_record()
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_job(JobInfo(uid=JOB_B, namespace="ml", name="be-b", annotations={"cellfit.io/preemptions": "1"}))
    for body in (running("be-a-0", job_uid="job-a", grace=600), preempted(running("be-b-0", job_uid=JOB_B)), recorded_trial(record)):
        engine.apply_pod(as_pod(body))
    engine.delete_pod("be-b-0")
    engine.apply_pod(as_pod(recorded_trial(record)))
    assert pods_held_for_b(engine) == ["ml/be-b-1"]


def test_the_deciding_engine_adds_no_second_hold_when_the_record_comes_after_the_exit() -> None:
    engine, record = decided()
    engine.delete_pod("be-b-0")
    engine.apply_pod(as_pod(recorded_trial(record)))
    assert pods_held_for_b(engine) == ["ml/be-b-1"]


def test_an_older_record_without_resumes_rebuilds_the_preemptor_hold_only() -> None:
    older = records.encode(node="n1", victims=("be-b-0",))
    engine = restarted_after_the_victim_exited(older)
    assert [(h.kind, h.pods) for h in engine.holds.holds()] == [("preemptor", ("ml/te-1",))]


def test_a_deleted_job_gets_no_hold_back() -> None:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_pod(as_pod(running("be-b-2", job_uid=JOB_B)))  # another pod of b, then b deleted
    engine.delete_job(JOB_B)
    engine.apply_pod(as_pod(recorded_trial(decided_record())))
    assert [h.kind for h in engine.holds.holds()] == ["preemptor"]


def test_a_hold_rebuilt_from_the_nomination_that_takes_up_the_record_adds_no_second_hold() -> None:
    record = decided_record()
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_job(JobInfo(uid=JOB_B, namespace="ml", name="be-b", annotations={"cellfit.io/preemptions": "1"}))
    # the record's write had not reached the watch: te-1 nominated, its victim terminating
    for body in (running("be-a-0", job_uid="job-a", grace=600), preempted(running("be-b-0", job_uid=JOB_B)), trial()):
        engine.apply_pod(as_pod(body))
    engine.delete_pod("be-b-0")
    engine.apply_pod(as_pod(recorded_trial(record)))
    assert pods_held_for_b(engine) == ["ml/be-b-1"]
