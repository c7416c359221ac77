"""Whether the API server serves the exchange's custom resources (the CellOffer and CellRequest
CRDs of charts/cellfit/crds/, which ``cellfit serve`` outside the chart does not apply).

A list or watch of a resource the API server does not serve is answered 404. Without its CRD
the exchange has nothing to match, and the reflectors retry (with their backoff) until it is
applied: the administrator is told once, in one line naming the command, and the retries are
logged at debug level; once every kind is listed the exchange runs, and that is told once too.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Sequence

from scheduler.errors import KubernetesApiError

log = logging.getLogger(__name__)

APPLY_CRDS = "kubectl apply -f charts/cellfit/crds/"


class ExchangeDefinitions:
    """The exchange's resources (``resources``: their plural names, ``celloffers``) the API server
    answered 404 for, until each is listed."""

    def __init__(self, *, resources: Sequence[str]) -> None:
        self._resources = tuple(resources)
        self._lock = threading.Lock()
        self._missing: set[str] = set()
        self._told_missing = False  # the warning is out, and the exchange not yet told running

    def told(self, resource: str) -> Callable[[Exception], bool]:
        """The reflector's ``told`` for ``resource``: a 404 is this object's to tell."""
        def told(error: Exception) -> bool:
            if not (isinstance(error, KubernetesApiError) and error.status == 404):
                return False
            self._missing_now(resource, error)
            return True
        return told

    def listed(self, resource: str, replace: Callable[[Sequence[Any]], None]) -> Callable[[Sequence[Any]], None]:
        """``replace`` for the reflector of ``resource``: its list was answered, so it is served."""
        def listed(items: Sequence[Any]) -> None:
            self._served(resource)
            replace(items)
        return listed

    @property
    def waiting(self) -> str | None:
        """What the exchange waits for, in words; None when every resource was listed."""
        with self._lock:
            missing = sorted(self._missing)
        if not missing:
            return None
        return (f"the cell exchange is off until its CRDs are applied ({APPLY_CRDS}): the API server does not serve "
                + ", ".join(f"{name}.cellfit.io" for name in missing))

    def _missing_now(self, resource: str, error: Exception) -> None:
        with self._lock:
            self._missing.add(resource)
            tell = not self._told_missing
            self._told_missing = True
        if tell:
            log.warning(f"the cell exchange is off until the CellOffer and CellRequest CRDs are applied: {APPLY_CRDS} "
                        "(retried quietly; the exchange starts once they exist)",
                        extra={"resource": resource, "reason": str(error)})

    def _served(self, resource: str) -> None:
        with self._lock:
            self._missing.discard(resource)
            tell = self._told_missing and not self._missing
            if tell:
                self._told_missing = False
        if tell:
            log.info("the cell exchange's CRDs are applied: the exchange starts", extra={"resources": list(self._resources)})
