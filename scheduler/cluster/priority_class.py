"""The PriorityClass resumed pods get, read from the API server rather than configured twice.

The Priority admission plugin refuses a pod whose ``priority`` or ``preemptionPolicy`` disagrees
with its class, so the webhook must copy the class's own values. Both are immutable, so one read
serves until the class is deleted and recreated; re-reading every ``refresh_seconds`` covers
that, and a missing class is looked for again no more often than that.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Protocol

from scheduler.errors import CellfitError
from scheduler.kube import wire
from scheduler.preemption import ResumedPriorityClass

log = logging.getLogger(__name__)


class ReadsPriorityClasses(Protocol):
    def get_priority_class(self, name: str) -> wire.PriorityClass | None: ...


class PriorityClassLookup:
    def __init__(
        self,
        api: ReadsPriorityClasses,
        *,
        name: str,
        refresh_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._api = api
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._value: ResumedPriorityClass | None = None
        self._read_at: float | None = None

    def get(self) -> ResumedPriorityClass | None:
        """The class, or ``None`` while it does not exist or cannot be read (logged)."""
        with self._lock:
            now = self._clock()
            if self._read_at is not None and now - self._read_at < self._refresh_seconds:
                return self._value
            self._read_at = now
            try:
                found = self._api.get_priority_class(self.name)
            except CellfitError as error:
                log.warning("priority class unreadable; keeping the last one read", extra={"priorityClass": self.name, "reason": str(error)})
                return self._value
            if found is None:
                log.warning(
                    "priority class missing: resumed best-effort pods keep their own priority",
                    extra={"priorityClass": self.name},
                )
                self._value = None
                return None
            try:
                self._value = ResumedPriorityClass(
                    name=self.name, value=found.value, preemption_policy=found.preemptionPolicy or "PreemptLowerPriority"
                )
            except CellfitError as error:
                log.warning("priority class unusable", extra={"priorityClass": self.name, "reason": str(error)})
                self._value = None
            return self._value
