"""A CellOffer or CellRequest as the round reads it (``board``, ``rebuild``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

Kind = Literal["offer", "request"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Posting:
    """A CellOffer or CellRequest as watched: ``obj`` the object, ``posted`` its
    creationTimestamp in seconds (restart-stable: ties go to the earliest posted)."""

    kind: Kind
    obj: Mapping[str, Any]
    posted: float

    @property
    def namespace(self) -> str:
        return str((self.obj.get("metadata") or {}).get("namespace") or "")

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name") or "")

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def uid(self) -> str:
        return str((self.obj.get("metadata") or {}).get("uid") or "")

    @property
    def status(self) -> Mapping[str, Any]:
        """The status cellfit wrote last (tenants cannot write it: the status subresource)."""
        status = self.obj.get("status")
        return status if isinstance(status, Mapping) else {}

    @property
    def generation(self) -> int | None:
        value = (self.obj.get("metadata") or {}).get("generation")
        return value if isinstance(value, int) and not isinstance(value, bool) else None
