"""``cellfit simulate``: run the FitGpp experiments of arXiv:1902.01613 §4 on cellfit's own
scheduling core, or any trace, and print the paper's tables; with ``--workload allox``, AlloX's
experiments of EuroSys'20 §5 (interchangeable CPU/GPU jobs, :mod:`scheduler.simulator.allox`).

``scheduler/cli.py`` registers the subcommand with :func:`add_arguments` and :func:`run`; until
then ``python -m scheduler.simulator.cli ...`` runs it alone. Exit codes: 0 done, 2 bad input
or arguments (one line on stderr naming the field or the trace line), 1 anything else cellfit
refuses. Examples::

    python -m scheduler.simulator.cli --jobs 65536 --repeat 3 --output-json out.json --plots figs/
    python -m scheduler.simulator.cli --trace scheduler/simulator/examples/trace.csv --nodes 2
    python -m scheduler.simulator.cli --sweep s --jobs 8192 --plots figs/
    python -m scheduler.simulator.cli --workload allox --load 0.9 --plots figs/
    python -m scheduler.simulator.cli --workload allox --sweep alpha --jobs 2000
    python -m scheduler.simulator.cli --workload hived --plots scheduler/simulator/figures
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Final, NoReturn, Sequence

from scheduler.config import Settings, load_settings
from scheduler.errors import CellfitError, ConfigError, InvalidRequest
from scheduler.preemption.model import FitGppSettings
from scheduler.simulator.errors import InvalidWorkload
from scheduler.simulator.experiment import (
    DEFAULT_SWEEP_VALUES,
    SWEEPS,
    Experiment,
    Outcome,
    Variant,
    run_experiment,
    run_sweep,
)
from scheduler.simulator.options import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    BadOption,
    cluster_from,
    fail_option,
    parse_float,
    parse_int,
    policy_list,
)
from scheduler.simulator.policies import policy_names
from scheduler.simulator.progress import ProgressBar
from scheduler.simulator.report import document, sweep_document, sweep_table, tables
from scheduler.simulator.session import PROG, OutputError, RunReport, run_and_report
from scheduler.simulator.trace import dump_trace, load_trace
from scheduler.simulator.workload import ClusterSpec, FitGppWorkload

_DEFAULT_POLICIES: Final = "fifo,lrtp,rand,fitgpp"
# Options of the FitGpp workload (and traces) that the allox workload has no use for, and the
# reverse; giving one to the other workload is an error rather than silently ignored.
_FITGPP_ONLY: Final = (
    ("trace", "--trace"),
    ("arrivals", "--arrivals"),
    ("te_share", "--te-share"),
    ("gp_scale", "--gp-scale"),
    ("tick", "--tick"),
    ("grace_period_weight", "--grace-period-weight"),
    ("max_preemptions", "--max-preemptions"),
    ("table4", "--table4"),
    ("write_trace", "--write-trace"),
)
_ALLOX_ONLY: Final = (("alpha", "--alpha"), ("timeout", "--timeout"), ("omega_grid", "--omega-grid"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Values are parsed in run(), not by argparse, so that every mistake is one line naming
    # the option (argparse would print the whole usage first).
    parser.description = (
        "Discrete-event simulation of a GPU cluster under fifo, lrtp, rand and fitgpp "
        "(FitGpp, arXiv:1902.01613), driving cellfit's own scheduling core. Prints the "
        "paper's Tables 1-4. With --workload allox: interchangeable CPU/GPU jobs under allox, "
        "allox+, es, drff, drfs, drfa, srpt, bf, jsq+, sjf+ (AlloX, EuroSys'20 §5)."
    )
    source = parser.add_argument_group("workload")
    source.add_argument(
        "--workload",
        default=None,
        metavar="NAME",
        help="synthetic workload: fitgpp (default), allox (AlloX §5.1) or hived (HiveD §5.2: sharing anomaly)",
    )
    source.add_argument("--trace", metavar="FILE", help="CSV or JSON trace instead (see README: submit_time, class, cpu, memory, gpu, duration, grace_period)")
    source.add_argument(
        "--arrivals",
        default=None,
        metavar="MODE",
        help="fifo-load: submit times from a FIFO run holding --load (default for the workload); "
        "trace: the jobs' own submit times (default for --trace)",
    )
    source.add_argument(
        "--load",
        default=None,
        help="fitgpp: load held by the FIFO run (default 2.0); allox: Poisson arrival rate as a share of "
        "the highest rate the cluster sustains (default 0.9); hived: multiplies every tenant's load (default 1)",
    )
    source.add_argument(
        "--jobs", default=None, help="jobs per run (default: fitgpp 65536 = 2^16, allox 10000, as in the papers; hived 4000; a trace: all)"
    )
    source.add_argument("--te-share", default=None, help="share of TE jobs in the fitgpp workload (default 0.3)")
    source.add_argument("--gp-scale", default=None, help="scale of the grace-period distribution (default 1.0)")
    source.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one parameter of the synthetic workload, e.g. te.gpus.mean=2, be.duration.sd=20, "
        "gp.mean=6 (fitgpp), allox.sample_noise=0.04, allox.sampling_fraction=0.06 (allox); "
        "repeatable; README lists the keys",
    )
    source.add_argument(
        "--tick",
        default=None,
        help="seconds between scheduling decisions (default 0: at every event; 60: every simulated minute as in the paper)",
    )
    source.add_argument("--seed", default="1", help="first seed (default 1); the same seed gives the same result")
    source.add_argument("--repeat", default="1", help="seeds to run, from --seed on; tables show their mean (default 1)")

    cluster = parser.add_argument_group("cluster")
    cluster.add_argument("--nodes", default=None, help="number of nodes (default: fitgpp 84, allox 20)")
    cluster.add_argument("--node-cpu", default=None, help="CPUs per node (default: fitgpp 32, allox 20)")
    cluster.add_argument("--node-memory", default=None, help="memory per node (default: fitgpp 256Gi, allox 64Gi)")
    cluster.add_argument("--node-gpus", default=None, help="GPUs per node (default: fitgpp 8, allox 1)")

    policy = parser.add_argument_group("policies")
    policy.add_argument(
        "--policies",
        default=None,
        help=f"comma-separated (default: fitgpp {_DEFAULT_POLICIES}; allox allox,allox+,es,drff,drfs,drfa,srpt)",
    )
    policy.add_argument("-s", "--grace-period-weight", default=None, help="FitGpp's s (eq. 3; default 4.0)")
    policy.add_argument(
        "-P", "--max-preemptions", default=None, help="P: preemptions per job at most, or 'inf' (default 1)"
    )
    policy.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="fitgpp, allox: the cellfit configuration the engine is composed from, as `cellfit serve --config` "
        "reads it (default: the embedded default, resource fit); fitgpp: -s and -P default to its preemption "
        "section's and override it, the seed replaces its seed; policy.name hived without cells.topology "
        "discovers the cells from the simulated nodes",
    )
    policy.add_argument("--alpha", default=None, help="allox: AlloX's fairness knob in [0, 1] (default 0.1, as in §5.1)")
    policy.add_argument(
        "--timeout", default=None, help="allox: AlloX+'s waiting timeout in minutes (default 240; 'inf' disables it)"
    )
    policy.add_argument(
        "--omega-grid",
        default=None,
        metavar="SECONDS",
        help="allox, allox+: the grid AlloX admission rounds busy machines' expected ends onto "
        "(default: admission's own, what the live controller uses: 60 s steps, then +25%%; 0: exact)",
    )

    output = parser.add_argument_group("output")
    output.add_argument("--table4", action="store_true", help="also run the preemptive policies with P unlimited (Table 4)")
    output.add_argument("--paper", action="store_true", help="print the paper's numbers under ours")
    output.add_argument(
        "--sweep",
        default=None,
        metavar="NAME",
        help=f"sensitivity sweep: fitgpp {', '.join(SWEEPS)} (Figs. 4-7); allox alpha, load, sample-noise, "
        "sampling-fraction (Figs. 16-18); hived load",
    )
    output.add_argument("--sweep-values", default=None, metavar="LIST", help="comma-separated values for --sweep")
    output.add_argument("--output-json", metavar="FILE", help="write the results as JSON")
    output.add_argument("--plots", metavar="DIR", help="write PNG figures into DIR")
    output.add_argument("--write-trace", metavar="FILE", help="write the first seed's jobs with their arrivals (CSV, or JSON by extension)")
    output.add_argument("--workers", default="1", help="processes running policies in parallel (default 1)")
    output.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


_BadOption = BadOption
_fail_option = fail_option
_float = parse_float
_int = parse_int


def _or(value: str | None, default: str) -> str:
    return default if value is None else value


def _settings(args: argparse.Namespace, configuration: Settings | None) -> FitGppSettings:
    """-s and -P; without them, the --config file's (else FitGpp's defaults, 4 and 1)."""
    preemption = configuration.preemption if configuration is not None else None
    weight_default = str(preemption.grace_period_weight) if preemption is not None else "4.0"
    limit_default = "1" if preemption is None else ("inf" if preemption.max_preemptions is None else str(preemption.max_preemptions))
    weight = _float(_or(args.grace_period_weight, weight_default), "--grace-period-weight", low=0.0)
    if not math.isfinite(weight):
        _fail_option("--grace-period-weight", f"{args.grace_period_weight!r} is not finite")
    text = _or(args.max_preemptions, limit_default).strip().lower()
    limit = None if text in ("inf", "infinite", "none", "unlimited") else _int(text, "--max-preemptions", low=0)
    return FitGppSettings(grace_period_weight=weight, max_preemptions=limit)


def _cluster(args: argparse.Namespace) -> ClusterSpec:
    return cluster_from(args, ClusterSpec())


def _policies(text: str) -> list[str]:
    return policy_list(text, policy_names(), workload="fitgpp", other=policy_names("interchangeable"))


def _experiment(args: argparse.Namespace, settings: FitGppSettings, configuration: Settings | None) -> Experiment:
    if args.workload is not None and args.trace is not None:
        _fail_option("--trace", "give either --workload or --trace")
    if args.workload not in (None, "fitgpp"):
        _fail_option("--workload", f"unknown workload {args.workload!r} (known: fitgpp, allox, hived)")
    arrivals = args.arrivals or ("trace" if args.trace else "fifo-load")
    if arrivals not in ("fifo-load", "trace"):
        _fail_option("--arrivals", f"{arrivals!r} is not fifo-load or trace")
    if arrivals == "trace" and not args.trace:
        _fail_option("--arrivals", "trace arrivals need --trace FILE")
    trace = tuple(load_trace(args.trace)) if args.trace else None
    jobs_default = len(trace) if trace is not None else 2**16
    jobs = jobs_default if args.jobs is None else _int(args.jobs, "--jobs", low=1)
    seed = _int(args.seed, "--seed", low=0)
    tick = _float(_or(args.tick, "0"), "--tick", low=0.0)
    if not math.isfinite(tick):
        _fail_option("--tick", f"{args.tick!r} is not finite")
    repeat = _int(args.repeat, "--repeat", low=1)
    te_share = _float(_or(args.te_share, "0.3"), "--te-share", low=0.0)
    if te_share > 1:
        _fail_option("--te-share", f"{args.te_share!r} is not a fraction in [0, 1]")
    gp_scale = _float(_or(args.gp_scale, "1.0"), "--gp-scale", low=0.0)
    if not math.isfinite(gp_scale):
        _fail_option("--gp-scale", f"{args.gp_scale!r} is not finite")
    workload = FitGppWorkload(te_share=te_share, gp_scale=gp_scale)
    for assignment in args.set:
        key, equals, value = assignment.partition("=")
        if not equals:
            _fail_option("--set", f"{assignment!r} is not KEY=VALUE")
        try:
            workload = workload.with_parameter(key.strip(), _float(value, f"--set {key.strip()}"))
        except InvalidWorkload as error:
            raise _BadOption(str(error), field=f"--set {key.strip()}") from None
    return Experiment(
        cluster=_cluster(args),
        workload=workload,
        trace=trace,
        arrivals=arrivals,  # type: ignore[arg-type]
        load=_float(_or(args.load, "2.0"), "--load", positive=True),
        jobs=jobs,
        seeds=tuple(range(seed, seed + repeat)),
        variants=Experiment.standard_variants(_policies(_or(args.policies, _DEFAULT_POLICIES)), settings),
        tick=tick,
        configuration=configuration,
    )


def _sweep_values(name: str, text: str | None) -> list[float]:
    if text is None:
        return list(DEFAULT_SWEEP_VALUES[name])
    values = []
    for part in text.split(","):
        part = part.strip()
        if part.lower() in ("inf", "unlimited") and name == "P":
            values.append(math.inf)
            continue
        values.append(_float(part, "--sweep-values", low=0.0))
    if name == "P" and any(not math.isinf(v) and v != int(v) for v in values):
        _fail_option("--sweep-values", "P values are whole numbers or inf")
    if name == "te-share" and any(v > 1 for v in values):
        _fail_option("--sweep-values", "TE shares are fractions in [0, 1]")
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


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (InvalidRequest, ConfigError) as error:
        return _fail(str(error), EXIT_BAD_INPUT)
    except CellfitError as error:
        return _fail(str(error), EXIT_FAILED)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_FAILED)


def _run(args: argparse.Namespace) -> int:
    if args.workload == "hived":
        from scheduler.simulator.hived.cli import run_hived

        return run_hived(args)
    if args.workload == "allox":
        for attribute, option in _FITGPP_ONLY:
            if getattr(args, attribute) not in (None, False):
                _fail_option(option, "not an option of workload allox")
        from scheduler.simulator.allox.cli import run_allox

        return run_allox(args)
    for attribute, option in _ALLOX_ONLY:
        if getattr(args, attribute) is not None:
            _fail_option(option, "an option of workload allox only (add --workload allox)")
    configuration = load_settings(args.config) if args.config else None
    settings = _settings(args, configuration)
    experiment = _experiment(args, settings, configuration)
    workers = _int(args.workers, "--workers", low=1)
    sweep: str | None = args.sweep
    if sweep is not None and sweep not in SWEEPS:
        _fail_option("--sweep", f"unknown sweep {sweep!r} for workload fitgpp (known: {', '.join(SWEEPS)})")
    meta = _settings_document(args, experiment, settings)

    def produce_sweep(progress: ProgressBar) -> RunReport:
        assert sweep is not None
        values = _sweep_values(sweep, args.sweep_values)
        points = run_sweep(sweep, values, experiment, [v.policy for v in experiment.variants], workers=workers, progress=progress)

        def plot(folder: Path) -> list[Path]:
            from scheduler.simulator.plots import plot_sweep

            return [plot_sweep(sweep, points, folder / f"sweep-{sweep}.png", title=f"FitGpp sweep over {sweep}")]

        return RunReport(
            table=sweep_table(sweep, points),
            document=sweep_document(sweep, points, settings=meta),
            events=sum(s.events * len(s.seeds) for p in points for s in p.summaries.values()),
            plot=plot,
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
            from scheduler.simulator.plots import plot_slowdowns

            return [plot_slowdowns(outcome.summaries, folder / "slowdown.png", title="Job slowdown rates")]

        events = sum(r.events for results in outcome.runs.values() for r in results)
        if unlimited:
            events += sum(r.events for results in unlimited.runs.values() for r in results)
        return RunReport(
            table=tables(outcome.summaries, limit=settings.describe_limit(), unlimited=unlimited_summaries, paper=args.paper),
            document=document(outcome.summaries, settings=meta, unlimited=unlimited_summaries),
            events=events,
            plot=plot,
        )

    run_and_report(
        produce_sweep if sweep is not None else produce_experiment,
        plots=args.plots,
        output_json=args.output_json,
        show_progress=not args.no_progress,
    )
    return EXIT_OK


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _OneLineParser(prog=PROG)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
