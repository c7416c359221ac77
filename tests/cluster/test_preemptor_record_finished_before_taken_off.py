"""A pending preemptor's record is taken off when its hold gives up (its node gone, lapsed, stuck
victims). The record also says what the replica that decided writes after it (``owed``: the
victims' Jobs' counts and resume holds, their Preempted Events), which a replica that read it only
through its watch finishes only on a list or at the preemptor's binding: taking it off first lost
them for good (review27 R5). The Job was preempted past maxPreemptions after the next restart,
its next pod given the best-effort PriorityClass. Now the replica that takes the record off
finishes it first.
"""

from __future__ import annotations

import pytest

from scheduler.constants import ANNOTATION_PREEMPTIONS, ANNOTATION_PREEMPTOR_HOLD
from scheduler.kube.wire import annotation_pointer
from tests.cluster.test_gang_preemption_recovered import done
from tests.cluster.test_preemption_finished_after_kill import ClusterApi, killed_after_the_record, no_pauses
from tests.cluster.test_preemptor_record_write import replica, trial_pod, victim_pod
from tests.cluster.test_resume_holds_write import shown
from tests.support.kube_objects import node

__all__ = ["no_pauses"]  # the fixture, used here too


@pytest.mark.usefixtures("no_pauses")
def test_what_the_killed_replica_owed_is_written_before_its_record_is_taken_off() -> None:
    record = killed_after_the_record()
    # B watched before A's decision (no list of its reads the record); it sees te-0's record, then gpu-a goes.
    api = ClusterApi(nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[])
    cache, _, engine = replica(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    cache._apply_pod(shown(victim_pod(leaving=True)))
    cache._apply_pod(shown(trial_pod(annotations={ANNOTATION_PREEMPTOR_HOLD: record})))
    assert engine.preemptions_of_job("uid-be") == 1  # counted in memory, not written
    cache._forget_node("gpu-a")  # the hold gives up: its record is taken off
    done(cache)
    (cleared,) = [w for w in api.writes if w[1].endswith("/pods/te-0/status") and w[3] == "application/json-patch+json"]
    assert cleared[2][-1] == {"op": "remove", "path": annotation_pointer(ANNOTATION_PREEMPTOR_HOLD)}
    # Nothing reads the record any more (no binding, no list will): the count is written now.
    assert api.job_annotations.get(ANNOTATION_PREEMPTIONS) == "1"
    assert [e["pod_name"] for e in api.events if e["reason"] == "Preempted"] == ["be-0"]
