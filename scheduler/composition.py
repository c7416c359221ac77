"""The engine composition ``cellfit serve`` runs, built here so that every driver builds the
same object: the extender (``scheduler.extender.runtime``) and the simulator, which may not
import the extender. The placement engine (resource fit, or HiveD's cells) inside FitGpp's
preemption with its resume holds, unless ``preemption.policy`` is ``placement``.

The composition knows what it built, so it hands the drivers each part as a typed capability
(:class:`Composition`): the engine every verb and the watch drive, FitGpp's preemption with its
explanations, the resume holds, and HiveD's cells (inspection, reconfiguration, bookings).
No driver has to ask an engine what it is.

The engines of a composition share one :class:`~scheduler.core.nodeindex.NodeIndex`, the
placement engine's (resource fit: the cluster's Nodes; HiveD: its cell nodes and the Nodes
applied), which FitGpp reads through it: every driver turns offered node names into its slots
(``engine.node_index``, through ``scheduler.kube.names``) and the engines answer by position.

No I/O: discovering HiveD's cells from the cluster's Nodes is the caller's (it passes them),
and time comes from the ``clock`` the caller passes (the wall clock live, the virtual clock in
simulation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from scheduler.cells import HivedEngine
from scheduler.cells.capabilities import Cells
from scheduler.config import PreemptionSettings, Settings
from scheduler.core.engine import SchedulingEngine, TracksJobs
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo
from scheduler.core.pods import PodStore
from scheduler.preemption.engine import DEFAULT_SCHEDULER_NAME, ExplainedPreemption, FitGppEngine
from scheduler.preemption.holds import Clock, RoomHolds
from scheduler.preemption.model import FitGppSettings


@dataclass(frozen=True, slots=True)
class Composition:
    """The engine and what the drivers may do with it beyond the
    :class:`~scheduler.core.engine.SchedulingEngine` verbs; ``None`` where the composition has
    no such part."""

    engine: SchedulingEngine  # the verbs and the watch go here
    pods: PodStore  # the one record of the pods (see assemble)
    placement: SchedulingEngine  # filter, prioritize and bookings, inside any preemption
    preemption: ExplainedPreemption | None  # FitGpp: victims with their explanation, Job counts
    holds: RoomHolds | None  # FitGpp's preemptor and resume holds, for inspection and metrics
    cells: Cells | None  # HiveD: cell inspection, reconfiguration, bookings to sweep (capabilities.py)
    jobs: TracksJobs | None  # what follows Jobs (a gang's width, preemption counts): the Job watch feeds it


def compose(
    settings: Settings,
    *,
    connected: bool,
    clock: Clock,
    nodes: Sequence[NodeInfo] | None = None,
    on_cells_change: Callable[[str], None] | None = None,
) -> Composition:
    """Everything ``settings`` ask for (see :func:`compose_cells` for the placement)."""
    cells = compose_cells(settings, connected=connected, nodes=nodes, on_cells_change=on_cells_change, clock=clock)
    return assemble_configured(settings, cells=cells, clock=clock)


def assemble_configured(settings: Settings, *, cells: HivedEngine | None, clock: Clock, pods: PodStore | None = None) -> Composition:
    """:func:`assemble` with what ``settings`` say of it, around ``cells`` as the driver made them:
    the one place `cellfit serve` (which discovers cells through its API client) and the
    simulator both read the settings that shape the composition."""
    return assemble(cells=cells, preemption=settings.preemption, clock=clock, pods=pods,
                    best_nodes=settings.policy.offer_best_nodes, scheduler_name=settings.nudge.scheduler_name)


def compose_engine(
    settings: Settings,
    *,
    connected: bool,
    clock: Clock,
    nodes: Sequence[NodeInfo] | None = None,
    on_cells_change: Callable[[str], None] | None = None,
) -> SchedulingEngine:
    """The engine alone, for drivers that need nothing else."""
    return compose(settings, connected=connected, clock=clock, nodes=nodes, on_cells_change=on_cells_change).engine


def compose_cells(
    settings: Settings,
    *,
    connected: bool,
    nodes: Sequence[NodeInfo] | None = None,
    on_cells_change: Callable[[str], None] | None = None,
    clock: Clock,
) -> HivedEngine | None:
    """HiveD's cells from ``cells.topology`` or, without one, from ``nodes`` (the cluster's
    Nodes, listed by the caller); None where the policy is resource fit."""
    if settings.resolved_policy(connected=connected) == "resource-fit":
        return None
    return HivedEngine.from_config(
        settings.cells, nodes=nodes, rack_label=settings.policy.rack_label, prefix="cells", on_change=on_cells_change,
        clock=clock,
    )


def assemble(
    *, cells: HivedEngine | None, preemption: PreemptionSettings, clock: Clock, pods: PodStore | None = None,
    best_nodes: int | None = None, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
) -> Composition:
    """HiveD's cells, or resource fit without them (its filter passing on only its
    ``best_nodes`` best-scored nodes when given: ``policy.offerBestNodes``), inside FitGpp's
    preemption as ``preemption`` asks. FitGpp's holds take the nodes they keep off a pod out of
    what resource fit filters, so its best nodes are among those the pod may use.

    ``pods``: the pods' one record, when the driver keeps it (the watch cache records each pod
    before the engine hears of it, and forgets it after); without it the engine keeps its own
    from the events it is given (the simulator, tests).
    ``scheduler_name``: the kube-scheduler profile served (``nudge.schedulerName``), whose
    preemptions FitGpp trusts when it rebuilds its holds after a restart."""
    placement: SchedulingEngine = cells if cells is not None else ResourceFitEngine(best_nodes=best_nodes)
    return with_preemption(placement, preemption, clock=clock, pods=pods, cells=cells, scheduler_name=scheduler_name)


def with_preemption(
    placement: SchedulingEngine, preemption: PreemptionSettings, *, clock: Clock, pods: PodStore | None = None,
    cells: HivedEngine | None = None, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
) -> Composition:
    """Any placement engine inside FitGpp's preemption (victims, P, resume holds timed by
    ``clock``), or alone under ``preemption.policy: placement``. ``cells``: the placement, when
    it is HiveD's (it then follows Jobs without FitGpp too); ``pods`` as :func:`assemble`."""
    fitgpp = _fitgpp(placement, preemption, clock=clock, pods=pods, scheduler_name=scheduler_name)
    if fitgpp is None:
        return Composition(engine=placement, pods=pods if pods is not None else PodStore(), placement=placement,
                           preemption=None, holds=None, cells=cells, jobs=cells)
    return Composition(engine=fitgpp, pods=fitgpp.pods, placement=placement, preemption=fitgpp, holds=fitgpp.holds, cells=cells,
                       jobs=fitgpp)


def _fitgpp(
    placement: SchedulingEngine, preemption: PreemptionSettings, *, clock: Clock, pods: PodStore | None, scheduler_name: str,
) -> FitGppEngine | None:
    if preemption.policy == "placement":
        return None
    return FitGppEngine(
        placement,
        settings=FitGppSettings(grace_period_weight=preemption.grace_period_weight, max_preemptions=preemption.max_preemptions),
        seed=preemption.seed,
        resume_hold_seconds=preemption.resume_hold_seconds,
        clock=clock,
        pods=pods,
        scheduler_name=scheduler_name,
    )
