"""The interchangeable Jobs (those carrying ``cellfit.io/configurations``) as the watch cache's
one Job watch sees them, kept raw for the leader's estimator.

A process lists and watches Jobs once: the watch cache decodes each Job's identity and width for
the engine, and hands the ones with configurations here, as the bytes the API server sent. Only
the estimator reads their pod templates, so only it decodes them whole, and only for these
Jobs. The estimator runs on the leader and subscribes when its term begins: it is replayed what
the watch holds, then gets every change, in the watch's order, until its term ends. What it is
replayed is the watch's current view: a new term does not list Jobs again, so while this
replica's watch is failing (its reflector retries) the term starts from the last view, as the
engine itself decides on it.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Mapping, Protocol, Sequence

log = logging.getLogger(__name__)


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


class InterchangeableJobs:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # one delivery at a time: a replay never interleaves with an event
        self._jobs: dict[str, bytes] = {}  # by UID, the object as the API server sent it
        self._listed = False
        self._subscribers: list[JobSubscriber] = []

    # ------------------------------------------------------------------ the watch's side

    def replace(self, jobs: Mapping[str, bytes]) -> None:
        """A list of Jobs: ``jobs`` are its interchangeable ones, by UID."""
        with self._lock:
            self._jobs = dict(jobs)
            self._listed = True
            listed = list(self._jobs.values())
            self._tell(lambda subscriber: subscriber.replace_jobs(listed))

    def apply(self, uid: str, job: bytes | None) -> None:
        """A Job added or changed: ``job`` its bytes when it is interchangeable, else None."""
        with self._lock:
            if job is not None:
                self._jobs[uid] = job
                self._tell(lambda subscriber: subscriber.apply_job(job))
            elif self._jobs.pop(uid, None) is not None:
                self._tell(lambda subscriber: subscriber.forget_job(uid))

    def delete(self, uid: str) -> None:
        with self._lock:
            self._jobs.pop(uid, None)
            self._tell(lambda subscriber: subscriber.delete_job(uid))

    # ------------------------------------------------------------------ the subscribers' side

    def subscribe(self, subscriber: JobSubscriber) -> None:
        """From now on ``subscriber`` gets every change; if the watch has listed, it is first
        replayed what the watch holds (else the first list is its first call)."""
        with self._lock:
            self._subscribers.append(subscriber)
            if self._listed:
                subscriber.replace_jobs(list(self._jobs.values()))

    def unsubscribe(self, subscriber: JobSubscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def _tell(self, call: Callable[[JobSubscriber], None]) -> None:
        """``call`` on every subscriber (under the lock). A subscriber's defect is logged: raised,
        it would end the watch that also feeds the engine its Jobs."""
        for subscriber in self._subscribers:
            try:
                call(subscriber)
            except Exception:
                log.exception("a Job subscriber failed", extra={"subscriber": type(subscriber).__name__})

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)
