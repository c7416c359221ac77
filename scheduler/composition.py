"""The engine composition ``cellfit serve`` runs, built here so that every driver builds the
same object: the extender (``scheduler.extender.server``) and the simulator, which may not
import the extender. The placement engine (resource fit, or HiveD's cells) inside FitGpp's
preemption with its resume holds, unless ``preemption.policy`` is ``placement``.

No I/O: discovering HiveD's cells from the cluster's Nodes is the caller's (it passes them),
and time comes from the ``clock`` the caller passes (the wall clock live, the virtual clock in
simulation).
"""

from __future__ import annotations

from typing import Callable, Sequence

from scheduler.cells import HivedEngine
from scheduler.config import PreemptionSettings, Settings
from scheduler.core.engine import SchedulingEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo
from scheduler.preemption.engine import FitGppEngine
from scheduler.preemption.holds import Clock
from scheduler.preemption.model import FitGppSettings


def compose_engine(
    settings: Settings,
    *,
    connected: bool,
    clock: Clock,
    nodes: Sequence[NodeInfo] | None = None,
    on_cells_change: Callable[[str], None] | None = None,
) -> SchedulingEngine:
    """The whole engine ``settings`` ask for (see :func:`compose_placement` for the rest)."""
    placement = compose_placement(settings, connected=connected, nodes=nodes, on_cells_change=on_cells_change)
    return with_preemption(placement, settings.preemption, clock=clock)


def compose_placement(
    settings: Settings,
    *,
    connected: bool,
    nodes: Sequence[NodeInfo] | None = None,
    on_cells_change: Callable[[str], None] | None = None,
) -> SchedulingEngine:
    """Resource fit, or HiveD's cells from ``cells.topology`` or, without one, from ``nodes``
    (the cluster's Nodes, listed by the caller)."""
    if settings.resolved_policy(connected=connected) == "resource-fit":
        return ResourceFitEngine()
    return HivedEngine.from_config(
        settings.cells, nodes=nodes, rack_label=settings.policy.rack_label, prefix="cells", on_change=on_cells_change
    )


def with_preemption(placement: SchedulingEngine, preemption: PreemptionSettings, *, clock: Clock) -> SchedulingEngine:
    """``placement`` inside FitGpp's preemption (victims, P, resume holds timed by ``clock``),
    or alone under ``preemption.policy: placement``."""
    if preemption.policy == "placement":
        return placement
    return FitGppEngine(
        placement,
        settings=FitGppSettings(grace_period_weight=preemption.grace_period_weight, max_preemptions=preemption.max_preemptions),
        seed=preemption.seed,
        resume_hold_seconds=preemption.resume_hold_seconds,
        clock=clock,
    )
