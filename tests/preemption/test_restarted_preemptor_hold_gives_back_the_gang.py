"""A replica killed between FitGpp's gang decision and its background deletion of the member on
the other node (the case scheduler/cluster/gang_recovery.py exists for) left, under HiveD, the
preemptor's node booked for the preempted gang after a restart (review28 #2): the restarted
replica recovers the gang from the surviving member's bind-info, its slot on the preemptor's node
(its exited member's) booked again, podless, for the gang's next pod. The trial pod, its victims
gone, was refused everywhere ("quota exhausted") and the gang's replacement was offered that
node, until gang recovery deleted the member ~5 minutes later. Now the preemptor hold rebuilt
from the record gives the gangs it names back to HiveD, as the decision did.

FitGppEngine around the real HivedEngine (test_preempted_gang_gives_back_its_slots.py's scene):
n-a, n-b (8 GPUs), vc-a's quota both; gang-x (2 x 8 GPUs) fills them; trial te-g (8 GPUs). The
restarted replica reads the Job as the killed one left it: its count raised, with (as since
7bdcd70) and without its record of the resume holds.
"""

from __future__ import annotations

import msgspec
import pytest

from scheduler.cells import HivedEngine
from scheduler.constants import ANNOTATION_PREEMPTIONS, ANNOTATION_PREEMPTOR_HOLD, ANNOTATION_RESUME_HOLDS
from scheduler.core.model import JobInfo, PodInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings, resume_records
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node, pod
from tests.preemption.test_fitgpp_takes_gangs_whole import config, trial
from tests.preemption.test_preempted_gang_gives_back_its_slots import NODES, scene


def restarted_after_the_answered_member_exited(*, job_record: bool) -> tuple[FitGppEngine, PodInfo, str]:
    engine, running = scene()
    te = msgspec.structs.replace(trial("te-g"), scheduler_name="cellfit")  # cellfit's profile, as live
    choice = engine.decide_preemption(te, {running[0].node_name or "": [running[0].uid]}, {})
    (node_name,) = choice.victims
    assert set(choice.victim_uids) == {"gang-x-0", "gang-x-1"} and choice.preemptor_record is not None
    other = next(m for m in running if m.node_name != node_name)
    # Killed before marking or deleting `other`; kube-scheduler deleted the answered member, which
    # exited. A new replica lists: `other` still runs, te-g carries its record.
    annotations = {ANNOTATION_PREEMPTIONS: "1"}
    if job_record:
        ((_, holds),) = choice.resume_holds
        annotations[ANNOTATION_RESUME_HOLDS] = resume_records.encode(dict(holds))
    restarted = FitGppEngine(HivedEngine.from_config(config(NODES)), settings=FitGppSettings())
    for name in NODES:
        restarted.apply_node(node(name))
    restarted.apply_job(JobInfo(uid="uid-gang-x", namespace="ns", name="gang-x", parallelism=2, completions=2, annotations=annotations))
    restarted.apply_pod(other)
    restarted.apply_pod(msgspec.structs.replace(te, annotations={**te.annotations, ANNOTATION_PREEMPTOR_HOLD: choice.preemptor_record}))
    return restarted, te, node_name


@pytest.mark.parametrize("job_record", [False, True], ids=["job-count-only", "job-resume-holds-recorded"])
def test_the_preemptor_gets_the_node_its_victims_left_after_the_restart(job_record: bool) -> None:
    restarted, te, node_name = restarted_after_the_answered_member_exited(job_record=job_record)
    assert list(filter_offered(restarted, te, NODES).feasible) == [node_name]


@pytest.mark.parametrize("job_record", [False, True], ids=["job-count-only", "job-resume-holds-recorded"])
def test_the_preempted_gangs_replacement_does_not_take_the_preemptors_node(job_record: bool) -> None:
    restarted, _, node_name = restarted_after_the_answered_member_exited(job_record=job_record)
    again = pod("gang-x-0-new", 8, "vc-a", gang=("gang-x", 2))
    assert node_name not in list(filter_offered(restarted, again, NODES).feasible)
