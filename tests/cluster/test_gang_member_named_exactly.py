"""Whether a Job's record of its gang members still to delete (cellfit.io/gang-preempted) names a
member is read from the record whole, by member UID: it was a look for the quoted UID anywhere in
the record's text, which found a member named where its UID is only another field's value (the
node the preemption was on), so the member was never named on its Job before its preemptor's
binding, and missed one whose UID the text escapes, so it was named again."""

from __future__ import annotations

import threading

import msgspec

from scheduler.cluster.cache import ClusterCache
from scheduler.constants import ANNOTATION_GANG_PREEMPTED
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.kube import wire
from scheduler.preemption import gang_records
from scheduler.preemption.resume_records import JobRef
from tests.support.api_double import EventRecordingApi
from tests.support.kube_objects import node

GANG = JobRef(uid="uid-gang", namespace="ml", name="gang")
LEFT = gang_records.LeftMember(by="ml/te-0", node="gpu-a", at=1_000.0)


def cache_watching(record: dict[str, gang_records.LeftMember]) -> ClusterCache:
    """A cache whose Jobs watch shows the gang's Job naming ``record``."""
    cache = ClusterCache(api=EventRecordingApi(nodes=[node("gpu-a")]), engine=ResourceFitEngine(),  # type: ignore[arg-type]
                         lock=threading.RLock(), gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None)
    job = msgspec.convert({"metadata": {"uid": GANG.uid, "namespace": GANG.namespace, "name": GANG.name,
                                        "annotations": {ANNOTATION_GANG_PREEMPTED: gang_records.encode(record)}}}, wire.Job)
    with cache._lock:
        cache._follow_gang_preempted(job)
    return cache


def not_named(cache: ClusterCache, uid: str) -> list[str]:
    with cache._lock:
        return [member for _, added in cache._not_named_yet([(GANG, uid, LEFT)]) for member in added]


def test_a_uid_that_is_only_a_field_of_the_record_is_not_named() -> None:
    cache = cache_watching({"uid-be-0": gang_records.LeftMember(by="ml/te-0", node="uid-be-1", at=1_000.0)})
    assert not_named(cache, "uid-be-1") == ["uid-be-1"]
    assert not_named(cache, "uid-be-0") == []
    cache.stop()


def test_a_uid_the_record_escapes_is_named() -> None:
    cache = cache_watching({'uid-"be"-0': LEFT})
    assert not_named(cache, 'uid-"be"-0') == []
    assert not_named(cache, "uid-be") == ["uid-be"]
    cache.stop()


def test_a_record_that_does_not_read_names_nothing() -> None:
    cache = cache_watching({})
    with cache._lock:
        cache._gang_preempted[GANG.uid] = (GANG, '{"uid-be-0": "not a member"}')
    assert not_named(cache, "uid-be-0") == ["uid-be-0"]
    cache.stop()
