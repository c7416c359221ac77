"""What the leader's estimator follows, as the watch cache's one watch of each kind sees it: the
interchangeable Jobs (those carrying ``cellfit.io/configurations``), kept raw, and the sampling
pods (labelled ``cellfit.io/sample=true``), decoded with the estimator's Pod. The Jobs whose user
wrote a Job-level annotation of cellfit's on the pod template instead (:func:`followed`) are
passed on too: the estimator tells them where it belongs, as nothing else would.

A process lists and watches Jobs once and pods once. The watch cache decodes each Job's
identity and width for the engine, and hands the ones with configurations here, as the bytes the
API server sent: only the estimator reads their pod templates, so only it decodes them whole, and
only for these Jobs. It decodes each pod's lean slice for the engine, and each sampling pod's
run besides (container states, termination messages, start times), which no other pod pays
for; with the estimator on, its pod watch also sees finished pods, whose results the estimator
reads (the engine takes a finished pod as gone).

The estimator runs on the leader and subscribes when its term begins: it is replayed what each
watch holds, then gets every change, in the watch's order, until its term ends. What it is
replayed is the watch's current view: a new term does not list again, so while this replica's
watch is failing (its reflector retries) the term starts from the last view, as the engine
itself decides on it. A relist (410 Gone, a reconnect) reaches it as a replace.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Collection, Generic, Mapping, Protocol, Sequence, TypeVar

from estimator.objects import JOB_LEVEL_ANNOTATIONS, Pod
from scheduler.constants import ANNOTATION_CONFIGURATIONS

log = logging.getLogger(__name__)

# Each as an annotation's key is written in the Job's JSON (not managedFields' "f:" key).
_QUOTED_JOB_LEVEL = tuple((key, f'"{key}"'.encode()) for key in JOB_LEVEL_ANNOTATIONS)

Item = TypeVar("Item")
Subscriber = TypeVar("Subscriber")


class JobSubscriber(Protocol):
    """What follows the interchangeable Jobs (the estimator). Called from the Job watch's thread,
    one call at a time; it must not block on the API."""

    def replace_jobs(self, jobs: Sequence[bytes]) -> None:
        """Every interchangeable Job the watch holds (on subscribing, and after every relist):
        any other Job the subscriber holds is gone or no longer interchangeable."""

    def apply_job(self, job: bytes) -> None:
        """An interchangeable Job, added or changed."""

    def forget_job(self, uid: str) -> None:
        """The Job lost its configurations: it is an ordinary Job now (nothing to delete)."""

    def delete_job(self, uid: str) -> None:
        """A Job was deleted (every deletion: one that lost its configurations may still own
        sampling pods)."""


class PodSubscriber(Protocol):
    """What follows the sampling pods (the estimator). Called from the pod watch's thread, one
    call at a time; it must not block on the API."""

    def replace_pods(self, pods: Sequence[Pod]) -> None:
        """Every sampling pod the watch holds, finished ones included (on subscribing, and after
        every relist): any other pod the subscriber holds is gone."""

    def apply_pod(self, pod: Pod) -> None:
        """A sampling pod, added or changed (finished, too)."""

    def delete_pod(self, pod: Pod) -> None:
        """A sampling pod deleted, or no longer labelled as one: its last state."""


class _Feed(Generic[Item, Subscriber]):
    """Items by UID as a watch holds them, and the subscribers told of each change: a subscriber
    that comes after the watch's first list is replayed what it holds."""

    def __init__(self, *, replay: Callable[[Subscriber, list[Item]], None], what: str) -> None:
        self._lock = threading.Lock()  # one delivery at a time: a replay never interleaves with an event
        self._items: dict[str, Item] = {}
        self._listed = False
        self._subscribers: list[Subscriber] = []
        self._replay = replay
        self._what = what

    def _replace(self, items: Mapping[str, Item], *, keeping: Collection[str] = ()) -> None:
        """``items`` are what the watch lists now, and the ones of ``keeping`` it holds."""
        with self._lock:
            self._items = {**{uid: self._items[uid] for uid in keeping if uid in self._items}, **items}
            self._listed = True
            listed = list(self._items.values())
            self._tell(lambda subscriber: self._replay(subscriber, listed))

    def subscribe(self, subscriber: Subscriber) -> None:
        """From now on ``subscriber`` gets every change; if the watch has listed, it is first
        replayed what the watch holds (else the first list is its first call)."""
        with self._lock:
            self._subscribers.append(subscriber)
            if self._listed:
                self._replay(subscriber, list(self._items.values()))

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def _tell(self, call: Callable[[Subscriber], None]) -> None:
        """``call`` on every subscriber (under the lock). A subscriber's defect is logged: raised,
        it would end the watch that also feeds the engine."""
        for subscriber in self._subscribers:
            try:
                call(subscriber)
            except Exception:
                log.exception("a feed subscriber failed", extra={"feed": self._what, "subscriber": type(subscriber).__name__})

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class SamplingPods(_Feed[Pod, PodSubscriber]):
    """The pods labelled ``cellfit.io/sample=true`` the pod watch holds, finished ones included.
    Which of them are a Job's samples (owned by it, in its namespace) is the estimator's to say."""

    def __init__(self) -> None:
        super().__init__(replay=lambda subscriber, pods: subscriber.replace_pods(pods), what="sampling pod")

    def replace(self, pods: Mapping[str, Pod], *, unreadable: Collection[str] = ()) -> None:
        """A list of pods: ``pods`` are its sampling pods, by UID; those of ``unreadable`` are
        listed too, but their runs do not read: the last state that did is kept."""
        self._replace(pods, keeping=unreadable)

    def apply(self, uid: str, pod: Pod | None) -> None:
        """A pod added or changed: ``pod`` when it is a sampling pod, else None (one that no longer
        is, if held, is passed on as deleted: a label selector's watch would have said so)."""
        with self._lock:
            if pod is not None:
                self._items[uid] = pod
                self._tell(lambda subscriber: subscriber.apply_pod(pod))
            elif (held := self._items.pop(uid, None)) is not None:
                self._tell(lambda subscriber: subscriber.delete_pod(held))

    def delete(self, uid: str, pod: Pod | None) -> None:
        """A pod deleted: ``pod`` its last state when it is a sampling pod, else None."""
        with self._lock:
            held = self._items.pop(uid, None)
            last = pod if pod is not None else held
            if last is not None:
                self._tell(lambda subscriber: subscriber.delete_pod(last))


