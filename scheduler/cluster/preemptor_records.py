"""FitGpp's decision written on its preemptor (annotation ``cellfit.io/preemptor-hold``,
scheduler/preemption/records.py), so that a restarted replica keeps the room for it.

Written by the replica whose preempt verb decided, whether it leads or not (every replica
answers its own kube-scheduler), on the cache's writer thread after the answer: the verb never
waits for the API server. Like HiveD's reclaim record (stranded.py's ``ReclaimRecords``), the
write goes through the pod's status subresource, which takes a pod's annotations too (the one
power over pods' objects cellfit's ClusterRole holds beyond deleting them), and is guarded by
the pod's UID, so a pod re-created under the name is left alone.

Cleared by the replica whose hold for the pod ended without a binding (it lapsed after
``resumeHoldSeconds`` of keeping pods off, its wait for pods stuck leaving ran out, or its node is
gone; holds.py), in the background as well, once what the record owes is finished (below: that
replica may have seen the record only through its watch, and nothing else would finish it) and
any gang member it names elsewhere still running named on its Job (``write_gang_preempted``): a
record left on the pod would have each later restart keep the node's room for it again, for a
pod that may never go there. That replica, not the leader: a hold ends
where it keeps pods off, which is the replica beside the active kube-scheduler, and the leader's
own hold, rebuilt from the record and never asked to keep a pod off, never ends. The patch takes
the record off only while the pod carries exactly the record that hold stood for, so a later
decision recorded since (another replica's, elsewhere) stays. Holds live in each replica's
memory: every other replica's hold for that record (a standby's, rebuilt from it, or the
deciding replica's) ends as its watch shows the record gone (scheduler/preemption/holds.py,
``RoomHolds._follow_record``), so none keeps the room again after a failover. A record the
preemptor's binding left on it, a gang member it names on another node still running
(scheduler/preemption/bound_records.py), is cleared the same way once none of those members runs:
by each replica whose watch shows the last of them leave, and by a relist that finds none of them
running (gang_recovery.py); the first patch takes it off, the others find it gone.

The members of a gang FitGpp took whole still to delete on other nodes are recorded on the gang's
Job too (annotation ``cellfit.io/gang-preempted``, scheduler/preemption/gang_records.py,
:func:`write_gang_preempted`), which outlives the preemptor's record (the trial pod may finish,
or its hold give up, before the record is old enough for gang recovery to act on); written and
taken off as the resume holds' record is, below. The replica that binds a preemptor whose record
names a member that still runs names it there before it creates the binding (``ClusterCache.bind``),
whichever replica that is: the record then lasts only as long as the bound pod.

The resume holds FitGpp gives the victims' Jobs are recorded on the Jobs themselves
(annotation ``cellfit.io/resume-holds``, scheduler/preemption/resume_records.py), which outlive
the preemptor's record (its binding empties it) and the victims: the deciding replica adds the
victims whose Jobs it gave a hold, and the replica where a hold ends (a pod of the Job it bound,
once the watch shows it bound, or the hold gave up) takes its victim off, so that a restart at
any moment keeps exactly the room the running replicas kept. A read, then a JSON Patch that tests
the resourceVersion read (another writer in between is read again), like the Job's preemption
count; guarded by the Job's UID.

The record also says what the deciding replica writes after it (scheduler/preemption/records.py
``owed``): the victims' Jobs' counts (``cellfit.io/preemptions``) and resume holds, and the
victims' ``Preempted`` Events. Killed after the record and before those, that replica left the
Jobs uncounted (preemption.maxPreemptions exceeded, the resumed PriorityClass not given) and
their holds unrecorded (a second restart, after the preemptor's binding, kept no room), user26.
So a replica that reads a record it did not write finishes them (``ClusterCache``): a restart's
list finds it on the pending preemptor, and the replica that binds the preemptor reads it as its
binding empties it. Each write is one a second writer leaves as it is: the count is raised to the
recorded value (never by one: the deciding replica's own write, or another finisher's, is
enough), the holds are merged into the Job's record, and the Event carries a name of its own
(:func:`preempted_event_name`), which a second create is refused (409). Every replica counts the
Jobs in memory as soon as its watch shows the record (``FitGppEngine``), before the writes land.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Callable, Collection, Literal, Mapping, Protocol, Sequence, runtime_checkable

from scheduler.cluster.exchange.objects import pod_status_path
from scheduler.constants import ANNOTATION_GANG_PREEMPTED, ANNOTATION_PREEMPTOR_HOLD, ANNOTATION_RESUME_HOLDS
from scheduler.core.model import PodInfo
from scheduler.errors import KubernetesApiError
from scheduler.kube import wire
from scheduler.kube.wire import annotation_pointer
from scheduler.preemption import gang_records, resume_records
from scheduler.preemption.resume_records import JobRef

log = logging.getLogger(__name__)


class PodPatch(Protocol):
    """A pod's annotation written (scheduler.cluster.api.KubernetesApi)."""

    def write_path(self, method: Literal["POST", "PUT", "PATCH"], path: str, body: Any, *, content_type: str = "application/json") -> bytes: ...


