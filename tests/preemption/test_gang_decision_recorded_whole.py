"""FitGpp's record of a decision that took a gang whole names the gang's members on other nodes
(``elsewhere``), so that a replica killed before it deleted them leaves them to the next replica
that lists the pods (scheduler/cluster/gang_recovery.py), which deletes them. Before, the record
named the answered node's victims only: after the ``kill -9``, gang-1 ran on for ever.

Replica A answers the preempt verb (tests/preemption/test_gang_members_elsewhere_deleted.py's
gang) and is killed once its first background write, the record, is made: replica B lists the
cluster as A left it, once the record is older than A's own tries of gang-1 would last
(GANG_RECOVERY_AFTER_SECONDS, here 0: B's list comes that late)."""

from __future__ import annotations

import json

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from tests.cluster.test_gang_member_preemption_retried import gang_api
from tests.cluster.test_gang_preemption_recovered import crashed_state, done, preempted_events, restarted
from tests.cluster.test_preemptor_record_write import preempt, replica


def test_the_record_names_the_gangs_members_elsewhere_and_a_restarted_replica_deletes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    api = gang_api(failures=0, status=500)
    cache, service, _ = replica(api)
    preempt(service, cache)
    (record,) = [w[2]["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] for w in api.writes if w[1].endswith("/pods/te-0/status")]
    written = json.loads(record)
    assert isinstance(written.pop("at"), float)  # the decision's wall-clock time
    assert written == {"node": "gpu-a", "victims": ["uid-be-0"], "elsewhere": ["uid-be-1"], "gangs": ["uid-gang"],
                       "resumes": {"uid-be-0": "uid-gang"},
                       "owed": {"jobs": {"uid-gang": {"namespace": "ml", "name": "gang", "count": 1,
                                                      "holds": {"uid-be-0": "gpu-a", "uid-be-1": "gpu-b"}}},
                                "pods": {"uid-be-0": "ml/gang-0"}}}
    monkeypatch.setattr(cache_module, "GANG_RECOVERY_AFTER_SECONDS", 0.0)
    left = crashed_state(record=record)  # A killed after writing the record, before deleting gang-1
    done(restarted(left))
    assert left.deleted == {"ml/gang-1": "uid-be-1"}
    # gang-0, on the preemptor's node, is told too: A was killed before its Events (the record owes them)
    assert sorted(pod_name for pod_name, _ in preempted_events(left)) == ["gang-0", "gang-1"]