class InterchangeableJobs(_Feed[bytes, JobSubscriber]):
    """The interchangeable Jobs the Job watch holds, raw, with :attr:`sampling_pods`, their
    sampling pods from the pod watch (the estimator follows both)."""

    def __init__(self) -> None:
        super().__init__(replay=lambda subscriber, jobs: subscriber.replace_jobs(jobs), what="Job")
        self.sampling_pods = SamplingPods()

    # ------------------------------------------------------------------ the watch's side

    def replace(self, jobs: Mapping[str, bytes]) -> None:
        """A list of Jobs: ``jobs`` are those the estimator follows (:func:`followed`), by UID."""
        self._replace(jobs)

    def apply(self, uid: str, job: bytes | None) -> None:
        """A Job added or changed: ``job`` its bytes when the estimator follows it, else None."""
        with self._lock:
            if job is not None:
                self._items[uid] = job
                self._tell(lambda subscriber: subscriber.apply_job(job))
            elif self._items.pop(uid, None) is not None:
                self._tell(lambda subscriber: subscriber.forget_job(uid))

    def delete(self, uid: str) -> None:
        with self._lock:
            self._items.pop(uid, None)
            self._tell(lambda subscriber: subscriber.delete_job(uid))


def followed(*, annotations: Mapping[str, str], raw: bytes) -> bool:
    """Whether the estimator follows a Job of these ``annotations`` and these bytes: it carries
    ``cellfit.io/configurations``, or a Job-level annotation of cellfit's is in its bytes but
    not among its annotations (on its pod template, where cellfit never reads it: the Job would
    stay suspended, told nothing). A key quoted elsewhere (an env value) costs the estimator a
    look at the template, and nothing more."""
    return ANNOTATION_CONFIGURATIONS in annotations or any(
        key not in annotations and quoted in raw for key, quoted in _QUOTED_JOB_LEVEL)
