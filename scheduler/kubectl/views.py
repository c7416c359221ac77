"""Rows of the ``vcs``, ``cells`` and ``queue`` tables from cellfit's inspect API. Pure."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from scheduler.kubectl.wording import expected_start

# The VC's pods and GPUs in use, split as the inspect API splits them (its ``pods`` and ``gpus``):
# guaranteed (inside its quota) and opportunistic (on idle cells, preempted when their owner needs
# them), each its own column: "PODS 2/0" left the reader to guess what the second number was.
VC_COLUMNS = ("vc", "cell-type", "gpus/cell", "quota", "bound", "unbound", "draining", "pinned",
              "guaranteed-pods", "guaranteed-gpus", "opportunistic-pods", "opportunistic-gpus")
# LEAVING: of the GUARANTEED GPUs, those booked for a guaranteed pod while the opportunistic pod
# preempted for it still runs there (in its grace period); not counted in OPPORTUNISTIC.
CELL_COLUMNS = ("cell", "type", "state", "vc", "gpus", "idle", "guaranteed", "opportunistic", "leaving", "bad", "pods")
# With a VC's cells that cannot serve it now (cellfit's cells on bad or gone nodes): which, and why.
CANNOT_BIND = "cannot-bind"
# The cell type of a VC's row of totals, when it has several cell types.
TOTAL_ROW = "(total)"
QUEUE_COLUMNS = ("job", "kind", "position", "expected-start", "vc")
# With Jobs AlloX holds outside the queue (no machine, quota): why each waits, as its Placed
# condition and `kubectl cellfit why` say it.
WAITING_COLUMNS = (*QUEUE_COLUMNS, "waiting")


def vc_rows(view: Mapping[str, Any], *, cells: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per VC and cell type (``/v1/inspect/virtual-clusters``). The VC's guaranteed and
    opportunistic pods and GPUs in use are the VC's totals, not any one cell type's (the inspect
    API counts them per VC): on its row when it has one cell type, else on a row of their own
    after its cell types, cell type ``(total)``, the cell-type rows showing ``-`` there. (On the
    first cell type's row they read as that type's: 9 guaranteed GPUs on a row of 4-GPU cells.)
    ``cells``: the physical tree (``/v1/inspect/cells``), from which :func:`cannot_bind` marks
    the cells a VC has on paper only (user24 F8: after GPU nodes were deleted, a VC's quota read
    UNBOUND 1, as if it were there to take)."""
    marks = cannot_bind(view, cells) if cells is not None else {}
    rows: list[dict[str, Any]] = []
    for vc in view.get("virtualClusters") or []:
        pods, gpus = vc.get("pods") or {}, vc.get("gpus") or {}
        totals = {
            "guaranteed-pods": pods.get("guaranteed", 0),
            "guaranteed-gpus": gpus.get("guaranteed", 0),
            "opportunistic-pods": pods.get("opportunistic", 0),
            "opportunistic-gpus": gpus.get("opportunistic", 0),
        }
        rows_of_vc = vc.get("cells") or [{}]
        for cell in rows_of_vc:
            rows.append({
                "vc": vc.get("name"),
                "cell-type": cell.get("cellType"),
                "gpus/cell": cell.get("gpusPerCell"),
                "quota": cell.get("quota"),
                "bound": cell.get("bound"),
                "unbound": max(int(cell.get("quota") or 0) - int(cell.get("bound") or 0), 0) if cell else None,
                "draining": cell.get("draining"),
                "pinned": cell.get("pinned"),
                CANNOT_BIND: marks.get((str(vc.get("name")), str(cell.get("cellType")))),
                **(totals if len(rows_of_vc) == 1 else {}),
            })
        if len(rows_of_vc) > 1:
            rows.append({"vc": vc.get("name"), "cell-type": TOTAL_ROW, **totals})
    return rows


