"""The resume holds a FitGpp decision gives are recorded on the victims' Jobs for every victim, and
rebuilt from them under HiveD as well (``cellfit.io/resume-holds``; test_resume_hold_outlives_binding.py
has the scene without HiveD).

Before, the preemptor's record (``resumes``) named only the victims on the node kube-scheduler
deletes: a gang taken whole left its members on other nodes without any evidence once they had
exited, and a restart gave their Job no hold there. And under HiveD a preemptor whose cells were
booked when its record was read gave the exited victims' Jobs no hold either (the booking keeps
the preemptor's room, and the rebuild stopped there).
"""

from __future__ import annotations

import msgspec

from scheduler.cells import HivedEngine
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD, ANNOTATION_RESUME_HOLDS
from scheduler.core.model import JobInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings, resume_records
from scheduler.preemption.engine import FitGppEngine, VictimChoice
from scheduler.preemption.resume_records import JobRef
from tests.cells.helpers import node, pod, schedule
from tests.preemption.test_fitgpp_takes_gangs_whole import NODES as GANG_NODES, config as gang_config, scene as gang_scene, trial as gang_trial
from tests.preemption.test_hived_fitgpp_candidates import job_pod
from tests.preemption.test_hived_preemptor_quota_hold import NODES, PREEMPTED, PROFILE, engine, place


def job_of(choice: VictimChoice, ref: JobRef) -> JobInfo:
    """The victim Job as the driver leaves it once it has written the choice's holds on it."""
    (holds,) = [holds for job, holds in choice.resume_holds if job == ref]
    return JobInfo(uid=ref.uid, namespace=ref.namespace, name=ref.name, annotations={ANNOTATION_RESUME_HOLDS: resume_records.encode(holds)})


def test_a_gang_taken_whole_records_its_members_on_every_node() -> None:
    choice = gang_scene().decide_preemption(gang_trial("te-q"), {"n-a": ["gang-bert-0"]}, {})
    assert choice.elsewhere == {"n-b": ["gang-bert-1"]}
    assert choice.resume_holds == ((JobRef(uid="uid-gang-bert", namespace="ns", name="gang-bert"),
                                    {"gang-bert-0": "n-a", "gang-bert-1": "n-b"}),)


def test_after_a_restart_the_gangs_job_keeps_its_room_on_the_other_node_too() -> None:
    choice = gang_scene().decide_preemption(gang_trial("te-q"), {"n-a": ["gang-bert-0"]}, {})
    # Every member has exited and the trial pod is bound: the relist shows the gang's next pods.
    restarted = FitGppEngine(HivedEngine.from_config(gang_config()), settings=FitGppSettings())
    for name in GANG_NODES:
        restarted.apply_node(node(name))
    restarted.apply_job(job_of(choice, JobRef(uid="uid-gang-bert", namespace="ns", name="gang-bert")))
    for name in ("gang-bert-2", "gang-bert-3"):
        restarted.apply_pod(pod(name, 8, "vc-a", gang=("gang-bert", 2)))
    assert sorted((h.node, h.kind) for h in restarted.holds.holds()) == [("n-a", "resume"), ("n-b", "resume")]


def decided_under_hived() -> tuple[FitGppEngine, VictimChoice]:
    """test_hived_preemptor_quota_hold.py's scene: te-2 (team-a, 8 GPUs) takes be-3 and be-4 on gpu-1."""
    made = engine()
    place(made, job_pod("be-1", 8, "team-a", "be-1", "best-effort", grace=10), ["gpu-0"])
    place(made, job_pod("be-3", 4, "team-a", "be-3", "best-effort", grace=30), ["gpu-1"])
    place(made, job_pod("be-4", 4, "team-a", "be-4", "best-effort", grace=40), ["gpu-1"])
    te2 = msgspec.structs.replace(job_pod("te-2", 8, "team-a", "te-2", "trial"), scheduler_name=PROFILE)
    made.apply_job(JobInfo(uid="uid-te-2", namespace="ns", name="te-2"))
    made.apply_pod(te2)
    choice = made.decide_preemption(te2, {"gpu-1": ["be-3", "be-4"]}, {})
    assert {node: sorted(uids) for node, uids in choice.victims.items()} == {"gpu-1": ["be-3", "be-4"]}, choice.refusal
    return made, choice


