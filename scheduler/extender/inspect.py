"""``/v1/inspect``: what the engine holds, for people and dashboards. Read-only, under the
engine lock; a policy without cells answers 404 saying so."""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from fastapi import APIRouter, HTTPException, Query

from scheduler.cells.capabilities import CellInspection
from scheduler.constants import INSPECT_EXCHANGES_PATH, INSPECT_URL_PREFIX
from scheduler.core.engine import SchedulingEngine
from scheduler.preemption.holds import RoomHolds


_View = TypeVar("_View")

# hived()'s 404 belongs in the OpenAPI document of every route that calls it: undocumented, a
# client generated from the document (or schemathesis) sees an unknown status under resource-fit.
_NO_CELLS: dict[int | str, dict[str, Any]] = {
    404: {"description": "The running policy (resource-fit) has no virtual clusters or cells."}
}

# The allox view's 404 when the caller does not say which setting turned AlloX off.
ALLOX_OFF = "AlloX admission is not running (standalone, or allox.enabled is false)"


def inspect_router(
    *,
    engine: SchedulingEngine,
    lock: threading.RLock,
    cells: CellInspection | None = None,
    holds: RoomHolds | None = None,
    estimates: Callable[[], dict[str, Any]] | None = None,
    allox: Callable[[], dict[str, Any]] | None = None,
    exchanges: Callable[[], dict[str, Any]] | None = None,
    allox_off: str = ALLOX_OFF,
) -> APIRouter:
    """``engine`` is the placement engine; ``cells`` HiveD's, the same engine (``None``: resource
    fit); ``holds`` FitGpp's resume holds (``None``: the
    preemption policy is the placement engine's own); ``estimates`` the estimator's view
    (``None``: not running, standalone or switched off); ``allox_off``: why ``allox`` is None,
    the 404's detail (which setting turned it off)."""
    router = APIRouter(prefix=INSPECT_URL_PREFIX, tags=["inspect"])

    @router.get(
        "/estimates",
        summary="Interchangeable Jobs: sampling state, samples, estimates.",
        responses={404: {"description": "The estimator is not running (standalone, or estimator.enabled is false)."}},
    )
    def estimator_view() -> dict[str, Any]:
        if estimates is None:
            raise HTTPException(404, detail="the estimator is not running (standalone, or estimator.enabled is false)")
        return estimates()

    @router.get(
        "/allox",
        summary="AlloX admission: the queue per kind, the last matching (starts, machines, time), the placer's mechanism.",
        responses={404: {"description": "AlloX admission is not running (standalone, allox.enabled is false, or "
                                        "estimator.enabled is false: AlloX runs only beside the estimator)."}},
    )
    def allox_view() -> dict[str, Any]:
        if allox is None:
            raise HTTPException(404, detail=allox_off)
        return allox()

    @router.get(
        INSPECT_EXCHANGES_PATH,
        summary="Cell exchange: the exchanges matched, under way and just returned, each VC's surplus, the VCs' quotas now, the board.",
        responses={404: {"description": "The cell exchange is not running (standalone, no virtual clusters, or exchange.enabled is false)."}},
    )
    def exchanges_view() -> dict[str, Any]:
        if exchanges is None:
            raise HTTPException(404, detail="the cell exchange is not running (standalone, a policy without virtual clusters, "
                                            "or exchange.enabled is false)")
        return exchanges()

    def hived() -> CellInspection:
        if cells is None:
            raise HTTPException(404, detail="the running policy (resource-fit) has no virtual clusters or cells")
        return cells

    def read(view: Callable[[], _View]) -> _View:
        with lock:
            return view()

    @router.get("/virtual-clusters", summary="Every virtual cluster: quota, cells bound, pods.", responses=_NO_CELLS)
    def virtual_clusters() -> dict[str, Any]:
        cells = hived()
        return read(cells.inspect_virtual_clusters)

    @router.get(
        "/virtual-clusters/{name}",
        summary="One virtual cluster.",
        responses={404: {"description": "No such virtual cluster, or the running policy (resource-fit) has none."}},
    )
    def virtual_cluster(name: str) -> dict[str, Any]:
        cells = hived()
        found = read(lambda: cells.inspect_virtual_cluster(name))
        if found is None:
            raise HTTPException(404, detail=f"no virtual cluster named {name!r}")
        return found

    @router.get("/cells", summary="The physical cell tree: state, VC, priority, pods.", responses=_NO_CELLS)
    def physical_cells(
        node: str | None = Query(None, description="only the cells of this node"),
        gpus: bool = Query(True, description="false: no GPU cells (the tree down to the level above them)"),
    ) -> dict[str, Any]:
        cells = hived()
        return read(lambda: cells.inspect_cells(node=node, gpus=gpus))

    @router.get("/engine", summary="The running policy and its sizes.")
    def engine_summary() -> dict[str, Any]:
        summary: dict[str, Any] = {"policy": "hived" if cells is not None else "resource-fit"}
        summary["stats"] = dict(read(engine.stats))
        if cells is not None:
            summary["cells"] = cells.summary
        return summary

    @router.get("/resume-holds", summary="Room nodes keep for preemptors (kind preemptor) and for the pending pods of preempted best-effort Jobs (kind resume).")
    def resume_holds() -> dict[str, Any]:
        if holds is None:
            return {"enabled": False, "holds": []}
        found = read(holds.holds)
        return {
            "enabled": True,
            "holds": [
                {"node": h.node, "job": h.job, "requests": h.requests.describe(), "pods": list(h.pods), "kind": h.kind}
                for h in found
            ],
        }

    return router
