"""A preemptor's record (``cellfit.io/preemptor-hold``) written by a newer version, with fields
this one does not know, still keeps the node's room for the preemptor: in a rolling upgrade the
old replicas read what the new ones write. The fields known are read and the others ignored.
Before (review25 #11), the record's decoder forbade unknown fields: the record did not read, and
a restarted old replica lost the hold (the resumed pod could take the room the trial pod's
victims freed). Deletions are another matter: a replica finishes a gang preemption
(scheduler/cluster/gang_recovery.py) only from a record it reads whole, as a field it does not
know may narrow what the record orders; the newer replicas finish it."""

from __future__ import annotations

import json

from scheduler.kube.names import filter_offered
from scheduler.preemption import records
from tests.cluster.test_gang_preemption_recovered import RECORD, crashed_state, done, preempted_events, restarted
from tests.preemption.test_holds_recovered import JOB_B, as_pod, preempted, running
from tests.preemption.test_holds_recovered import restarted as restarted_engine
from tests.preemption.test_preemptor_records import holds, recorded, resumed

NEWER = '{"node":"n1","victims":["be-b-0"],"fromTheFuture":{"why":"a later version"}}'


def test_a_record_with_a_field_this_version_does_not_know_reads_its_node_and_victims() -> None:
    assert records.decode(NEWER) == records.PreemptorRecord(node="n1", victims=("be-b-0",))


def test_a_restarted_replica_keeps_the_room_a_newer_versions_record_names() -> None:
    engine = restarted_engine([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded(NEWER)])
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
    engine.delete_pod("be-b-0")  # the victim exits; its Job makes its next pod, resumed
    engine.apply_pod(as_pod(resumed()))
    decision = filter_offered(engine, as_pod(resumed()), ["n1"])
    assert list(decision.feasible) == [] and "kept for ml/te-1" in decision.unresolvable["n1"]


def test_a_newer_versions_gang_record_deletes_nothing_here() -> None:
    newer = json.dumps({**json.loads(RECORD), "onlyMembersOf": ["uid-other"]}, separators=(",", ":"))
    api = crashed_state(record=newer)
    done(restarted(api))
    assert (api.deleted, preempted_events(api)) == ({}, [])
