"""The exchange's objects as the API server sends them, decoded with msgspec: CellOffers and
CellRequests (spec and status kept as plain JSON: the pure core reads and validates them), the
Namespaces whose label maps them to a VC, and the ledger ConfigMap; and their URL paths."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec

from scheduler.constants import CELL_OFFERS_PATH, CELL_REQUESTS_PATH

NAMESPACES_PATH = "/api/v1/namespaces"


class Meta(msgspec.Struct, frozen=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    generation: int | None = None
    labels: dict[str, str] | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None


class CellObject(msgspec.Struct, frozen=True):
    """A CellOffer or a CellRequest."""

    metadata: Meta = Meta()
    spec: Any = None
    status: Any = None

    def as_posted(self) -> dict[str, Any]:
        """The object as the pure core reads it (``board.Posting.obj``)."""
        meta = self.metadata
        return {"metadata": {"namespace": meta.namespace, "name": meta.name, "uid": meta.uid, "generation": meta.generation},
                "spec": self.spec, "status": self.status}


class Namespace(msgspec.Struct, frozen=True):
    metadata: Meta = Meta()


class ConfigMap(msgspec.Struct, frozen=True):
    metadata: Meta = Meta()
    data: dict[str, str] | None = None


CELL_OBJECT_DECODER = msgspec.json.Decoder(CellObject)
NAMESPACE_DECODER = msgspec.json.Decoder(Namespace)
CONFIG_MAP_DECODER = msgspec.json.Decoder(ConfigMap)


def collection_path(kind: str) -> str:
    return CELL_OFFERS_PATH if kind == "offer" else CELL_REQUESTS_PATH


def status_path(kind: str, namespace: str, name: str) -> str:
    base = collection_path(kind).rsplit("/", 1)
    return f"{base[0]}/namespaces/{quote(namespace, safe='')}/{base[1]}/{quote(name, safe='')}/status"


def pod_status_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/status"


def config_maps_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps"


def ledger_list_path(namespace: str, name: str) -> str:
    """The ledger alone, by field selector (RBAC may then grant list and watch on its name only)."""
    return f"{config_maps_path(namespace)}?fieldSelector={quote(f'metadata.name={name}', safe='')}"
