"""No booking outlives its reason: cells held for pods that never come are given back.

HiveD books cells before a pod is bound: a gang's every slot on its first pod's filter, a
guaranteed pod's cells while its victims terminate. Each booking has a reason, and loses it:

* **a pod the cluster does not have.** Filter is called with a pod in its body; when a watch
  feeds the engine (``pods_watched``), a booking made for a pod the watch has not delivered is
  kept only ``unseen_pod_grace_seconds`` (the watch may lag kube-scheduler by a moment). A filter
  call for a pod that exists nowhere (a 64 x 8-GPU gang pod made up by hand) would otherwise hold
  its cells until a restart.
* **gang pods that do not come.** A gang that has had slots without pods for
  ``gang_booking_timeout_seconds``, while fewer than its size of pods exist, gives those slots
  back (a ``cellfit.io/gang-size`` larger than the Job ever runs, pods that finished and are not
  replaced, a Job whose pods are held up elsewhere). The pods it has keep theirs; a pod that comes
  later gets a slot of its own.
* **a deleted Job.** Its gang's free slots go at once.
* **a removed virtual cluster.** A reload without the VC: its gangs' free slots, and the cells
  held for its pods while their victims terminate, go at once.
* A gang whose Job can never run its size of pods at once is refused at filter
  (:func:`~scheduler.cells.request.gang_size_problem`), before anything is booked.

One booking is *kept* rather than given up: a guaranteed pod's cells (or a gang slot) whose
opportunistic victims are leaving — the watch shows them terminating, or their deletion was
handed out (kube-scheduler's preemption took them from ``select_victims``, or the leader's
reclaim booked or recorded them). kube-scheduler leaves that node out of its offers exactly while
they terminate (its own resource fit still counts them), so the filter keeps the booking and
answers that the pod waits for them (:meth:`BookingExpiry.keeps`), instead of giving the cells
being freed to the next pod and preempting others elsewhere. The wait is bounded: the longest
grace period of its leaving victims plus ``victim_exit_margin_seconds``, from the first sweep
after the filter first kept it; past that (a victim stuck behind a finalizer) the booking is no
longer kept, and the next filter without its node places the pod anew. Once its victims are
gone it is not kept either: a node still left out then is kube-scheduler's own verdict.

Pure: no clock of its own. The driver calls :meth:`BookingExpiry.expire` periodically with its
``now`` (seconds, any monotonic origin); a booking's time starts at the first call that finds
it without its reason, so it is released between one limit and one period later. Each release
comes back as a :class:`BookingReleased`, for the driver's Event and log line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Final, Iterable, Literal, NamedTuple, Sequence

from scheduler.cells.allocator import CellAllocator
from scheduler.cells.booking import Booking, Group
from scheduler.cells.request import GangSpec, gang_size_problem
from scheduler.constants import ANNOTATION_GANG
from scheduler.core.model import JobInfo, PodInfo

REASON: Final = "BookingReleased"
# A pod's grace period when nothing says otherwise (the API server's default).
DEFAULT_GRACE_SECONDS: Final = 30


@dataclass(frozen=True, slots=True)
class BookingLimits:
    """How long a booking may wait for its reason (seconds). ``gang_booking_timeout_seconds``
    ``None``: a gang keeps its slots until its last pod is gone."""

    unseen_pod_grace_seconds: float = 10.0
    gang_booking_timeout_seconds: float | None = 300.0
    # How long past its leaving victims' grace period a booking is kept off the offered nodes
    # (cells.victimExitMarginSeconds).
    victim_exit_margin_seconds: float = 60.0


class BookingReleased(NamedTuple):
    """A booking given back, to be told on the object it was for: ``kind`` Pod or Job."""

    kind: Literal["Pod", "Job"]
    namespace: str
    name: str
    uid: str
    message: str


class _Width(NamedTuple):
    parallelism: int | None
    completions: int | None


def _holder(booking: Booking) -> str:
    """Whom a booking is for, as a note names it."""
    if booking.pod_key is not None or booking.group is None:
        return f"pod {booking.pod_key}"
    return f"a free slot of gang {booking.group.name}"


def _gang_key(pod: PodInfo) -> str | None:
    """The gang a pod counts for (its owner's UID), read as parse_request reads it but without
    refusing anything: a malformed gang pod is refused at filter, and counts for nobody."""
    if pod.owner is None or pod.annotations.get(ANNOTATION_GANG, "").strip().lower() != "true":
        return None
    return pod.owner.uid


class BookingExpiry:
    """What the watch has shown of pods and Jobs, and which bookings wait for what."""

    def __init__(self, allocator: CellAllocator, limits: BookingLimits) -> None:
        self._alloc = allocator
        self.limits = limits
        # Set by a driver whose watch feeds the engine every pod: only then does "the watch has
        # not seen it" mean anything (standalone, kube-scheduler's calls are all there is).
        self.pods_watched = False
        self._live: set[str] = set()  # GPU pods the watch has delivered and that have not finished
        self._gang_of: dict[str, str] = {}  # pod UID -> its gang's key, for live gang pods
        self._gang_pods: dict[str, set[str]] = {}  # gang key -> its live pods
        self._widths: dict[str, _Width] = {}  # Job UID -> how many pods it runs at once
        # Waiting for their reason, with the first sweep that found them waiting (None: none yet).
        self._unseen: dict[str, float | None] = {}  # pod UID
        self._incomplete: dict[str, float | None] = {}  # gang key
        self._released: list[BookingReleased] = []  # told at the next sweep
        # Opportunistic pods leaving (terminating, or their deletion handed out): pod UID -> its
        # grace period. And each GPU pod's grace period, for a deletion handed out before the
        # watch shows it terminating.
        self._leaving: dict[str, int] = {}
        self._grace: dict[str, int] = {}
        self._terminating: set[str] = set()  # those the watch has shown terminating
        # How long each leaving pod has been leaving: pod UID -> the first sweep that found it
        # leaving since its deletion was seen or handed out (None: none yet). Past its grace
        # period and the margin it frees its cell for nobody (``overstayed``): a pod stuck
        # terminating (a finalizer, a kubelet that never confirms) or a deletion handed out that
        # nobody made must not hold its VC's preemptions back for ever (freeing.py).
        self._leaving_since: dict[str, float | None] = {}
        self._overstayed: set[str] = set()
        self._overstays: list[tuple[str, str]] = []  # (pod UID, what to log), since the last take
        # Bookings kept off the offered nodes while their victims leave: booking id -> the first
        # sweep that found them kept (None: none yet); and those whose wait ran out.
        self._kept: dict[int, float | None] = {}
        self._lapsed: set[int] = set()

    # ------------------------------------------------------------------ what the watch shows

    def pod_seen(self, pod: PodInfo) -> None:
        """A GPU pod the watch delivered, not finished."""
        uid = pod.uid
        self._live.add(uid)
        self._unseen.pop(uid, None)
        self._grace[uid] = pod.grace_period_seconds
        if pod.terminating and pod.node_name is not None:
            self._leaving[uid] = pod.grace_period_seconds
            if uid not in self._terminating:  # its deletion seen now: its time counts from here
                self._terminating.add(uid)
                self._started_leaving(uid)
        key = _gang_key(pod)
        if key is not None and self._gang_of.get(uid) != key:
            self._gang_of[uid] = key
            self._gang_pods.setdefault(key, set()).add(uid)

    def pod_gone(self, uid: str) -> None:
        """A pod finished or was deleted: its gang may wait for a replacement now."""
        self._live.discard(uid)
        self._unseen.pop(uid, None)
        self._grace.pop(uid, None)
        self._stopped_leaving(uid)
        key = self._gang_of.pop(uid, None)
        if key is not None:
            members = self._gang_pods.get(key)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self._gang_pods[key]
            self.gang_changed(key)

    def job_applied(self, job: JobInfo) -> None:
        self._widths[job.uid] = _Width(job.parallelism, job.completions)

    def job_deleted(self, job_uid: str) -> None:
        """The Job is gone: its gang's slots without a pod go now (its pods' own slots go with
        them, as the garbage collector deletes them)."""
        self._widths.pop(job_uid, None)
        group = self._alloc.groups.get(job_uid)
        if group is None:
            return
        free = self._release_free_slots(group)
        if free:
            self._tell_job(group, f"cellfit released the {self._slots(free, group)} booked for gang {group.name}: its Job was deleted")

    def vcs_removed(self, *, bound: AbstractSet[str]) -> None:
        """A reload removed virtual clusters: their gangs' slots without a pod, and the cells
        held for their pods not ``bound`` while victims terminate, go now, since no pod of a
        removed VC is placed any more (its running pods keep theirs, and so does a pod whose
        binding is in flight: its cells have no victim)."""
        alloc = self._alloc
        vcs = alloc.vcs
        for uid, booking in list(alloc.by_pod.items()):
            vc = vcs.get(booking.vc)
            if (vc is not None and vc.defined) or booking.group is not None or uid in bound:
                continue
            if alloc.victims(booking):
                self._release_held(booking, f"its virtual cluster {booking.vc!r} was removed from the configuration")
        for group in list(self._alloc.groups.values()):
            vc = vcs.get(group.vc)
            if vc is not None and vc.defined:
                continue
            free = self._release_free_slots(group)
            if free:
                self._tell_job(
                    group,
                    f"cellfit released the {self._slots(free, group)} booked for gang {group.name}: "
                    f"its virtual cluster {group.vc!r} was removed from the configuration",
                )

    # ------------------------------------------------------------------ what the engine books

    def booked_for(self, pod_uid: str) -> None:
        """Cells were booked (or a gang slot taken) for this pod."""
        if self.pods_watched and pod_uid not in self._live:
            self._unseen.setdefault(pod_uid, None)

    def gang_changed(self, key: str) -> None:
        """A gang was booked, or may have a slot without a pod now."""
        self._incomplete.setdefault(key, None)

    def gang_problem(self, gang: GangSpec) -> str | None:
        """Why the gang's Job can never run it, when the watch has shown the Job."""
        width = self._widths.get(gang.key)
        if width is None:
            return None
        return gang_size_problem(gang.size, parallelism=width.parallelism, completions=width.completions)

    # ------------------------------------------------------------------ victims leaving

    def victims_leaving(self, pod_uids: Iterable[str]) -> list[str]:
        """The deletion of these opportunistic pods was handed out (to kube-scheduler's
        preemption, or to the leader's reclaim): they are leaving, whatever the watch shows yet.
        Those not counted as leaving before (what :meth:`victims_staying` may take back)."""
        marked = []
        for uid in pod_uids:
            if uid not in self._leaving:
                self._leaving[uid] = self._grace.get(uid, DEFAULT_GRACE_SECONDS)
                self._started_leaving(uid)
                marked.append(uid)
        return marked

    def victims_staying(self, pod_uids: Iterable[str]) -> None:
        """The deletion of these pods, handed out by :meth:`victims_leaving`, was taken back (the
        booking that needed it given back before anything was deleted): they are leaving no
        more, unless the watch has shown them terminating."""
        for uid in pod_uids:
            if uid not in self._terminating:
                self._stopped_leaving(uid)

    def _started_leaving(self, uid: str) -> None:
        self._leaving_since[uid] = None
        self._overstayed.discard(uid)

    def _stopped_leaving(self, uid: str) -> None:
        self._leaving.pop(uid, None)
        self._terminating.discard(uid)
        self._leaving_since.pop(uid, None)
        self._overstayed.discard(uid)

    def is_leaving(self, pod_uid: str | None) -> bool:
        """Whether the pod is leaving: terminating, or its deletion handed out."""
        return pod_uid is not None and pod_uid in self._leaving

    def is_terminating(self, pod_uid: str) -> bool:
        """Whether the watch has shown the pod terminating (not only its deletion handed out)."""
        return pod_uid in self._terminating

    def is_freeing(self, pod_uid: str | None) -> bool:
        """Whether the pod is leaving and has not overstayed: its GPUs count as being freed for
        its VC's pods (freeing.py) only until its grace period and the margin have passed."""
        return pod_uid is not None and pod_uid in self._leaving and pod_uid not in self._overstayed

    def overstayed(self, pod_uid: str | None) -> bool:
        """Whether the pod is leaving past its grace period and the margin."""
        return pod_uid is not None and pod_uid in self._overstayed

    @property
    def any_overstayed(self) -> bool:
        return bool(self._overstayed)

    def take_overstays(self) -> list[tuple[str, str]]:
        """The pods found overstaying since the last call, each with its log line."""
        overstays, self._overstays = self._overstays, []
        return overstays

    @property
    def any_leaving(self) -> bool:
        return bool(self._leaving)

    def keeps(self, booking: Booking, victims: Sequence[Booking]) -> bool:
        """Whether ``booking``, whose node kube-scheduler did not offer, is kept for its pod:
        some of its ``victims`` are leaving and its wait has not run out. Its wait starts at the
        next sweep."""
        if booking.id in self._lapsed or not self._leaving_graces(victims):
            return False
        self._kept.setdefault(booking.id, None)
        return True

    def leaving(self, victims: Sequence[Booking]) -> list[Booking]:
        """The ``victims`` that are leaving."""
        return [victim for victim in victims if victim.pod_uid in self._leaving]

    def _leaving_graces(self, victims: Sequence[Booking]) -> list[int]:
        leaving = self._leaving
        return [leaving[v.pod_uid] for v in victims if v.pod_uid is not None and v.pod_uid in leaving]

    def _expire_kept(self, now: float) -> None:
        """Bookings kept past their victims' grace period and the margin are kept no more."""
        alloc = self._alloc
        margin = self.limits.victim_exit_margin_seconds
        for booking_id, since in list(self._kept.items()):
            booking = alloc.bookings.get(booking_id)
            graces = self._leaving_graces(alloc.victims(booking)) if booking is not None else []
            if not graces:
                del self._kept[booking_id]  # released, or its victims are gone
            elif since is None:
                self._kept[booking_id] = now
            elif now - since >= max(graces) + margin:
                assert booking is not None
                del self._kept[booking_id]
                self._lapsed.add(booking_id)
                alloc.note(
                    f"{_holder(booking)}: the cells booked on node {booking.node} were kept {max(graces) + margin:g} s "
                    f"(the longest grace period of the opportunistic pods leaving them, and {margin:g} s, "
                    "cells.victimExitMarginSeconds) while "
                    "kube-scheduler offered other nodes, and those pods have not left; kept no longer: the next "
                    "filter without that node places the pod anew"
                )
        self._lapsed.intersection_update(alloc.bookings)
        for uid in [uid for uid in self._leaving if uid not in alloc.by_pod]:
            self._stopped_leaving(uid)  # gone: nothing of theirs to wait for

    def _expire_leaving(self, now: float) -> None:
        """Leaving pods still there past their grace period and the margin free their cells for
        nobody any more (:meth:`is_freeing`); each is told once, naming it."""
        margin = self.limits.victim_exit_margin_seconds
        alloc = self._alloc
        for uid, since in list(self._leaving_since.items()):
            if since is None:
                self._leaving_since[uid] = now
                continue
            limit = self._leaving[uid] + margin
            if now - since < limit:
                continue
            del self._leaving_since[uid]
            self._overstayed.add(uid)
            booking = alloc.by_pod.get(uid)
            where = f" on node {booking.node}" if booking is not None and booking.node is not None else ""
            key = booking.pod_key if booking is not None and booking.pod_key is not None else uid
            self._overstays.append(
                (
                    uid,
                    (
                        f"pod {key} is still there {limit:g} s after HiveD first saw it leave (its grace period, "
                        f"{self._leaving[uid]} s, and {margin:g} s, cells.victimExitMarginSeconds): HiveD no longer waits for the "
                        f"cells it holds{where}, and opportunistic pods may be preempted elsewhere for the guaranteed pods of "
                        "the virtual cluster whose cells they are"
                    ),
                )
            )

    # ------------------------------------------------------------------ the sweep

    def expire(self, now: float) -> list[BookingReleased]:
        """Release what has waited past its limit; what was released since the last call."""
        self._expire_unseen(now)
        self._expire_incomplete(now)
        self._expire_kept(now)
        self._expire_leaving(now)
        released, self._released = self._released, []
        return released

    def _expire_unseen(self, now: float) -> None:
        grace = self.limits.unseen_pod_grace_seconds
        alloc = self._alloc
        for uid, since in list(self._unseen.items()):
            booking = alloc.by_pod.get(uid)
            if booking is None or uid in self._live:
                del self._unseen[uid]
            elif since is None:
                self._unseen[uid] = now
            elif now - since >= grace:
                del self._unseen[uid]
                self._release_unseen(booking, grace)

    def _release_held(self, booking: Booking, reason: str) -> None:
        namespace, _, name = (booking.pod_key or "/").partition("/")
        self._alloc.release(booking)
        self._released.append(
            BookingReleased(
                kind="Pod",
                namespace=namespace,
                name=name,
                uid=booking.pod_uid or "",
                message=f"cellfit released the cells booked for this pod, {len(booking.gpus)} GPUs on node {booking.node}: {reason}",
            )
        )

    def _release_unseen(self, booking: Booking, grace: float) -> None:
        namespace, _, name = (booking.pod_key or "/").partition("/")
        uid = booking.pod_uid or ""
        what = f"{len(booking.gpus)} GPUs on node {booking.node}"
        group = booking.group
        if group is not None:
            whole = group.members() == [uid]
            what = f"a slot of gang {group.name} ({what})"
            if whole:
                what += f", and with it the gang's other {len(group.slots) - 1} slots"
        self._alloc.unassign(booking)
        if group is not None and group.key in self._alloc.groups:
            self.gang_changed(group.key)
        self._released.append(
            BookingReleased(
                kind="Pod",
                namespace=namespace,
                name=name,
                uid=uid,
                message=(
                    f"cellfit released the cells booked for this pod, {what}: the cluster showed no such pod "
                    f"within {grace:g} s of the booking (cells.unseenPodGraceSeconds)"
                ),
            )
        )

    def _expire_incomplete(self, now: float) -> None:
        timeout = self.limits.gang_booking_timeout_seconds
        for key, since in list(self._incomplete.items()):
            group = self._alloc.groups.get(key)
            arrived = self._arrived(group) if group is not None else 0
            if group is None or timeout is None or arrived >= group.size or all(s.pod_uid for s in group.slots):
                # Gone, complete, or waiting for pods that exist: a pod leaving brings it back.
                del self._incomplete[key]
            elif since is None:
                self._incomplete[key] = now
            elif now - since >= timeout:
                del self._incomplete[key]
                free = self._release_free_slots(group)
                self._tell_job(
                    group,
                    f"cellfit released the {self._slots(free, group)} booked for gang {group.name}: "
                    f"{arrived} of its {group.size} pods came within {timeout:g} s "
                    "(cells.gangBookingTimeoutSeconds); a pod that comes later is placed on its own",
                )

    def _arrived(self, group: Group) -> int:
        """Pods of the gang that exist: the live ones the watch has shown, or (without a watch)
        those holding a slot."""
        return max(len(group.members()), len(self._gang_pods.get(group.key, ())))

    def _release_free_slots(self, group: Group) -> list[Booking]:
        free = [slot for slot in group.slots if slot.pod_uid is None]
        for slot in free:
            self._alloc.release(slot)
        return free

    @staticmethod
    def _slots(free: list[Booking], group: Group) -> str:
        gpus = sum(len(slot.gpus) for slot in free)
        return f"{len(free)} slot{'s' if len(free) != 1 else ''} ({gpus} GPUs)"

    def _tell_job(self, group: Group, message: str) -> None:
        namespace, _, name = group.name.partition("/")
        self._released.append(BookingReleased(kind="Job", namespace=namespace, name=name, uid=group.key, message=message))