def restarted_under_hived(choice: VictimChoice, *, te2_bound: bool) -> FitGppEngine:
    """A replica started once be-3 and be-4 have exited, te-2 pending with its record or bound."""
    made = engine()
    place(made, job_pod("be-1", 8, "team-a", "be-1", "best-effort", grace=10), ["gpu-0"])
    te2 = msgspec.structs.replace(job_pod("te-2", 8, "team-a", "te-2", "trial"), scheduler_name=PROFILE)
    made.apply_job(JobInfo(uid="uid-te-2", namespace="ns", name="te-2"))
    if te2_bound:
        placed = schedule(made, te2, ["gpu-1"])  # type: ignore[arg-type]
        assert placed is not None
        made.apply_pod(msgspec.structs.replace(placed, phase="Running", annotations={**placed.annotations, ANNOTATION_PREEMPTOR_HOLD: ""}))
    else:
        assert choice.preemptor_record is not None
        made.apply_pod(msgspec.structs.replace(te2, annotations={ANNOTATION_PREEMPTOR_HOLD: choice.preemptor_record}))
    for job in ("be-3", "be-4"):
        made.apply_job(job_of(choice, JobRef(uid=f"uid-{job}", namespace="ns", name=job)))
        made.apply_pod(job_pod(f"{job}-next", 4, "team-a", job, "best-effort"))
    return made


def test_under_hived_a_restart_with_the_preemptors_cells_booked_gives_the_victims_jobs_their_holds() -> None:
    _, choice = decided_under_hived()
    made = restarted_under_hived(choice, te2_bound=False)
    assert made.inner.cells_booked_for("te-2") == "gpu-1"  # type: ignore[attr-defined]  # its booking keeps its room
    assert sorted((h.node, h.kind, h.pods) for h in made.holds.holds()) == [
        ("gpu-1", "preemptor", ("ns/te-2",)), ("gpu-1", "resume", ("ns/be-3-next",)), ("gpu-1", "resume", ("ns/be-4-next",)),
    ]


def test_under_hived_a_restart_after_the_preemptor_bound_keeps_the_room_for_the_victims_next_pods() -> None:
    _, choice = decided_under_hived()
    made = restarted_under_hived(choice, te2_bound=True)
    assert sorted((h.node, h.kind, h.pods) for h in made.holds.holds()) == [
        ("gpu-1", "resume", ("ns/be-3-next",)), ("gpu-1", "resume", ("ns/be-4-next",)),
    ]
    made.delete_pod("te-2")  # the trial ends
    other = job_pod("be-9", 4, "team-a", "be-9", "best-effort")
    made.apply_job(JobInfo(uid="uid-be-9", namespace="ns", name="be-9"))
    made.apply_pod(other)
    kept = filter_offered(made, other, ["gpu-1"])
    assert list(kept.feasible) == [] and "kept for ns/be-3-next, ns/be-4-next" in kept.unresolvable["gpu-1"], kept.unresolvable
    assert list(filter_offered(made, job_pod("be-3-next", 4, "team-a", "be-3", "best-effort"), NODES).feasible) != []


def test_under_hived_a_preemptor_booked_before_its_victims_jobs_are_read_still_gives_them_their_holds() -> None:
    """A decision of a replica that wrote no Job record: the preemptor's ``resumes`` alone name the
    exited victims' Jobs. The relist showed te-2's victims leaving and te-2 before their Jobs; they
    left (HiveD booked te-2's cells), then te-2 was shown again."""
    _, choice = decided_under_hived()
    assert choice.preemptor_record is not None
    made = engine()
    place(made, job_pod("be-1", 8, "team-a", "be-1", "best-effort", grace=10), ["gpu-0"])
    te2 = msgspec.structs.replace(job_pod("te-2", 8, "team-a", "te-2", "trial"), scheduler_name=PROFILE,
                                  annotations={ANNOTATION_PREEMPTOR_HOLD: choice.preemptor_record})
    for job in ("be-3", "be-4"):  # bound pods come first in a relist
        victim = job_pod(job, 4, "team-a", job, "best-effort")
        made.apply_pod(msgspec.structs.replace(victim, node_name="gpu-1", phase="Running", terminating=True, disruption=PREEMPTED))
    made.apply_pod(te2)
    for job in ("be-3", "be-4"):
        made.delete_pod(job)
    assert made.inner.cells_booked_for("te-2") == "gpu-1"  # type: ignore[attr-defined]
    for job in ("be-3", "be-4"):
        made.apply_job(JobInfo(uid=f"uid-{job}", namespace="ns", name=job, annotations={"cellfit.io/preemptions": "1"}))
        made.apply_pod(job_pod(f"{job}-next", 4, "team-a", job, "best-effort"))
    made.apply_pod(te2)
    assert sorted((h.kind, h.pods) for h in made.holds.holds() if h.kind == "resume") == [
        ("resume", ("ns/be-3-next",)), ("resume", ("ns/be-4-next",)),
    ]
