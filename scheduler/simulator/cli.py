"""``cellfit simulate``: one command for every workload of the simulator, dispatching on
``--workload`` through the registry of :mod:`scheduler.simulator.workloads` — ``fitgpp`` (the
default: FitGpp's experiments of arXiv:1902.01613 §4, or any trace; ``fitgpp/cli.py``),
``allox`` (AlloX's of EuroSys'20 §5; ``allox/cli.py``) and ``hived`` (HiveD's sharing anomaly,
§2 and §5.2; ``hived/cli.py``).

The options every workload may read are here; each workload adds its own group. An option
given to a workload that does not read it is an error naming it, as are ``--sweep-values``
without ``--sweep`` and every bad value (one line on stderr, exit 2); the run and its report
(plots folder, progress bar, table, events/s, PNGs, JSON) are
:func:`~scheduler.simulator.session.run_and_report`'s.

``scheduler/cli.py`` registers the subcommand with :func:`add_arguments` and :func:`run`;
``python -m scheduler.simulator.cli ...`` runs it alone. Exit codes: 0 done, 2 bad input or
arguments (one line on stderr naming the field or the trace line), 1 anything else cellfit
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
import sys
from typing import Any, NoReturn, Sequence

# The workloads' command modules register them (in this order: the first is the default).
import scheduler.simulator.fitgpp.cli  # noqa: F401
import scheduler.simulator.allox.cli  # noqa: F401
import scheduler.simulator.hived.cli  # noqa: F401
from scheduler.errors import CellfitError, ConfigError, InvalidRequest
from scheduler.simulator.fitgpp.experiment import SWEEPS
from scheduler.simulator.options import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, fail_option, refuse_repeated_parameters
from scheduler.simulator.session import PROG, refuse_same_files, run_and_report
from scheduler.simulator.workloads import SHARED_OPTIONS, Workload, workload_named, workloads


class _Recorded:
    """An argument group that keeps the actions added to it."""

    def __init__(self, group: argparse._ArgumentGroup) -> None:
        self._group = group
        self.actions: list[argparse.Action] = []

    def add_argument(self, *flags: str, **options: Any) -> argparse.Action:
        action = self._group.add_argument(*flags, **options)
        self.actions.append(action)
        return action


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _define(parser)


def _define(parser: argparse.ArgumentParser) -> tuple[list[argparse.Action], dict[str, list[argparse.Action]]]:
    """Every option of ``cellfit simulate`` on ``parser``: the shared ones, and each workload's
    own, by workload."""
    # Values are parsed in run(), not by argparse, so that every mistake is one line naming
    # the option (argparse would print the whole usage first).
    parser.description = (
        "Discrete-event simulation of a GPU cluster under fifo, lrtp, rand and fitgpp "
        "(FitGpp, arXiv:1902.01613), driving cellfit's own scheduling core. Prints the "
        "paper's Tables 1-4. With --workload allox: interchangeable CPU/GPU jobs under allox, "
        "allox+, es, drff, drfs, drfa, srpt, bf, jsq+, sjf+ (AlloX, EuroSys'20 §5). With --workload "
        "hived: tenants' gang jobs under HiveD and a quota-only baseline (HiveD §2, §5.2)."
    )
    source = _Recorded(parser.add_argument_group("workload"))
    source.add_argument(
        "--workload",
        default=None,
        metavar="NAME",
        help="synthetic workload: fitgpp (default), allox (AlloX §5.1) or hived (HiveD §5.2: sharing anomaly)",
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
    source.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one parameter of the synthetic workload, e.g. te.gpus.mean=2, be.duration.sd=20, "
        "gp.mean=6 (fitgpp), allox.sample_noise=0.04, allox.sampling_fraction=0.06 (allox), hived.queue=kube "
        "(hived); repeatable, each key once; README lists the keys",
    )
    source.add_argument("--seed", default="1", help="first seed (default 1); the same seed gives the same result")
    source.add_argument("--repeat", default="1", help="seeds to run, from --seed on; tables show their mean (default 1)")

    cluster = _Recorded(parser.add_argument_group("cluster (fitgpp, allox)"))
    cluster.add_argument("--nodes", default=None, help="number of nodes (default: fitgpp 84, allox 20)")
    cluster.add_argument("--node-cpu", default=None, help="CPUs per node (default: fitgpp 32, allox 20)")
    cluster.add_argument("--node-memory", default=None, help="memory per node (default: fitgpp 256Gi, allox 64Gi)")
    cluster.add_argument("--node-gpus", default=None, help="GPUs per node (default: fitgpp 8, allox 1)")

    policy = _Recorded(parser.add_argument_group("policies"))
    policy.add_argument(
        "--policies",
        default=None,
        help="comma-separated (default: fitgpp fifo,lrtp,rand,fitgpp; allox allox,allox+,es,drff,drfs,drfa,srpt; "
        "hived: the settings private,hived,quota-spread,quota-pack)",
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

    output = _Recorded(parser.add_argument_group("output"))
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
    output.add_argument("--workers", default="1", help="processes running policies in parallel (default 1)")
    output.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    shared = [*source.actions[1:], *cluster.actions, *policy.actions, *output.actions]
    assert {action.dest for action in shared} == SHARED_OPTIONS
    own: dict[str, list[argparse.Action]] = {}
    for workload in workloads():
        group = _Recorded(parser.add_argument_group(workload.title))
        workload.add_arguments(group)
        own[workload.name] = group.actions
    return shared, own


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
    known = workloads()
    name = args.workload if args.workload is not None else known[0].name
    workload = workload_named(name)
    if workload is None:
        fail_option("--workload", f"unknown workload {name!r} (known: {', '.join(w.name for w in known)})")
    _refuse_others(args, workload)
    if args.sweep is None and args.sweep_values is not None:
        fail_option("--sweep-values", "only with --sweep")
    refuse_same_files([("--config", args.config), ("--output-json", args.output_json)])
    refuse_repeated_parameters(args.set)
    produce = workload.prepare(args)
    run_and_report(produce, plots=args.plots, output_json=args.output_json, show_progress=not args.no_progress)
    return EXIT_OK


def _refuse_others(args: argparse.Namespace, workload: Workload) -> None:
    """An option ``workload`` does not read, given anyway, is an error rather than ignored: with
    no ``--workload`` given, the message names the workload whose option it is."""
    shared, own = _define(argparse.ArgumentParser(add_help=False))
    given: list[tuple[argparse.Action, str | None]] = [(action, None) for action in shared if action.dest not in workload.reads]
    given += [(action, owner) for owner, actions in own.items() if owner != workload.name for action in actions]
    for action, owner in given:
        if getattr(args, action.dest, action.default) == action.default:
            continue
        flag = next(f for f in action.option_strings if f.startswith("--"))
        if owner is not None and args.workload is None:
            fail_option(flag, f"an option of workload {owner} only (add --workload {owner})")
        fail_option(flag, f"not an option of workload {workload.name}")


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
