"""``cellfit simulate --workload hived``: HiveD's sharing-anomaly experiment (§2, §5.2) — the
same multi-tenant arrivals on each tenant's private cluster, on the shared cluster under HiveD,
and under a quota-only baseline (spreading and packing) — as Markdown tables, ``--output-json``
and a ``--plots`` PNG.

Registers :data:`COMMAND` with :mod:`scheduler.simulator.workloads`, which
:mod:`scheduler.simulator.cli` dispatches ``--workload hived`` through; every bad value is one
error naming the option (exit 2)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Final

from scheduler.simulator.errors import InvalidWorkload
from scheduler.simulator.hived.experiment import (
    DEFAULT_LOADS,
    HIVED_SWEEPS,
    run_hived_sweep,
    DEFAULT_JOBS,
    SETTINGS,
    HivedExperiment,
    run_hived_experiment,
)
from scheduler.simulator.hived.report import document, sweep_document, sweep_table, tables
from scheduler.simulator.hived.results import summarise_outcome
from scheduler.simulator.hived.simulation import QUEUES
from scheduler.simulator.hived.workload import HivedWorkload
from scheduler.simulator.options import (
    BadOption,
    apply_in_any_order,
    fail_option,
    parse_float,
    parse_int,
    policy_list,
)
from scheduler.simulator.progress import ProgressBar
from scheduler.simulator.session import RunReport, events_in
from scheduler.simulator.workloads import SHARED_OPTIONS, AddsArguments, Command, Produce, register_workload

SET_KEYS: Final = ("hived.queue", "hived.duration_low", "hived.duration_high", "hived.load.<tenant>")


def _workload_and_queue(args: argparse.Namespace) -> tuple[HivedWorkload, str]:
    workload = HivedWorkload()
    if args.load is not None:
        workload = replace(workload, load=parse_float(args.load, "--load", positive=True))
    return apply_in_any_order((workload, "fifo"), args.set, _apply)


def _apply(state: tuple[HivedWorkload, str], assignment: str) -> tuple[HivedWorkload, str]:
    """One ``--set`` on (the workload, the queue)."""
    workload, queue = state
    key, equals, value = assignment.partition("=")
    key, value = key.strip(), value.strip()
    if not equals:
        fail_option("--set", f"{assignment!r} is not KEY=VALUE")
    option = f"--set {key}"
    try:
        if key == "hived.queue":
            if value not in QUEUES:
                fail_option(option, f"{value!r} is not one of {', '.join(QUEUES)}")
            return workload, value
        if key == "hived.duration_low":
            return replace(workload, duration_low=parse_float(value, option, positive=True)), queue
        if key == "hived.duration_high":
            return replace(workload, duration_high=parse_float(value, option, positive=True)), queue
        if key.startswith("hived.load."):
            tenants = {t.name: t for t in workload.tenants}
            name = key[len("hived.load.") :]
            if name not in tenants:
                fail_option(option, f"no tenant {name!r} (tenants: {', '.join(tenants)})")
            tenants[name] = replace(tenants[name], load=parse_float(value, option, positive=True))
            return replace(workload, tenants=tuple(tenants.values())), queue
        fail_option(option, f"{key!r} is not a parameter of workload hived (keys: {', '.join(SET_KEYS)})")
    except InvalidWorkload as error:
        message = str(error).removeprefix(f"{error.field}: ") if error.field else str(error)
        raise BadOption(message, field=option) from None


def _sweep_values(text: str | None) -> list[float]:
    if text is None:
        return list(DEFAULT_LOADS)
    values = [parse_float(part.strip(), "--sweep-values", positive=True) for part in text.split(",") if part.strip()]
    if not values:
        fail_option("--sweep-values", "no value given")
    return values


def _prepare(args: argparse.Namespace) -> Produce:
    workload, queue = _workload_and_queue(args)
    jobs = DEFAULT_JOBS if args.jobs is None else parse_int(args.jobs, "--jobs", low=1)
    seed = parse_int(args.seed, "--seed", low=0)
    repeat = parse_int(args.repeat, "--repeat", low=1)
    workers = parse_int(args.workers, "--workers", low=1)
    settings = policy_list(args.policies if args.policies is not None else ",".join(SETTINGS), list(SETTINGS), workload="hived", other=[])
    experiment = HivedExperiment(
        workload=workload, jobs=jobs, seeds=tuple(range(seed, seed + repeat)), settings=tuple(settings), queue=queue
    )
    meta: dict[str, object] = {
        "workload": "hived",
        "jobs": jobs,
        "seeds": list(experiment.seeds),
        "queue": queue,
        "cluster": {"racks": workload.shape.racks, "nodes_per_rack": workload.shape.nodes_per_rack, "gpus_per_node": workload.shape.gpus_per_node},
        "load": workload.load,
        "duration_minutes": [workload.duration_low, workload.duration_high],
        "tenants": {
            t.name: {"racks": t.racks, "nodes": t.nodes, "load": t.load, "sizes": {str(g): s for g, s in t.sizes}}
            for t in workload.tenants
        },
        "set": list(args.set),
    }

    sweep: str | None = args.sweep
    if sweep is not None and sweep not in HIVED_SWEEPS:
        fail_option("--sweep", f"unknown sweep {sweep!r} for workload hived (known: {', '.join(HIVED_SWEEPS)})")
    values = _sweep_values(args.sweep_values) if sweep is not None else []

    def produce(progress: ProgressBar) -> RunReport:
        outcome = run_hived_experiment(experiment, workers=workers, progress=progress)
        summaries = summarise_outcome(outcome.runs)

        def plot(folder: Path) -> list[Path]:
            from scheduler.simulator.hived.plots import plot_delays

            seeds = experiment.seeds
            which = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"
            title = f"HiveD workload: {jobs} jobs, queue {queue}, {which}"
            name = "hived-delay.png" if queue == "fifo" else f"hived-delay-{queue}.png"
            return [plot_delays(summaries, folder / name, title=title)]

        return RunReport(
            table=tables(summaries),
            document=document(summaries, settings=meta),
            events=events_in(outcome.runs),
            plot=plot,
        )

    def produce_sweep(progress: ProgressBar) -> RunReport:
        points = run_hived_sweep(experiment, values, workers=workers, progress=progress)

        def plot(folder: Path) -> list[Path]:
            from scheduler.simulator.hived.plots import plot_load_sweep

            title = f"HiveD workload over the load: {jobs} jobs, queue {queue}"
            name = "hived-sweep-load.png" if queue == "fifo" else f"hived-sweep-load-{queue}.png"
            return [plot_load_sweep(points, folder / name, title=title)]

        return RunReport(
            table=sweep_table(points),
            document=sweep_document(points, settings=meta),
            events=sum(s.events for p in points for s in p.summaries.values()),
            plot=plot,
        )

    return produce_sweep if sweep is not None else produce


def _add_arguments(group: AddsArguments) -> None:
    """No options of its own: its parameters are ``--set hived.*``."""


# Neither the cluster options nor --config: its clusters and configurations are its settings.
_READS: Final = SHARED_OPTIONS - {"nodes", "node_cpu", "node_memory", "node_gpus", "config"}
COMMAND: Final = Command(name="hived", title="hived workload", reads=_READS, add_arguments=_add_arguments, prepare=_prepare)
register_workload(COMMAND)
