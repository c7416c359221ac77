"""``cellfit simulate --workload allox``: AlloX's experiments (EuroSys'20 §5) — the policies'
average JCT, the users' progress spread, utilisation per kind and the estimator's measured
error and overhead, or a sweep (α, load, sample noise, sampling fraction) — as a table,
``--output-json`` and ``--plots`` PNGs.

Registers :data:`COMMAND` with :mod:`scheduler.simulator.workloads`, which
:mod:`scheduler.simulator.cli` dispatches ``--workload allox`` through; options are parsed here,
and every bad value is one error naming the option (exit 2)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Final

from scheduler.config import Settings, load_settings
from scheduler.simulator.allox.experiment import (
    ALLOX_SWEEPS,
    DEFAULT_ALLOX_SWEEP_VALUES,
    RETIRED_SWEEPS,
    DEFAULT_SWEEP_POLICIES,
    AlloxExperiment,
    run_allox_experiment,
    run_allox_sweep,
)
from scheduler.simulator.allox.plots import plot_policies, plot_sweep
from scheduler.simulator.allox.policies import ADMISSION_POLICIES, ALPHA_POLICIES, PAPER_POLICIES, interchangeable_policy_names
from scheduler.simulator.allox.report import sweep_table, tables
from scheduler.simulator.allox.workload import ALLOX_CLUSTER, AlloxWorkload, describe
from scheduler.simulator.errors import InvalidWorkload
from scheduler.simulator.options import BadOption, apply_in_any_order, cluster_from, fail_option, parse_float, parse_int, policy_list
from scheduler.simulator.policy_registry import AlloxOptions, policy_names
from scheduler.simulator.progress import ProgressBar
from scheduler.simulator.report import document
from scheduler.simulator.session import RunReport, events_in, sweep_producer
from scheduler.simulator.workloads import SHARED_OPTIONS, AddsArguments, Command, Produce, register_workload

DEFAULT_JOBS: Final = 10_000  # §5.1: 10 users, "over 1000 jobs for each user"
DEFAULT_LOAD: Final = 0.9
DEFAULT_TIMEOUT_MINUTES: Final = 240.0


def _options(args: argparse.Namespace, configuration: Settings | None) -> AlloxOptions:
    """--alpha, --timeout and --omega-grid; without them, the --config file's ``allox`` section
    (what the live admission reads: its null timeout is none), else the paper's α 0.1, 240
    minutes and admission's own grid."""
    admission = configuration.allox if configuration is not None else None
    if args.alpha is not None:
        alpha = parse_float(args.alpha, "--alpha", low=0.0)
        if alpha > 1:
            fail_option("--alpha", f"{args.alpha!r} is not in [0, 1]")
    else:
        alpha = admission.alpha if admission is not None else 0.1
    if args.timeout is not None:
        text = args.timeout.strip().lower()
        seconds = math.inf if text in ("inf", "none", "unlimited") else parse_float(text, "--timeout", low=0.0) * 60.0
    elif admission is not None:  # null there: no timeout, as the live admission reads it
        seconds = admission.allox_plus_timeout_seconds or math.inf
    else:
        seconds = DEFAULT_TIMEOUT_MINUTES * 60.0
    grid: float | None = admission.omega_grid_seconds if admission is not None else None
    if args.omega_grid is not None:
        grid = parse_float(args.omega_grid, "--omega-grid", low=0.0)
        if not math.isfinite(grid):
            fail_option("--omega-grid", f"{args.omega_grid!r} is not finite")
    return AlloxOptions(alpha=alpha, timeout=seconds, omega_grid_seconds=grid)


def _workload(args: argparse.Namespace) -> AlloxWorkload:
    return apply_in_any_order(AlloxWorkload(), args.set, _apply)


def _apply(workload: AlloxWorkload, assignment: str) -> AlloxWorkload:
    key, equals, value = assignment.partition("=")
    key = key.strip()
    if not equals:
        fail_option("--set", f"{assignment!r} is not KEY=VALUE")
    if not key.startswith("allox."):
        fail_option(f"--set {key}", f"{key!r} is not a parameter of workload allox (its keys start with 'allox.')")
    try:
        return workload.with_parameter(key, parse_float(value, f"--set {key}"))
    except InvalidWorkload as error:
        raise BadOption(str(error), field=f"--set {key}") from None


def _refuse_unread(args: argparse.Namespace, *, names: list[str], sweep: str | None) -> None:
    """An option no policy of the run reads (α is AlloX's, the grid admission's), or one the
    sweep sets at each value: taken silently, the table would look as if it had been applied.
    (``--timeout`` without allox+ stays accepted: the settings document records it, and
    tests/simulator/test_allox_cli.py reads it back so.)"""
    reads_alpha = any(name in ALPHA_POLICIES for name in names)
    readers = {
        "--alpha": (args.alpha, reads_alpha, "allox"),
        "--omega-grid": (args.omega_grid, any(name in ADMISSION_POLICIES for name in names), "allox or allox+"),
    }
    for option, (given, read, by) in readers.items():
        if given is not None and not read:
            fail_option(option, f"only {by} reads it, and --policies runs {', '.join(names)}")
    if sweep == "alpha" and not reads_alpha:
        fail_option("--sweep", f"alpha changes allox only, and --policies runs {', '.join(names)}")
    if sweep == "alpha" and args.alpha is not None:
        fail_option("--alpha", "sweep alpha sets it to each of --sweep-values")


