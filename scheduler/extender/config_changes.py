"""What a new configuration file changes in a running cellfit: the decision behind live reload.

Only the virtual clusters can change live, because HiveD was designed for it
(``HivedEngine.reconfigure``: a shrink never evicts, the VC's surplus cells drain as their pods
finish; HiveD §3, "work-preserving reconfiguration"). Everything else is wired into objects built
once at startup (listeners, the cluster connection, the engine stack, the cell tree), so a change
there is reported as needing a restart and not applied: half-applying it would leave a process
that matches neither the old file nor the new one. Kept free of files, threads and logging so that
every case is a plain unit test; ``configuration.ConfigReloader`` is the adapter around it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel

from scheduler.cells import CellsConfig
from scheduler.cells.capabilities import CellReconfiguration
from scheduler.config import Settings
from scheduler.errors import ConfigError

# The outcomes counted by cellfit_config_reloads_total (metrics.CONFIG_RELOAD_RESULTS); a file
# whose settings did not change (a comment, a reordering) is none of them.
ReloadResult = Literal["applied", "invalid", "needs_restart"]


@dataclass(frozen=True)
class ReloadPlan:
    """``cells``: the section to hand to ``HivedEngine.reconfigure`` (None: nothing to apply).
    ``restart``: each changed top-level key that waits for a restart, with why."""

    cells: CellsConfig | None = None
    restart: Mapping[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.cells is not None or bool(self.restart)


@dataclass(frozen=True)
class Reload:
    """The outcome of one new file. ``running``: the settings in effect afterwards (the old ones
    with whatever was applied), the baseline for the next file. ``applied``: the top-level keys
    applied live. ``quotas``: per VC whose guarantee changed, ``"before -> after"``."""

    result: ReloadResult | None
    running: Settings
    applied: tuple[str, ...] = ()
    restart: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""
    quotas: Mapping[str, str] = field(default_factory=dict)


def plan_reload(running: Settings, new: Settings, *, live_cells: bool) -> ReloadPlan:
    """Which changed top-level sections of ``new`` apply live and which wait for a restart.
    ``live_cells``: a HiveD engine is running (resource-fit has no virtual clusters to change)."""
    restart: dict[str, str] = {}
    cells: CellsConfig | None = None
    for name, info in Settings.model_fields.items():
        if getattr(running, name) == getattr(new, name):
            continue
        key = info.alias or name
        if name != "cells":
            restart[key] = f"{', '.join(_changed_fields(getattr(running, name), getattr(new, name), key))} changed: needs a restart"
            continue
        why = _cells_need_restart(running.cells, new.cells, live_cells=live_cells)
        if why:
            restart[key] = why
        else:
            cells = new.cells
    return ReloadPlan(cells=cells, restart=restart)


def _changed_fields(old: Any, new: Any, path: str) -> list[str]:
    """The settings under ``path`` that differ, as the file names them (``preemption.maxPreemptions``),
    down to the first value that is not a section of its own."""
    if isinstance(old, BaseModel) and type(old) is type(new):
        found = [changed
                 for name, info in type(old).model_fields.items() if getattr(old, name) != getattr(new, name)
                 for changed in _changed_fields(getattr(old, name), getattr(new, name), f"{path}.{info.alias or name}")]
        return found or [path]
    return [path]


def _cells_need_restart(running: CellsConfig, new: CellsConfig, *, live_cells: bool) -> str | None:
    if not live_cells:
        return "the running policy has no virtual clusters (resource-fit): needs a restart"
    if running.topology != new.topology:
        # A new cell tree is a new engine, rebuilt from the pods' bind-info at startup.
        return "topology changed: needs a restart"
    if running.virtual_clusters and not new.virtual_clusters:
        return "virtualClusters removed (back to the implicit default VC): needs a restart"
    return None


def reload_settings(
    running: Settings, new: Settings, *, cells: CellReconfiguration | None, rebase: Callable[[CellsConfig], None] | None = None
) -> Reload:
    """Plan and apply in one step (the caller holds the engine lock throughout)."""
    return apply_reload(running, plan_reload(running, new, live_cells=cells is not None), cells=cells, rebase=rebase)


def apply_reload(
    running: Settings, plan: ReloadPlan, *, cells: CellReconfiguration | None, rebase: Callable[[CellsConfig], None] | None = None
) -> Reload:
    """Apply what ``plan`` (from :func:`plan_reload`) may change live to ``cells`` (the caller
    holds the engine lock; planning needs no lock, and comparing two large topologies under it
    would hold the verbs up). A VC change the running engine refuses (not feasible on the running
    cells, a pinned cell that still runs another VC's pods) leaves everything as it was: the
    result is ``invalid``. ``rebase``: what applies the new cells section instead of
    ``cells.reconfigure`` (the cell exchange's, which applies the exchanges under way on top of
    it, and refuses a section that leaves one of them impossible)."""
    if not plan.changed:
        return Reload(result=None, running=running)
    if plan.cells is None or cells is None:
        return Reload(result="needs_restart", running=running, restart=plan.restart)
    before = vc_guarantees(cells.inspect_virtual_clusters())
    try:
        if rebase is not None:
            rebase(plan.cells)
        else:
            cells.reconfigure(plan.cells, prefix="cells")
    except ConfigError as error:
        return Reload(result="invalid", running=running, restart=plan.restart, reason=str(error))
    return Reload(
        result="needs_restart" if plan.restart else "applied",
        running=running.model_copy(update={"cells": plan.cells}),
        applied=("cells",),
        restart=plan.restart,
        quotas=guarantee_changes(before, vc_guarantees(cells.inspect_virtual_clusters())),
    )


def vc_guarantees(inspected: Mapping[str, Any]) -> dict[str, str]:
    """``{"vision": "2 A100-NODE, pinned p"}`` for each configured VC of an inspect answer."""
    guarantees = {}
    for vc in inspected["virtualClusters"]:
        if not vc["configured"]:
            continue  # removed from the configuration; only draining pods keep it listed
        parts = [f"{cell['quota']} {cell['cellType']}" for cell in vc["cells"] if cell["quota"]]
        if vc["pinnedCells"]:
            parts.append(f"pinned {', '.join(vc['pinnedCells'])}")
        guarantees[vc["name"]] = ", ".join(parts) or "no cells"
    return guarantees


def guarantee_changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """``{"vision": "2 A100-NODE -> 1 A100-NODE", "new": "none -> 2 A100-PAIR"}``: the VCs whose
    guarantee changed, added or removed."""
    return {
        name: f"{before.get(name, 'none')} -> {after.get(name, 'none')}"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    }