def write_preemptor_record(api: PodPatch, *, pod: PodInfo, record: str) -> None:
    """Make ``pod`` carry ``record``. Nothing for a pod gone (404) or re-created under its name
    (409: the UID differs); any other failure is raised (:class:`KubernetesApiError`)."""
    body = {"metadata": {"uid": pod.uid, "annotations": {ANNOTATION_PREEMPTOR_HOLD: record}}}
    try:
        api.write_path("PATCH", pod_status_path(pod.namespace, pod.name), body, content_type="application/merge-patch+json")
    except KubernetesApiError as error:
        if error.status not in (404, 409):
            raise
        log.info(
            "preemption not recorded on its preemptor: the pod is gone, or another by its name took its place",
            extra={"pod": pod.key, "annotation": ANNOTATION_PREEMPTOR_HOLD, "reason": str(error)},
        )


def clear_preemptor_record(api: PodPatch, *, pod: PodInfo, record: str) -> bool:
    """Take ``record`` off ``pod`` if the pod still carries exactly it; whether it was taken off.
    Nothing for a pod gone (404) or re-created under its name, nor for one carrying another
    record or none (a ``test`` of the JSON Patch fails: 422, or 409); any other failure is
    raised (:class:`KubernetesApiError`)."""
    pointer = annotation_pointer(ANNOTATION_PREEMPTOR_HOLD)
    operations = [
        {"op": "test", "path": "/metadata/uid", "value": pod.uid},
        {"op": "test", "path": pointer, "value": record},
        {"op": "remove", "path": pointer},
    ]
    try:
        api.write_path("PATCH", pod_status_path(pod.namespace, pod.name), operations, content_type="application/json-patch+json")
    except KubernetesApiError as error:
        if error.status not in (404, 409, 422):
            raise
        return False
    log.info(
        "preemption record cleared off its preemptor: it keeps no room for the pod and names no gang member left to preempt",
        extra={"pod": pod.key, "annotation": ANNOTATION_PREEMPTOR_HOLD},
    )
    return True


@runtime_checkable
class FollowsPreemptorRecords(Protocol):
    """An engine that rebuilds preemptor holds from the pods' records and ends them
    (scheduler.preemption.engine.FitGppEngine): its driver watches the rebuilt holds' victims go
    and clears the records of holds that ended."""

    def follow_preemptor_records(
        self, *, watch_victims: Callable[[Sequence[str]], None], clear_record: Callable[[PodInfo, str], None],
        finish_owed: Callable[[PodInfo, str], None] | None = None,
    ) -> None: ...


# Writes of a Job's record that meet another writer between their read and their write, before
# this one gives up (the Job controller updates its status often, not its annotations).
RESUME_WRITE_CONFLICTS = 5


class JobPatch(Protocol):
    """A Job read and patched (scheduler.cluster.api.KubernetesApi)."""

    def get_job(self, *, namespace: str, name: str) -> wire.Job | None: ...

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None: ...


def write_resume_holds(api: JobPatch, *, job: JobRef, added: Mapping[str, str], ended: Collection[str]) -> None:
    """Make the Job's record of its resume holds (``cellfit.io/resume-holds``) name ``added``
    (victim UID -> node) and not ``ended`` (victim UIDs); the annotation is taken off when it
    would name none. Nothing for a Job gone or re-created under its name, or whose record says
    so already; any failure but another writer in between is raised (:class:`KubernetesApiError`),
    and so is one more writer in between each of :data:`RESUME_WRITE_CONFLICTS` tries (409)."""
    def rewritten(text: str | None) -> str | None:
        wanted = resume_records.updated(text, added=added, ended=ended)
        return None if wanted is None else resume_records.encode(wanted) if wanted else ""

    _rewrite_job_annotation(api, job=job, key=ANNOTATION_RESUME_HOLDS, rewritten=rewritten, what="resume holds")