def _sweep_values(name: str, text: str | None) -> list[float]:
    if text is None:
        return list(DEFAULT_ALLOX_SWEEP_VALUES[name])
    values = [parse_float(part.strip(), "--sweep-values", low=0.0) for part in text.split(",") if part.strip()]
    if not values:
        fail_option("--sweep-values", "no value given")
    if name == "alpha" and any(v > 1 for v in values):
        fail_option("--sweep-values", "alpha values are in [0, 1]")
    if name == "load" and any(v <= 0 for v in values):
        fail_option("--sweep-values", "loads are positive")
    if name == "sample-noise" and any(v > 1 for v in values):
        fail_option("--sweep-values", "sample-noise values are in [0, 1]")
    if name == "sampling-fraction" and any(v <= 0 or v > 0.5 for v in values):
        fail_option("--sweep-values", "sampling-fraction values are in (0, 0.5]")
    return values


def _experiment(args: argparse.Namespace, sweep: str | None) -> AlloxExperiment:
    workload = _workload(args)
    configuration = load_settings(args.config) if args.config else None
    options = _options(args, configuration)
    cluster = cluster_from(args, ALLOX_CLUSTER)
    jobs = DEFAULT_JOBS if args.jobs is None else parse_int(args.jobs, "--jobs", low=1)
    load = parse_float(args.load if args.load is not None else str(DEFAULT_LOAD), "--load", positive=True)
    if not math.isfinite(load):
        fail_option("--load", f"{args.load!r} is not finite")
    seed = parse_int(args.seed, "--seed", low=0)
    repeat = parse_int(args.repeat, "--repeat", low=1)
    default = ",".join(DEFAULT_SWEEP_POLICIES[sweep] if sweep else PAPER_POLICIES)
    names = policy_list(
        args.policies if args.policies is not None else default,
        interchangeable_policy_names(),
        workload="allox",
        other=policy_names("demand"),
    )
    _refuse_unread(args, names=names, sweep=sweep)
    machines = workload.machines(cluster)
    if not machines:
        fail_option("--nodes", "the cluster has no GPU and no CPU slot of allox.cpu_slot_cores cores")
    return AlloxExperiment(
        cluster=cluster,
        workload=workload,
        load=load,
        jobs=jobs,
        seeds=tuple(range(seed, seed + repeat)),
        variants=AlloxExperiment.variants_for(names, options),
        configuration=configuration,
    )


def _settings_document(args: argparse.Namespace, experiment: AlloxExperiment) -> dict[str, object]:
    options = experiment.variants[0].options
    machines = experiment.workload.machines(experiment.cluster)
    return {
        "workload": "allox",
        "load": experiment.load,
        "jobs": experiment.jobs,
        "seeds": list(experiment.seeds),
        "nodes": experiment.cluster.nodes,
        "node": experiment.cluster.node.describe(),
        "machines": {kind: sum(1 for m in machines if m.kind == kind) for kind in ("gpu", "cpu")},
        "alpha": options.alpha,
        "timeout_minutes": None if math.isinf(options.timeout) else options.timeout / 60.0,
        "omega_grid_seconds": options.omega_grid_seconds,  # null: admission's own (the live) grid
        "config": args.config,
        "parameters": describe(experiment.workload),
        "set": list(args.set),
    }


def _prepare(args: argparse.Namespace) -> Produce:
    sweep: str | None = args.sweep
    if sweep in RETIRED_SWEEPS:
        fail_option("--sweep", f"{sweep!r} is no longer a sweep: {RETIRED_SWEEPS[sweep]}")
    if sweep is not None and sweep not in ALLOX_SWEEPS:
        fail_option("--sweep", f"unknown sweep {sweep!r} for workload allox (known: {', '.join(ALLOX_SWEEPS)})")
    experiment = _experiment(args, sweep)
    workers = parse_int(args.workers, "--workers", low=1)
    values = _sweep_values(sweep, args.sweep_values) if sweep is not None else []
    meta = _settings_document(args, experiment)

    if sweep is not None:
        return sweep_producer(
            sweep=sweep,
            run=lambda progress: run_allox_sweep(sweep, values, experiment, workers=workers, progress=progress),
            table=sweep_table,
            draw=plot_sweep,
            png=f"allox-sweep-{sweep}.png",
            title=f"AlloX sweep over {sweep}",
            settings=meta,
        )

    def produce_experiment(progress: ProgressBar) -> RunReport:
        outcome = run_allox_experiment(experiment, workers=workers, progress=progress)

        def plot(folder: Path) -> list[Path]:
            title = f"AlloX workload, load {experiment.load:g}, {experiment.jobs} jobs"
            return [plot_policies(outcome.summaries, folder / "allox.png", title=title)]

        return RunReport(
            table=tables(outcome.summaries),
            document=document(outcome.summaries, settings=meta),
            events=events_in(outcome.runs),
            plot=plot,
        )

    return produce_experiment


def _add_arguments(group: AddsArguments) -> None:
    """The ``allox`` workload's own options."""
    group.add_argument("--alpha", default=None, help="AlloX's fairness knob in [0, 1] (default 0.1, as in §5.1)")
    group.add_argument("--timeout", default=None, help="AlloX+'s waiting timeout in minutes (default 240; 'inf' disables it)")
    group.add_argument(
        "--omega-grid",
        default=None,
        metavar="SECONDS",
        help="allox, allox+: the grid AlloX admission rounds busy machines' expected ends onto "
        "(default: admission's own, what the live controller uses: 60 s steps, then +25%%; 0: exact)",
    )


COMMAND: Final = Command(name="allox", title="allox workload", reads=SHARED_OPTIONS, add_arguments=_add_arguments, prepare=_prepare)
register_workload(COMMAND)
