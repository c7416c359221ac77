"""A restart of cellfit at any moment of a FitGpp preemption rebuilds the resume holds the running
service had: the victim's Job records them (``cellfit.io/resume-holds``, resume_records.py).

Before, the only evidence of an exited victim was the record on its pending preemptor
(``resumes``), which the preemptor's binding empties: a restart after the trial pod was bound,
its victim gone and the victim Job's next pod still pending, kept no room for that pod, and any
best-effort pod whose backoff ended first took it.

Replica A decides (the scene of test_holds_recovered.py: node n1, 8 GPUs; best-effort be-a-0 and
be-b-0, 4 GPUs each; trial te-1 takes be-b-0), and its driver's writes of the Job's record land on
the Job. At each moment a replica B is started from the cluster as A left it (the pods as the
watch shows them, the Jobs with their annotations): B keeps the holds A keeps, and none once A's
ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from scheduler.constants import ANNOTATION_PREEMPTIONS, ANNOTATION_PREEMPTOR_HOLD, ANNOTATION_RESUME_HOLDS
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings, resume_records
from scheduler.preemption.engine import FitGppEngine
from scheduler.preemption.resume_records import JobRef
from tests.preemption.test_holds import FakeClock
from tests.preemption.test_holds_recovered import BE, JOB_B, NODE, RESUMED_PRIORITY, as_pod, preempted, running, trial, waiter
from tests.support import kube_objects


@dataclass
class Cluster:
    """The pods and Job b as the API server holds them, which replica A's writes change."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    job_annotations: dict[str, str] = field(default_factory=dict)
    writes: list[tuple[Mapping[str, str], tuple[str, ...]]] = field(default_factory=list)

    def write_resume_holds(self, job: JobRef, added: Mapping[str, str], ended: tuple[str, ...]) -> None:
        assert job == JobRef(uid=JOB_B, namespace="ml", name="be-b")
        self.writes.append((dict(added), ended))
        wanted = resume_records.updated(self.job_annotations.get(ANNOTATION_RESUME_HOLDS), added=added, ended=ended)
        if wanted is not None:
            self.job_annotations.pop(ANNOTATION_RESUME_HOLDS, None)
            if wanted:
                self.job_annotations[ANNOTATION_RESUME_HOLDS] = resume_records.encode(wanted)

    def job(self) -> JobInfo:
        return JobInfo(uid=JOB_B, namespace="ml", name="be-b", annotations=dict(self.job_annotations))


def resumed_pod(name: str = "be-b-1") -> dict[str, Any]:
    return kube_objects.pod(name, uid=name, gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B)


def bound(body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["nodeName"] = "n1"
    body["status"]["phase"] = "Running"
    return body


class Scene:
    """Replica A and the cluster it writes to; A is fed every change as its watch would be."""

    def __init__(self, *, clock: FakeClock | None = None, hold_seconds: float | None = None) -> None:
        self.cluster = Cluster()
        self.a = self.replica(clock=clock, hold_seconds=hold_seconds)
        self.a.follow_resume_holds(write=self.cluster.write_resume_holds)
        self.show(running("be-a-0", job_uid="job-a", grace=600))  # FitGpp takes be-b-0's short grace period
        self.show(running("be-b-0", job_uid=JOB_B))
        self.show(trial(nominated=None))
        self.a.apply_job(self.cluster.job())

    @staticmethod
    def replica(*, clock: FakeClock | None = None, hold_seconds: float | None = None) -> FitGppEngine:
        engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=hold_seconds, clock=clock)
        engine.apply_node(NODE)
        return engine

    def show(self, body: dict[str, Any]) -> None:
        self.cluster.pods[body["metadata"]["uid"]] = body
        self.a.apply_pod(as_pod(body))

    def gone(self, uid: str) -> None:
        del self.cluster.pods[uid]
        self.a.delete_pod(uid)

    def decide(self) -> None:
        choice = self.a.decide_preemption(as_pod(trial(nominated=None)), {"n1": ["be-a-0", "be-b-0"]}, {})
        assert choice.victims == {"n1": ["be-b-0"]} and choice.preemptor_record is not None
        # The driver writes what the choice says: the record on te-1, the count and the holds on b.
        for job, holds in choice.resume_holds:
            self.cluster.write_resume_holds(job, holds, ())
        recorded = trial(nominated="n1")
        recorded["metadata"].setdefault("annotations", {})[ANNOTATION_PREEMPTOR_HOLD] = choice.preemptor_record
        self.show(recorded)
        self.cluster.job_annotations[ANNOTATION_PREEMPTIONS] = "1"
        self.a.apply_job(self.cluster.job())

    def trial_bound(self) -> None:
        body = bound(trial(nominated=None))
        body["metadata"]["annotations"] = {ANNOTATION_PREEMPTOR_HOLD: ""}  # the binding empties the record
        self.show(body)

    def trial_over(self) -> None:
        """be-b-0 exited, te-1 was bound, ran and ended."""
        self.gone("be-b-0")
        self.trial_bound()
        self.gone("te-1")

    def restarted(self, *, jobs_first: bool = False) -> FitGppEngine:
        """Replica B, fed the cluster as a relist feeds it (the Jobs' list may come first)."""
        b = self.replica()
        if jobs_first:
            b.apply_job(self.cluster.job())
        for body in sorted(self.cluster.pods.values(), key=lambda p: p["spec"].get("nodeName") is None):  # bound pods first
            b.apply_pod(as_pod(body))
        if not jobs_first:
            b.apply_job(self.cluster.job())
        return b


