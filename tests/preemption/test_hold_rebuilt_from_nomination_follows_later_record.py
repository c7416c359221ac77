"""A standby that rebuilt te-1's hold from the nomination (the victims seen leaving and te-1
nominated to n1 before the record's write reached its watch: kube-scheduler's nomination and
deletions and the replica's record patch are separate writes) takes the record up when it arrives
on the same node, so when the active replica's hold lapses and takes the record off, the
standby's hold ends too (review24 F9; before, it kept the room with no record to say why, the
failover case 1025666 meant to fix)."""

from __future__ import annotations

from tests.preemption.test_holds_recovered import JOB_B, as_pod, preempted, restarted, running, trial
from tests.preemption.test_preemptor_records import holds, recorded


def test_a_hold_rebuilt_from_the_nomination_follows_the_record_that_arrives_after() -> None:
    standby = restarted([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), trial(nominated="n1")])
    assert holds(standby) == [("n1", "preemptor", ("ml/te-1",))]  # from the nomination
    standby.apply_pod(as_pod(recorded(nominated="n1")))  # the record's write reaches the watch
    assert holds(standby) == [("n1", "preemptor", ("ml/te-1",))]
    standby.apply_pod(as_pod(trial(nominated="n1")))  # the active replica's hold lapsed: record taken off
    assert holds(standby) == [], "the standby keeps the room after the record is gone"
