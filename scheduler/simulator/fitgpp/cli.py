"""``cellfit simulate`` (``--workload fitgpp``, the default): the FitGpp experiments of
arXiv:1902.01613 §4 on cellfit's own scheduling core, or any trace, and the paper's tables.
Registers :data:`COMMAND` with :mod:`scheduler.simulator.workloads`; its options are parsed
here, and every bad value is one error naming the option (exit 2)."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from typing import Final

from scheduler.config import Settings, load_settings
from scheduler.preemption.model import FitGppSettings
from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.errors import InvalidWorkload
from scheduler.simulator.fitgpp.experiment import DEFAULT_SWEEP_VALUES, SWEEPS, Experiment, Outcome, Variant, run_experiment, run_sweep
from scheduler.simulator.fitgpp.plots import plot_slowdowns, plot_sweep
from scheduler.simulator.fitgpp.report import sweep_table, tables
from scheduler.simulator.fitgpp.trace import dump_trace, load_trace
from scheduler.simulator.fitgpp.workload import FitGppWorkload
from scheduler.simulator.options import BadOption, apply_in_any_order, cluster_from, fail_option, parse_float, parse_int, policy_list
from scheduler.simulator.policy_registry import policy_names
from scheduler.simulator.progress import ProgressBar
from scheduler.simulator.report import document
from scheduler.simulator.session import OutputError, RunReport, check_output_file, events_in, refuse_same_files, sweep_producer
from scheduler.simulator.workloads import SHARED_OPTIONS, AddsArguments, Command, Produce, register_workload, workload_named

_DEFAULT_POLICIES: Final = "fifo,lrtp,rand,fitgpp"


def _or(value: str | None, default: str) -> str:
    return default if value is None else value


def _settings(args: argparse.Namespace, configuration: Settings | None) -> FitGppSettings:
    """-s and -P; without them, the --config file's (else FitGpp's defaults, 4 and 1)."""
    preemption = configuration.preemption if configuration is not None else None
    weight_default = str(preemption.grace_period_weight) if preemption is not None else "4.0"
    limit_default = "1" if preemption is None else ("inf" if preemption.max_preemptions is None else str(preemption.max_preemptions))
    weight = parse_float(_or(args.grace_period_weight, weight_default), "--grace-period-weight", low=0.0)
    if not math.isfinite(weight):
        fail_option("--grace-period-weight", f"{args.grace_period_weight!r} is not finite")
    text = _or(args.max_preemptions, limit_default).strip().lower()
    limit = None if text in ("inf", "infinite", "none", "unlimited") else parse_int(text, "--max-preemptions", low=0)
    return FitGppSettings(grace_period_weight=weight, max_preemptions=limit)


def _cluster(args: argparse.Namespace) -> ClusterSpec:
    return cluster_from(args, ClusterSpec())


def _policies(text: str) -> list[str]:
    return policy_list(text, policy_names(), workload="fitgpp", other=policy_names("interchangeable"))


def _experiment(args: argparse.Namespace, settings: FitGppSettings, configuration: Settings | None) -> Experiment:
    if args.workload is not None and args.trace is not None:
        fail_option("--trace", "give either --workload or --trace")
    arrivals = args.arrivals or ("trace" if args.trace else "fifo-load")
    if arrivals not in ("fifo-load", "trace"):
        fail_option("--arrivals", f"{arrivals!r} is not fifo-load or trace")
    if arrivals == "trace" and not args.trace:
        fail_option("--arrivals", "trace arrivals need --trace FILE")
    trace = tuple(load_trace(args.trace)) if args.trace else None
    jobs_default = len(trace) if trace is not None else 2**16
    jobs = jobs_default if args.jobs is None else parse_int(args.jobs, "--jobs", low=1)
    if trace is not None:
        _refuse_for_trace(args, arrivals=arrivals, jobs=jobs, trace_jobs=len(trace))
    seed = parse_int(args.seed, "--seed", low=0)
    tick = parse_float(_or(args.tick, "0"), "--tick", low=0.0)
    if not math.isfinite(tick):
        fail_option("--tick", f"{args.tick!r} is not finite")
    repeat = parse_int(args.repeat, "--repeat", low=1)
    te_share = parse_float(_or(args.te_share, "0.3"), "--te-share", low=0.0)
    if te_share > 1:
        fail_option("--te-share", f"{args.te_share!r} is not a fraction in [0, 1]")
    gp_scale = parse_float(_or(args.gp_scale, "1.0"), "--gp-scale", low=0.0)
    if not math.isfinite(gp_scale):
        fail_option("--gp-scale", f"{args.gp_scale!r} is not finite")
    workload = FitGppWorkload(te_share=te_share, gp_scale=gp_scale)

    def apply(changed: FitGppWorkload, assignment: str) -> FitGppWorkload:
        key, equals, value = assignment.partition("=")
        if not equals:
            fail_option("--set", f"{assignment!r} is not KEY=VALUE")
        owner = key.strip().partition(".")[0]
        if owner != COMMAND.name and workload_named(owner) is not None:  # allox.*, hived.*
            if args.workload is None:
                fail_option(f"--set {key.strip()}", f"a parameter of workload {owner} only (add --workload {owner})")
            fail_option(f"--set {key.strip()}", f"not a parameter of workload {COMMAND.name}")
        try:
            return changed.with_parameter(key.strip(), parse_float(value, f"--set {key.strip()}"))
        except InvalidWorkload as error:
            raise BadOption(str(error), field=f"--set {key.strip()}") from None

    workload = apply_in_any_order(workload, args.set, apply)
    return Experiment(
        cluster=_cluster(args),
        workload=workload,
        trace=trace,
        arrivals=arrivals,  # type: ignore[arg-type]
        load=parse_float(_or(args.load, "2.0"), "--load", positive=True),
        jobs=jobs,
        seeds=tuple(range(seed, seed + repeat)),
        variants=Experiment.standard_variants(_policies(_or(args.policies, _DEFAULT_POLICIES)), settings),
        tick=tick,
        configuration=configuration,
    )


def _refuse_for_trace(args: argparse.Namespace, *, arrivals: str, jobs: int, trace_jobs: int) -> None:
    """Options that cannot change a run on a trace's jobs: taken silently, the tables would look
    as if they had been applied."""
    for option, given in (("--te-share", args.te_share), ("--gp-scale", args.gp_scale), ("--set", args.set)):
        if given:
            fail_option(option, "changes the synthetic workload, not the jobs of a --trace")
    if args.sweep in ("te-share", "gp-scale"):
        fail_option("--sweep", f"{args.sweep} changes the synthetic workload, not the jobs of a --trace")
    if arrivals == "trace" and args.load is not None:
        fail_option("--load", "only with --arrivals fifo-load: a trace's jobs arrive at their submit_time")
    if jobs > trace_jobs:
        fail_option("--jobs", f"{jobs} is more than the {trace_jobs} jobs of {Path(args.trace).name}")


def _refuse_for_fitgpp_sweep(args: argparse.Namespace, *, sweep: str, policies: list[str]) -> None:
    """A sweep prints its own table (no Table 4, no paper rows, no arrivals written), and the s
    and P sweeps run fitgpp alone at each swept value (Figs. 4, 5): other policies, or the swept
    parameter given as well, would be dropped without a word."""
    for option, given in (("--table4", args.table4), ("--paper", args.paper), ("--write-trace", args.write_trace)):
        if given:
            fail_option(option, "not with --sweep (a sweep prints its own table)")
    if sweep not in ("s", "P"):
        return
    if args.policies is not None and policies != ["fitgpp"]:
        fail_option("--policies", f"sweep {sweep} runs fitgpp alone (leave --policies out)")
    given = args.grace_period_weight if sweep == "s" else args.max_preemptions
    if given is not None:
        option = "--grace-period-weight" if sweep == "s" else "--max-preemptions"
        fail_option(option, f"sweep {sweep} sets it to each of --sweep-values")


def _sweep_values(name: str, text: str | None) -> list[float]:
    if text is None:
        return list(DEFAULT_SWEEP_VALUES[name])
    values = []
    for part in text.split(","):
        part = part.strip()
        if part.lower() in ("inf", "unlimited") and name == "P":
            values.append(math.inf)
            continue
        values.append(parse_float(part, "--sweep-values", low=0.0))
    if name == "P" and any(not math.isinf(v) and v != int(v) for v in values):
        fail_option("--sweep-values", "P values are whole numbers or inf")
    if name == "te-share" and any(v > 1 for v in values):
        fail_option("--sweep-values", "TE shares are fractions in [0, 1]")
    return values


def _settings_document(args: argparse.Namespace, experiment: Experiment, settings: FitGppSettings) -> dict[str, object]:
    return {
        "workload": "trace" if experiment.trace is not None else "fitgpp",
        "trace": args.trace,
        "arrivals": experiment.arrivals,
        "load": experiment.load,
        "jobs": experiment.jobs,
        "seeds": list(experiment.seeds),
        "nodes": experiment.cluster.nodes,
        "node": experiment.cluster.node.describe(),
        "te_share": experiment.workload.te_share,
        "gp_scale": experiment.workload.gp_scale,
        "set": list(args.set),
        "tick_seconds": experiment.tick,
        "s": settings.grace_period_weight,
        "P": settings.max_preemptions,
        "config": args.config,
    }


def _prepare(args: argparse.Namespace) -> Produce:
    refuse_same_files(
        [("--config", args.config), ("--trace", args.trace), ("--write-trace", args.write_trace), ("--output-json", args.output_json)]
    )
    if args.write_trace:
        check_output_file(args.write_trace, option="--write-trace")
    configuration = load_settings(args.config) if args.config else None
    if configuration is not None and configuration.preemption.policy != "fitgpp":
        # The workload's policies are FitGpp's experiments: the run would put FitGpp in its place.
        fail_option(
            "--config",
            f"preemption.policy {configuration.preemption.policy}: workload fitgpp runs FitGpp's preemption "
            "(leave preemption.policy out, or fitgpp)",
        )
    settings = _settings(args, configuration)
    experiment = _experiment(args, settings, configuration)
    workers = parse_int(args.workers, "--workers", low=1)
    sweep: str | None = args.sweep
    if sweep is not None and sweep not in SWEEPS:
        fail_option("--sweep", f"unknown sweep {sweep!r} for workload fitgpp (known: {', '.join(SWEEPS)})")
    meta = _settings_document(args, experiment, settings)

    if sweep is not None:
        policies = [v.policy for v in experiment.variants]
        _refuse_for_fitgpp_sweep(args, sweep=sweep, policies=policies)
        return sweep_producer(
            sweep=sweep,
            run=lambda progress: run_sweep(
                sweep, _sweep_values(sweep, args.sweep_values), experiment, policies, workers=workers, progress=progress
            ),
            table=sweep_table,
            draw=plot_sweep,
            png=f"sweep-{sweep}.png",
            title=f"FitGpp sweep over {sweep}",
            settings=meta,
        )

    def produce_experiment(progress: ProgressBar) -> RunReport:
        outcome = run_experiment(experiment, workers=workers, progress=progress)
        unlimited: Outcome | None = None
        if args.table4:
            free = replace(settings, max_preemptions=None)
            variants = tuple(
                Variant(label=v.label, policy=v.policy, settings=free) for v in experiment.variants if v.policy != "fifo"
            )
            if variants:
                unlimited = run_experiment(replace(experiment, variants=variants), workers=workers, progress=progress)
        if args.write_trace:
            try:
                dump_trace(outcome.arrivals[experiment.seeds[0]], args.write_trace)
            except OSError as error:
                raise OutputError(f"cannot write {args.write_trace}: {error.strerror or error}") from None
        unlimited_summaries = unlimited.summaries if unlimited else None

        def plot(folder: Path) -> list[Path]:
            return [plot_slowdowns(outcome.summaries, folder / "slowdown.png", title="Job slowdown rates")]

        events = events_in(outcome.runs)
        if unlimited:
            events += events_in(unlimited.runs)
        return RunReport(
            table=tables(outcome.summaries, limit=settings.describe_limit(), unlimited=unlimited_summaries, paper=args.paper),
            document=document(outcome.summaries, settings=meta, unlimited=unlimited_summaries),
            events=events,
            plot=plot,
        )

    return produce_experiment


def _add_arguments(group: AddsArguments) -> None:
    """The ``fitgpp`` workload's own options (the default workload; traces too)."""
    group.add_argument(
        "--trace", metavar="FILE", help="CSV or JSON trace instead (see README: submit_time, class, cpu, memory, gpu, duration, grace_period)"
    )
    group.add_argument(
        "--arrivals",
        default=None,
        metavar="MODE",
        help="fifo-load: submit times from a FIFO run holding --load (default for the workload); "
        "trace: the jobs' own submit times (default for --trace)",
    )
    group.add_argument("--te-share", default=None, help="share of TE jobs in the fitgpp workload (default 0.3)")
    group.add_argument("--gp-scale", default=None, help="scale of the grace-period distribution (default 1.0)")
    group.add_argument(
        "--tick",
        default=None,
        help="seconds between scheduling decisions (default 0: at every event; 60: every simulated minute as in the paper)",
    )
    group.add_argument("-s", "--grace-period-weight", default=None, help="FitGpp's s (eq. 3; default 4.0)")
    group.add_argument("-P", "--max-preemptions", default=None, help="P: preemptions per job at most, or 'inf' (default 1)")
    group.add_argument("--table4", action="store_true", help="also run the preemptive policies with P unlimited (Table 4)")
    group.add_argument("--paper", action="store_true", help="print the paper's numbers under ours")
    group.add_argument(
        "--write-trace", metavar="FILE", help="write the first seed's jobs with their arrivals (CSV, or JSON by extension)"
    )


COMMAND: Final = Command(name="fitgpp", title="fitgpp workload (the default) and traces", reads=SHARED_OPTIONS, add_arguments=_add_arguments, prepare=_prepare)
register_workload(COMMAND)