def holds_of(engine: FitGppEngine) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(hold.node, hold.kind, hold.pods) for hold in engine.holds.holds()]


def test_the_decision_records_its_victims_resume_holds_on_their_job() -> None:
    scene = Scene()
    scene.decide()
    assert scene.cluster.job_annotations[ANNOTATION_RESUME_HOLDS] == '{"be-b-0":"n1"}'


def test_a_restart_after_the_trial_pod_was_bound_keeps_the_room_for_the_resumed_pod() -> None:
    scene = Scene()
    scene.decide()
    scene.show(preempted(running("be-b-0", job_uid=JOB_B)))
    scene.gone("be-b-0")
    scene.trial_bound()
    scene.show(resumed_pod())  # the Job controller's new pod, waiting out its backoff
    b = scene.restarted()
    assert holds_of(b) == holds_of(scene.a) == [("n1", "resume", ("ml/be-b-1",))]
    scene.gone("te-1")  # the trial ends; b-wait's backoff ends first
    b = scene.restarted()
    decision = filter_offered(b, waiter(), ["n1"])
    assert list(decision.feasible) == []
    assert "kept for ml/be-b-1, of a best-effort Job preempted there" in decision.unresolvable["n1"]
    assert list(filter_offered(b, as_pod(resumed_pod()), ["n1"]).feasible) == ["n1"]


def resume_holds_of(engine: FitGppEngine) -> list[tuple[str, str, tuple[str, ...]]]:
    return [hold for hold in holds_of(engine) if hold[1] == "resume"]


def test_a_restart_at_any_moment_rebuilds_the_resume_holds_the_running_replica_has() -> None:
    """The preemptor's own hold is rebuilt from its record once a victim leaves (test_preemptor_records.py)."""
    scene = Scene()
    scene.decide()
    seen = []

    def compare(moment: str) -> None:
        for jobs_first in (False, True):
            assert resume_holds_of(scene.restarted(jobs_first=jobs_first)) == resume_holds_of(scene.a), (moment, jobs_first)
        seen.append((moment, holds_of(scene.a)))

    scene.show(resumed_pod())  # pending from the start: every hold of b shows in the listing
    compare("decided, the victim not deleted yet")
    scene.show(preempted(running("be-b-0", job_uid=JOB_B)))
    compare("the victim terminating")
    scene.gone("be-b-0")
    compare("the victim gone, te-1 pending")
    scene.trial_bound()
    compare("te-1 bound")
    scene.gone("te-1")
    compare("te-1 finished and deleted")
    assert [holds for _, holds in seen] == [
        [("n1", "preemptor", ("ml/te-1",)), ("n1", "resume", ("ml/be-b-1",))],
        [("n1", "preemptor", ("ml/te-1",)), ("n1", "resume", ("ml/be-b-1",))],
        [("n1", "preemptor", ("ml/te-1",)), ("n1", "resume", ("ml/be-b-1",))],
        [("n1", "resume", ("ml/be-b-1",))],
        [("n1", "resume", ("ml/be-b-1",))],
    ]


def test_the_hold_ends_on_the_job_when_the_replica_that_bound_its_pod_sees_the_binding() -> None:
    scene = Scene()
    scene.decide()
    scene.trial_over()
    resumed = as_pod(resumed_pod())
    scene.show(resumed_pod())
    scene.a.reserve(resumed, "n1")  # the bind verb
    assert ANNOTATION_RESUME_HOLDS in scene.cluster.job_annotations  # a binding may still fail
    scene.show(bound(resumed_pod()))
    assert scene.cluster.writes[-1] == ({}, ("be-b-0",))
    assert ANNOTATION_RESUME_HOLDS not in scene.cluster.job_annotations
    scene.show(resumed_pod("be-b-2"))  # another pod of b, pending: nothing is kept for it any more
    assert holds_of(scene.restarted()) == holds_of(scene.a) == []


