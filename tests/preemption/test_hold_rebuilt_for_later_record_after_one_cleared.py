"""A standby's hold that followed its record off (the record cleared) is not rebuilt on that
node for the same record or the nomination, but is for the active replica's LATER decision
recorded on the pod for the same node (review24 F2; before, only this replica's own decision or
the pod's deletion lifted the refusal, and after a failover the room FitGpp preempted be-d-0 for
went to any other pod)."""

from __future__ import annotations

from scheduler.kube.names import filter_offered
from tests.preemption.test_holds_recovered import as_pod, preempted, restarted, running, trial, waiter
from tests.preemption.test_preemptor_records import holds, recorded

SECOND = '{"node":"n1","victims":["be-d-0"]}'  # the active replica's later decision, on n1 again


def test_a_later_decision_on_the_same_node_is_rebuilt_after_the_first_record_was_cleared() -> None:
    standby = restarted([running("be-a-0", job_uid="job-a"), recorded()])
    assert holds(standby) == [("n1", "preemptor", ("ml/te-1",))]
    standby.apply_pod(as_pod(trial(nominated=None)))  # the active replica's hold lapsed: record cleared
    assert holds(standby) == []
    # The active replica preempts again for te-1 on n1: be-d-0 leaves n1, te-1 carries the new record.
    standby.apply_pod(as_pod(preempted(running("be-d-0", job_uid="job-d"))))
    standby.apply_pod(as_pod(recorded(SECOND, nominated="n1")))
    assert holds(standby) == [("n1", "preemptor", ("ml/te-1",))], "the standby keeps nothing for the later decision"
    # after a failover: a best-effort pod may take the room be-d-0 was preempted for
    assert list(filter_offered(standby, waiter(), ["n1"]).feasible) == []