def write_gang_preempted(api: JobPatch, *, job: JobRef, added: Mapping[str, gang_records.LeftMember], gone: Collection[str]) -> None:
    """Make the Job's record of its gang members still to delete (``cellfit.io/gang-preempted``,
    scheduler/preemption/gang_records.py) name ``added`` (member UID -> its preemption) and not
    ``gone`` (member UIDs); taken off when it would name none. As :func:`write_resume_holds`."""
    def rewritten(text: str | None) -> str | None:
        wanted = gang_records.updated(text, added=added, gone=gone)
        return None if wanted is None else gang_records.encode(wanted) if wanted else ""

    _rewrite_job_annotation(api, job=job, key=ANNOTATION_GANG_PREEMPTED, rewritten=rewritten, what="gang members still to delete")


def _rewrite_job_annotation(api: JobPatch, *, job: JobRef, key: str, rewritten: Callable[[str | None], str | None], what: str) -> None:
    """The Job's annotation ``key`` made what ``rewritten`` makes of its text (None: left as it
    is; empty: taken off): read, then patched under a ``test`` of the resourceVersion read. Nothing
    for a Job gone or re-created under its name; any failure but another writer in between is
    raised (:class:`KubernetesApiError`), and so is one more writer in between each of
    :data:`RESUME_WRITE_CONFLICTS` tries (409)."""
    pointer = annotation_pointer(key)
    for _ in range(RESUME_WRITE_CONFLICTS):
        current = api.get_job(namespace=job.namespace, name=job.name)
        if current is None or current.metadata.uid != job.uid:
            return  # deleted, or another Job by that name: what it recorded went with it
        annotations = current.metadata.annotations
        wanted = rewritten((annotations or {}).get(key))
        if wanted is None:
            return
        change: list[dict[str, Any]] = (
            [{"op": "remove", "path": pointer}] if not wanted
            else [*([{"op": "add", "path": "/metadata/annotations", "value": {}}] if annotations is None else []),
                  {"op": "add", "path": pointer, "value": wanted}]
        )
        try:
            api.patch_job(namespace=job.namespace, name=job.name,
                          operations=[{"op": "test", "path": "/metadata/resourceVersion", "value": current.metadata.resourceVersion}, *change])
            return
        except KubernetesApiError as error:
            if error.status not in (409, 422):  # 422: the test failed, another writer came first
                raise
    raise KubernetesApiError(f"job {job.key}: changed under each of {RESUME_WRITE_CONFLICTS} writes of its {what}", status=409)


@runtime_checkable
class FollowsResumeHolds(Protocol):
    """An engine that gives preempted Jobs resume holds and rebuilds them from the Jobs' records
    (scheduler.preemption.engine.FitGppEngine): its driver writes the holds given and ended."""

    def follow_resume_holds(self, *, write: Callable[[JobRef, Mapping[str, str], tuple[str, ...]], None]) -> None: ...

    def resume_hold_ended(self, *, job_uid: str, victim_uid: str) -> bool: ...


def preempted_event_name(object_name: str, pod_uid: str, *, on_job: bool = False) -> str:
    """The name of a victim's ``Preempted`` Event: one per pod (a pod is preempted once), so the
    deciding replica's and a finisher's (a record's ``owed``) are one Event, made by the first.
    ``object_name``: the pod's; with ``on_job``, its Job's, for the Event the Job gets of it
    (preempted_jobs.py), under another name."""
    digest = hashlib.sha256(f"{pod_uid}/Preempted{'/Job' if on_job else ''}".encode()).hexdigest()[:16]
    return f"{object_name[:236].rstrip('-.')}.{digest}"


def finished_preempted_message(*, preemptor: str, node: str) -> str:
    """A victim's ``Preempted`` Event made from its preemptor's record (``owed``): the replica that
    decided stopped before telling it; where and by whom as ``kubectl cellfit why`` reads them."""
    return (f"preempted by {preemptor} on node {node}: FitGpp's decision, recorded on the preemptor; the cellfit replica "
            "that made it stopped before telling this pod, so its score is not known here")


@runtime_checkable
class FollowsHoldEnds(Protocol):
    """An engine whose room holds keep pods off (scheduler.preemption.engine.FitGppEngine): its
    driver is told a hold that kept a pod off ended without that pod's binding (what it kept room
    for, the node, why), and has the holds past their time given up now and then."""

    def follow_hold_ends(self, *, ended: Callable[[str, str, str], None]) -> None: ...

    def expire_holds(self, *, nodes_listed: bool = False) -> None: ...