def test_a_failed_binding_leaves_the_record_and_gives_the_hold_back() -> None:
    scene = Scene()
    scene.decide()
    scene.gone("be-b-0")
    scene.show(resumed_pod())
    scene.a.reserve(as_pod(resumed_pod()), "n1")
    scene.a.unreserve("be-b-1")
    assert scene.cluster.job_annotations[ANNOTATION_RESUME_HOLDS] == '{"be-b-0":"n1"}'
    scene.a.reserve(as_pod(resumed_pod()), "n1")  # kube-scheduler's next try
    scene.show(bound(resumed_pod()))
    assert ANNOTATION_RESUME_HOLDS not in scene.cluster.job_annotations


def waiting_to_resume(clock: FakeClock) -> Scene:
    """The trial over (be-b-0 gone, te-1 bound and ended), b's next pod be-b-1 pending; holds
    give up after 60 s of keeping pods off."""
    scene = Scene(clock=clock, hold_seconds=60)
    scene.decide()
    scene.trial_over()
    scene.show(resumed_pod())
    return scene


def leader_gives_up(scene: Scene, clock: FakeClock) -> None:
    assert list(filter_offered(scene.a, waiter(), ["n1"]).feasible) == []  # kept off: the clock starts
    clock.now += 61  # kube-scheduler never places be-b-1 there (a taint, say)
    assert list(filter_offered(scene.a, waiter(), ["n1"]).feasible) == ["n1"]


def test_a_hold_that_gives_up_is_taken_off_the_job_and_not_rebuilt() -> None:
    clock = FakeClock()
    scene = waiting_to_resume(clock)
    leader_gives_up(scene, clock)
    assert scene.cluster.writes[-1] == ({}, ("be-b-0",))
    assert holds_of(scene.restarted()) == []


def test_a_hold_rebuilt_after_a_restart_still_gives_up_and_is_taken_off() -> None:
    scene = Scene()
    scene.decide()
    scene.trial_over()
    scene.show(resumed_pod())
    clock = FakeClock()
    b = Scene.replica(clock=clock, hold_seconds=60)
    b.follow_resume_holds(write=scene.cluster.write_resume_holds)
    for body in scene.cluster.pods.values():
        b.apply_pod(as_pod(body))
    b.apply_job(scene.cluster.job())
    assert list(filter_offered(b, waiter(), ["n1"]).feasible) == []
    clock.now += 61
    assert list(filter_offered(b, waiter(), ["n1"]).feasible) == ["n1"]
    assert ANNOTATION_RESUME_HOLDS not in scene.cluster.job_annotations


def test_a_victim_listed_after_its_job_waits_for_its_exit_before_its_hold_may_idle_out() -> None:
    """The Jobs' list came first: the victim, not shown yet, was counted gone; shown leaving, its
    Job's next pod is not due until it exits (else the hold idles out during its grace period)."""
    scene = Scene()
    scene.decide()
    scene.show(preempted(running("be-b-0", job_uid=JOB_B)))
    clock = FakeClock()
    b = Scene.replica(clock=clock, hold_seconds=60)
    b.apply_job(scene.cluster.job())
    for body in scene.cluster.pods.values():
        b.apply_pod(as_pod(body))
    assert holds_of(b) == [("n1", "preemptor", ("ml/te-1",))]  # b has no pod pending yet
    clock.now += 600  # be-b-0 checkpoints for a long time
    assert holds_of(b) == [("n1", "preemptor", ("ml/te-1",))]
    b.delete_pod("be-b-0")
    b.apply_pod(as_pod(resumed_pod()))
    assert ("n1", "resume", ("ml/be-b-1",)) in holds_of(b)


def test_every_evidence_of_one_victim_gives_its_job_one_hold() -> None:
    scene = Scene()
    scene.decide()
    scene.show(preempted(running("be-b-0", job_uid=JOB_B)))  # the victim's condition, te-1's record, b's record
    b = scene.restarted()
    b.delete_pod("be-b-0")
    for name in ("be-b-1", "be-b-2"):
        b.apply_pod(as_pod(resumed_pod(name)))
    b.apply_job(scene.cluster.job())  # the Job shown again
    held = [pods for _, kind, pods in holds_of(b) if kind == "resume"]
    assert held == [("ml/be-b-1",)]