def vc_columns(rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """:data:`VC_COLUMNS`, with ``cannot-bind`` where a VC has cells that cannot serve it now."""
    return (*VC_COLUMNS, CANNOT_BIND) if any(row.get(CANNOT_BIND) for row in rows) else VC_COLUMNS


def cannot_bind(view: Mapping[str, Any], cells: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """(VC, cell type) -> what of its quota cannot serve it now: its bound cells with bad GPUs
    (HiveD places nothing on a node cordoned, not ready, deleted while its pods run, or short
    of GPUs), and its quota not bound where the cluster has too few free healthy cells of the
    type for every VC's quota not bound (a deleted node leaves the tree: the VCs then reserve
    more than it holds). One VC's share of that shortfall is not known (HiveD binds first come),
    so each VC short of cells is marked with the cluster's count."""
    free = free_healthy_cells(cells)
    marks: dict[tuple[str, str], list[str]] = {}
    causes = _causes(view)
    for (vc, kind), ids in _bad_roots(cells).items():
        named = ", ".join(_with_causes(cell_id, causes.get((vc, cell_id), {})) for cell_id in sorted(ids))
        marks[vc, kind] = [f"{len(ids)} bound on bad nodes ({named})"]
    unbound = {(str(vc.get("name")), kind): missing for vc in view.get("virtualClusters") or []
               for kind, missing in unbound_cells(vc).items()}
    wanted: dict[str, int] = {}
    for (_, kind), missing in unbound.items():
        wanted[kind] = wanted.get(kind, 0) + missing
    for key, missing in unbound.items():
        have = free.get(key[1], 0)
        if wanted[key[1]] > have:
            marks.setdefault(key, []).append(f"{missing} unbound: {have} free healthy cell{'s' if have != 1 else ''} "
                                             f"for {wanted[key[1]]} unbound in all VCs")
    return {key: "; ".join(said) for key, said in marks.items()}


def _causes(view: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, str]]:
    """(VC, cell id) -> node -> why HiveD counts the node bad (``deleted``, ``cordoned``, ...),
    from each VC's ``cannotBind`` (the engine's own knowledge, where it gives it)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for vc in view.get("virtualClusters") or []:
        for entry in vc.get("cannotBind") or []:
            found.setdefault((str(vc.get("name")), str(entry.get("cell"))), {})[str(entry.get("node"))] = str(entry.get("cause"))
    return found


def _with_causes(cell_id: str, causes: Mapping[str, str]) -> str:
    """``gpu-3 deleted`` for a node cell, ``rack-a: gpu-3 deleted, gpu-4 cordoned`` for a larger
    one, the id alone where no cause is known."""
    if not causes:
        return cell_id
    if list(causes) == [cell_id]:
        return f"{cell_id} {causes[cell_id]}"
    return f"{cell_id}: " + ", ".join(f"{node} {cause}" for node, cause in sorted(causes.items()))


def unbound_cells(vc: Mapping[str, Any]) -> dict[str, int]:
    """A VC's quota not bound yet, by cell type (its ``cells`` rows)."""
    found = {str(row.get("cellType")): int(row.get("quota") or 0) - int(row.get("bound") or 0) for row in vc.get("cells") or []}
    return {kind: missing for kind, missing in found.items() if missing > 0}


def _broken(cell: Mapping[str, Any]) -> bool:
    return int((cell.get("gpus") or {}).get("bad") or 0) > 0 or cell.get("healthy") is False


def _walk(cells: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
    """Every cell of the tree with its parent, depth first."""
    found: list[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = []
    stack: list[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = [(top, None) for top in reversed(cells.get("cells") or [])]
    while stack:
        cell, parent = stack.pop()
        found.append((cell, parent))
        stack.extend((child, cell) for child in reversed(cell.get("children") or []))
    return found


def free_healthy_cells(cells: Mapping[str, Any]) -> dict[str, int]:
    """Cells of each type free (inside a free larger one too) with no bad GPU: what HiveD may
    still bind for a VC's quota not bound."""
    free: dict[str, int] = {}
    for cell, _ in _walk(cells):
        if cell.get("state") == "free" and not _broken(cell):
            free[str(cell.get("cellType"))] = free.get(str(cell.get("cellType")), 0) + 1
    return free


def _bad_roots(cells: Mapping[str, Any]) -> dict[tuple[str, str], list[str]]:
    """(VC, cell type) -> the ids of the VC's bound cells (the top of each binding) with bad GPUs."""
    bound = ("bound", "pinned")
    found: dict[tuple[str, str], list[str]] = {}
    for cell, parent in _walk(cells):
        vc = cell.get("vc")
        if cell.get("state") not in bound or not vc or not _broken(cell):
            continue
        if parent is not None and parent.get("vc") == vc and parent.get("state") in bound:
            continue
        found.setdefault((str(vc), str(cell.get("cellType"))), []).append(str(cell.get("id")))
    return found


def largest_node_cell(cells: Mapping[str, Any]) -> tuple[str, int] | None:
    """The node-level cell type of the tree with the most GPUs, and how many (the first such
    type in tree order); None for a tree without node cells. What HiveD's filter measures a
    pod's GPUs against (scheduler/cells/planning.py: more than any node-level cell holds)."""
    nodes = [(str(cell.get("cellType")), int((cell.get("gpus") or {}).get("total") or 0))
             for cell, _ in _walk(cells) if "healthy" in cell]
    return max(nodes, key=lambda node: node[1], default=None)


def unhealthy_nodes(cells: Mapping[str, Any]) -> list[str]:
    """The node cells of the tree HiveD counts unhealthy (a node cordoned, not ready, deleted
    while its pods run, short of GPUs), by id: a node's name."""
    return [str(cell.get("id")) for cell, _ in _walk(cells) if cell.get("healthy") is False]


def bad_nodes(vc: Mapping[str, Any]) -> list[str]:
    """The nodes of a VC's bound cells with bad GPUs (``/v1/inspect/virtual-clusters/{vc}``'s ``vcCells``)."""
    return sorted({str(n) for cell in vc.get("vcCells") or [] if _broken(cell) for n in cell.get("nodes") or []})


def cell_rows(view: Mapping[str, Any], *, gpus: bool) -> list[dict[str, Any]]:
    """The physical tree depth first, indented by level; GPU cells only with ``gpus`` (a whole
    cluster's GPUs are thousands of rows: ``--node`` shows them)."""
    rows: list[dict[str, Any]] = []

    def walk(cell: Mapping[str, Any], depth: int) -> None:
        if cell.get("level") == 1 and not gpus:
            return
        counts = cell.get("gpus") or {}
        leaf = cell.get("level") == 1
        rows.append({
            "cell": "  " * depth + str(cell.get("id")),
            "type": cell.get("cellType"),
            "state": cell.get("state"),
            "vc": cell.get("vc"),
            "gpus": 1 if leaf else counts.get("total"),
            "idle": (0 if cell.get("pods") or cell.get("bad") else 1) if leaf else counts.get("idle"),
            "guaranteed": (1 if cell.get("priority") == "guaranteed" else 0) if leaf else counts.get("guaranteed"),
            "opportunistic": (1 if cell.get("priority") == "opportunistic" else 0) if leaf else counts.get("opportunistic"),
            # A GPU's pods: its guaranteed owner, then the opportunistic one still leaving it.
            "leaving": (1 if cell.get("priority") == "guaranteed" and len(cell.get("pods") or []) > 1 else 0) if leaf
            else counts.get("leaving", 0),
            "bad": (1 if cell.get("bad") else 0) if leaf else counts.get("bad"),
            "pods": list(cell.get("pods") or []) if leaf else "",
        })
        for child in cell.get("children") or []:
            walk(child, depth + 1)

    for top in view.get("cells") or []:
        walk(top, 0)
    return rows


def queue_rows(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """AlloX's queue (``/v1/inspect/allox``), per kind in the matching's order, then the Jobs it
    holds outside the queue (``waiting``: no machine, its machines in use, its VC's quota), which
    ``kubectl cellfit why`` calls queued too: before, the queue printed "AlloX's queue is empty"
    while ``why`` said "queued by AlloX (NoMachine): ..." of a Job no machine fits."""
    rows = []
    for kind in sorted(view.get("queue") or {}):
        for row in sorted(view["queue"][kind], key=lambda r: r.get("position", 0)):
            rows.append({
                "job": row.get("job"),
                "kind": kind,
                "position": _position(row),
                "expected-start": expected_start(float(row.get("expectedStartSeconds") or 0.0)),
                "vc": row.get("virtualCluster"),
                # Backed off in its other kind after AlloX suspended it again (SuspendedAgain), and
                # the kinds AlloX refuses it in ("not on cpu: ..."), which its condition says too.
                **({"waiting": waiting} if (waiting := "; ".join(str(row[k]) for k in ("backingOff", "refused") if row.get(k))) else {}),
            })
    # Jobs AlloX holds without a place in the queue: no kind, position or start to give, but
    # waiting all the same (`why` says "queued by AlloX (NoMachine): ..." of each).
    for row in view.get("waiting") or []:
        if isinstance(row, Mapping):
            rows.append({"job": row.get("job"), "vc": row.get("virtualCluster"),
                         "waiting": f"{_WAITING.get(str(row.get('reason')), 'not queued')} ({row.get('reason')}): {row.get('message')}"})
    return rows


# How a Job held outside the queue waits, by its Placed condition's reason (placer/controller.py).
_WAITING = {"NoMachine": "no machine", "WaitingForMachine": "its machines in use", "WaitingForQuota": "its VC's quota",
            "SuspendedAgain": "backing off", "Refused": "refused"}


def queue_columns(rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """:data:`QUEUE_COLUMNS`, with ``waiting`` where a row is a Job held outside the queue."""
    return WAITING_COLUMNS if any(row.get("waiting") for row in rows) else QUEUE_COLUMNS


def _position(row: Mapping[str, Any]) -> Any:
    """``2 (starts with 1)``, ``4 (starts with 1-3)``: a Job expected to start at the same time
    as those before it (``startsWith``, the first of them), as machines freeing together start
    several; "1" and "2" with one expected start read as "the 2nd after the 1st"."""
    position, first = row.get("position"), row.get("startsWith")
    if not isinstance(position, int) or not isinstance(first, int) or first >= position:
        return position
    before = str(first) if position - first == 1 else f"{first}-{position - 1}"
    return f"{position} (starts with {before})"


def opportunistic_gpus(vc: Mapping[str, Any], cells: Mapping[str, Any] | None) -> int | None:
    """GPUs opportunistic pods use where the VC's guaranteed pods may go: on its bound cells, and,
    for its quota not bound, on the free cells of those types (``cells``, the tree, which HiveD
    may bind for it). None where its quota is not all bound and the tree was not read."""
    on_bound = sum(int((cell.get("gpus") or {}).get("opportunistic") or 0) for cell in vc.get("vcCells") or [])
    unbound = unbound_cells(vc)
    if not unbound:
        return on_bound
    if cells is None:
        return None
    # A free cell of a type the VC binds, not inside another counted: HiveD binds the largest first.
    counted = [cell for cell, parent in _walk(cells) if cell.get("state") == "free" and str(cell.get("cellType")) in unbound
               and not (parent is not None and parent.get("state") == "free" and str(parent.get("cellType")) in unbound)]
    return on_bound + sum(int((cell.get("gpus") or {}).get("opportunistic") or 0) for cell in counted)
