"""c2d8939's room-kept rule does not hold for an opportunistic trial pod under HiveD.

FitGppEngine._room_kept requires, for a GPU pod under a KeepsPreemptorCells engine (HiveD), that
HivedEngine.cells_booked_for(pod) names the hold's node. HiveD books cells only for a guaranteed,
non-gang preemptor (_settle_claims ends the claim of an opportunistic or gang pod: "no quota of
its own to keep"), so for an opportunistic trial pod cells_booked_for is always None and the room
is never "kept". user24b NEW-1 then happens exactly as before the fix: its victim be-1 on gpu-0
has left (cellfit's watch), kube-scheduler's cache still counts it and asks with the other nodes,
and FitGpp takes a second victim (team-b's ob-1 on gpu-3) while gpu-0's 8 GPUs wait free for te-o.

Four V100 nodes (tests/preemption/test_hived_preemptor_quota_hold.py): team-a's be-1 on gpu-0,
be-3 and be-4 on gpu-1; team-b's tb-1 on gpu-2 and opportunistic ob-1 on gpu-3.
"""

from __future__ import annotations

import msgspec

from scheduler.core.model import JobInfo, PodInfo
from tests.preemption.test_hived_fitgpp_candidates import job_pod
from tests.preemption.test_hived_preemptor_quota_hold import PREEMPTED, PROFILE, engine, place


def opportunistic(p: PodInfo) -> PodInfo:
    return msgspec.structs.replace(p, labels={**p.labels, "cellfit.io/priority": "opportunistic"})


def test_an_opportunistic_trial_pod_whose_victim_left_takes_no_second_victim() -> None:
    made = engine()
    be1 = place(made, job_pod("be-1", 8, "team-a", "be-1", "best-effort", grace=10), ["gpu-0"])
    place(made, job_pod("be-3", 4, "team-a", "be-3", "best-effort", grace=30), ["gpu-1"])
    place(made, job_pod("be-4", 4, "team-a", "be-4", "best-effort", grace=40), ["gpu-1"])
    place(made, job_pod("tb-1", 8, "team-b", "tb-1", "best-effort", grace=30), ["gpu-2"])
    ob1 = place(made, opportunistic(job_pod("ob-1", 8, "team-b", "ob-1", "best-effort", grace=30)), ["gpu-3"])
    te = msgspec.structs.replace(opportunistic(job_pod("te-o", 8, "team-a", "te-o", "trial")), scheduler_name=PROFILE)
    made.apply_job(JobInfo(uid="uid-te-o", namespace="ns", name="te-o"))
    made.apply_pod(te)
    first = made.decide_preemption(te, {"gpu-1": ["be-3", "be-4"], "gpu-0": ["be-1"]}, {})
    assert first.victims == {"gpu-0": ["be-1"]}, first.refusal
    made.apply_pod(msgspec.structs.replace(be1, terminating=True, disruption=PREEMPTED))
    made.delete_pod(be1.uid)  # cellfit's watch: gone; kube-scheduler's cache still counts it on gpu-0
    second = made.decide_preemption(te, {"gpu-1": ["be-3", "be-4"], "gpu-2": ["tb-1"], "gpu-3": [ob1.uid]}, {})
    assert second.victims == {}, second.victims
    assert made.preemptions_of_job("uid-ob-1") == 0