def test_a_deleted_job_gets_no_hold_from_its_record() -> None:
    scene = Scene()
    scene.decide()
    scene.gone("be-b-0")
    scene.trial_bound()
    b = Scene.replica()
    b.apply_pod(as_pod(running("be-b-5", job_uid=JOB_B)))  # a pod of b still running when b is deleted
    b.delete_job(JOB_B)
    b.apply_job(scene.cluster.job())  # a late event of the deleted Job
    b.apply_pod(as_pod(resumed_pod()))
    assert holds_of(b) == []


def test_a_record_that_does_not_read_gives_no_hold() -> None:
    b = Scene.replica()
    b.apply_pod(as_pod(resumed_pod()))
    b.apply_job(JobInfo(uid=JOB_B, namespace="ml", name="be-b", annotations={ANNOTATION_RESUME_HOLDS: '["be-b-0"]'}))
    assert holds_of(b) == []


def standby_of(scene: Scene) -> FitGppEngine:
    """A replica that watches the same cluster (kube-scheduler beside it does not lead): fed the
    changes since, it keeps the holds from the Job's record."""
    return scene.restarted()


def test_a_standbys_hold_ends_when_the_replica_where_it_gave_up_takes_it_off_the_job() -> None:
    clock = FakeClock()
    scene = waiting_to_resume(clock)
    standby = standby_of(scene)
    assert resume_holds_of(standby) == [("n1", "resume", ("ml/be-b-1",))]
    leader_gives_up(scene, clock)  # and takes the victim off b's record
    standby.apply_job(scene.cluster.job())
    assert holds_of(standby) == []  # after a failover it keeps nothing the leader gave up
    assert list(filter_offered(standby, waiter(), ["n1"]).feasible) == ["n1"]


def test_a_standby_ends_one_hold_for_one_binding_however_its_victims_came() -> None:
    """Both pods of b on n1 taken for an 8-GPU trial pod (the fallback), two holds; the leader
    binds one resumed pod: the standby, which saw the binding and then the record without one
    victim, keeps the other hold, as the leader does."""
    scene = Scene()
    scene.gone("be-a-0")
    scene.show(running("be-b-9", job_uid=JOB_B))
    big = trial(gpus=8, nominated=None)
    scene.show(big)
    choice = scene.a.decide_preemption(as_pod(big), {"n1": ["be-b-0", "be-b-9"]}, {})
    assert sorted(choice.victims["n1"]) == ["be-b-0", "be-b-9"], choice.refusal
    for job, holds in choice.resume_holds:
        scene.cluster.write_resume_holds(job, holds, ())
    scene.a.apply_job(scene.cluster.job())
    scene.gone("be-b-0")
    scene.gone("be-b-9")
    scene.gone("te-1")  # deleted: b's pods resume
    standby = standby_of(scene)
    for name in ("be-b-1", "be-b-2"):
        scene.show(resumed_pod(name))
        standby.apply_pod(as_pod(resumed_pod(name)))
    assert resume_holds_of(standby) == resume_holds_of(scene.a) == [("n1", "resume", ("ml/be-b-1", "ml/be-b-2"))]
    scene.a.reserve(as_pod(resumed_pod("be-b-2")), "n1")
    scene.show(bound(resumed_pod("be-b-2")))
    standby.apply_pod(as_pod(bound(resumed_pod("be-b-2"))))
    standby.apply_job(scene.cluster.job())
    assert resume_holds_of(standby) == resume_holds_of(scene.a) == [("n1", "resume", ("ml/be-b-1",))]
    assert holds_of(scene.restarted()) == holds_of(scene.a)


def test_a_deleted_job_gets_no_hold_back_from_the_pending_preemptors_record_once_its_pods_are_gone() -> None:
    """review27 R3: the engine forgot a deleted Job once its last pod had gone, and the next event
    of the pending preemptor (its record's ``resumes`` names the Job) gave it its hold back, kept
    for ever with resumeHoldSeconds null."""
    scene = Scene()
    scene.decide()
    scene.show(preempted(running("be-b-0", job_uid=JOB_B)))
    scene.a.delete_job(JOB_B)  # the user deletes Job b
    scene.gone("be-b-0")  # its pod goes with it
    scene.a.apply_pod(as_pod(scene.cluster.pods["te-1"]))  # te-1, still pending with its record
    assert [hold.kind for hold in scene.a.holds.holds()] == ["preemptor"]  # te-1's own, as before
    assert JOB_B not in scene.a.holds._displaced
