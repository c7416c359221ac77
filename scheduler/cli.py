"""``cellfit``: the command line.

    cellfit serve [--host H] [--port P] [--config FILE]   run the extender
    cellfit check-config FILE                            validate a config, start nothing
    cellfit default-config                               print the embedded default config
    cellfit allox --input FILE [--output FILE]           solve one AlloX instance (scheduler/matching)
    cellfit simulate [--policies ...] [--trace FILE]     trace-driven simulation (scheduler/simulator)
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from pydantic import ValidationError

from scheduler import __version__
from scheduler.cells.discovery import is_discovered_name
from scheduler.config import (
    ConfigFile,
    Settings,
    check_cells,
    config_digest,
    default_config_text,
    describe_validation_error,
    load_settings,
    parse_settings,
    read_config_text,
)
from scheduler.errors import ConfigError
from scheduler.logs import configure_logging
from scheduler.matching import cli as allox_cli
from scheduler.simulator import cli as simulate_cli

# Offline tools over the pure core: (subcommand, module with add_arguments/run, summary).
TOOLS = (
    ("allox", allox_cli, "solve one AlloX instance: CPU or GPU, and the order, for each job"),
    ("simulate", simulate_cli, "simulate a cluster under scheduling policies, on a synthetic workload or a trace"),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cellfit", description="GPU-cluster scheduler extender for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"cellfit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the kube-scheduler extender")
    serve.add_argument("--config", metavar="FILE", help="YAML configuration (default: the embedded default)")
    serve.add_argument("--host", help="listen address (overrides server.host)")
    serve.add_argument("--port", type=int, help="listen port (overrides server.port)")
    # One or the other: with both, one would be dropped without a word.
    connection = serve.add_mutually_exclusive_group()
    connection.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig to watch the cluster with (overrides cluster.kubeconfig)")
    connection.add_argument("--standalone", action="store_true", help="do not connect to any cluster (cluster.mode standalone)")

    check = commands.add_parser("check-config", help="validate a configuration file without starting anything")
    check.add_argument("file", metavar="FILE")

    commands.add_parser("default-config", help="print the embedded default configuration")

    for name, module, summary in TOOLS:
        tool = commands.add_parser(name, help=summary, description=summary)
        module.add_arguments(tool)
        tool.set_defaults(tool_run=module.run)
    return parser


def _serve_settings(args: argparse.Namespace) -> tuple[Settings, ConfigFile | None]:
    """The settings to serve with, and the file they came from (None: the embedded default)."""
    loaded: ConfigFile | None = None
    if args.config:
        text = read_config_text(args.config)
        settings = parse_settings(text, source=str(args.config))
        loaded = ConfigFile(path=args.config, settings=settings, digest=config_digest(text))
    else:
        settings = load_settings(None)
    server = settings.server.model_copy(
        update={k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    )
    cluster = settings.cluster
    if args.kubeconfig:
        cluster = cluster.model_copy(update={"kubeconfig": args.kubeconfig, "mode": "kubeconfig"})
    if args.standalone:  # the file's kubeconfig and context are not read then
        cluster = cluster.model_copy(update={"mode": "standalone", "kubeconfig": None, "context": None})
    # Re-validate: overrides obey the same rules as the file (e.g. the port range).
    overridden = Settings.model_validate(
        settings.model_copy(update={"server": server, "cluster": cluster}).model_dump(by_alias=True)
    )
    # The dump writes each VC as {cells: [...]}: the cells as loaded remember how the file wrote
    # them, so that a refusal at startup names a field as the file does ('vision[0]', not 'vision.cells[0]').
    return overridden.model_copy(update={"cells": settings.cells}), loaded


# What a command whose reader has gone (``cellfit check-config FILE | head -1``) exits with, as
# kubectl and ``kubectl cellfit`` do: killed by SIGPIPE, as a shell reports it (128 + 13).
BROKEN_PIPE_EXIT = 141


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command != "serve":
            return _command(args)
        settings, config_file = _serve_settings(args)
        configure_logging(level=settings.logging.level, fmt=settings.logging.format)
        from scheduler.extender.server import serve  # heavy imports only when serving

        serve(settings, config_file=config_file)
        return 0
    except ConfigError as error:
        print(f"cellfit: invalid configuration: {error}", file=sys.stderr)
        return 2
    except ValidationError as error:  # command-line overrides break a rule of the config
        print(f"cellfit: invalid option: {describe_validation_error(error)}", file=sys.stderr)
        return 2


def _command(args: argparse.Namespace) -> int:
    """A command that prints and ends; one whose reader has gone ends quietly (user26 #9: a
    BrokenPipeError traceback after ``| head -1``)."""
    try:
        if args.command == "default-config":
            sys.stdout.write(default_config_text())
            return 0
        if getattr(args, "tool_run", None) is not None:
            return int(args.tool_run(args))
        settings = load_settings(args.file)
        print(f"{args.file}: valid (policy {settings.policy.name}, cluster mode {settings.cluster.mode})")
        cells = check_cells(settings, source=args.file)
        print(f"cells: {cells}" if cells else _discovered_cells_line(settings))
        sys.stdout.flush()
        return 0
    except BrokenPipeError:
        # What Python still holds for stdout goes to /dev/null, or its flush at exit would
        # print the error again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_EXIT


def _discovered_cells_line(settings: Settings) -> str:
    """What check-config can say of cells discovered at startup: the VCs it names are checked
    against them only then (a file "valid" here was refused by ``serve`` for a cell type the
    cluster's GPUs do not have, without a word from check-config). A VC cell type that is not of
    a discovered name's form is named: discovered names carry the node size, so an unsized
    ``<product>-NODE`` names nothing once the product comes in a second size."""
    line = "cells: discovered from the cluster's Nodes at startup"
    vcs = settings.cells.virtual_clusters
    if not vcs:
        return line
    line = (f"{line}; virtual clusters {', '.join(vcs)} are checked against them then, not here: their cell types "
            "must be ones discovery names (<product>-<n>GPU-NODE for a node of n GPUs of the product nvidia.com/gpu.product "
            "says, <product>-<n>GPU for one of its GPUs, and <product>-<n>GPU-RACK with policy.rackLabel; "
            "`kubectl cellfit cells` lists them; scheduler/cells/README.md, \"Discovery\")")
    unsized = [
        f"cells.{spec.cells_path(f'virtualClusters.{vc}', i)}.cellType"
        for vc, spec in vcs.items()
        for i, cell in enumerate(spec.cells)
        if not is_discovered_name(cell.cell_type)
    ]
    if unsized:
        line += (f"\nwarning: {', '.join(unsized)} {'is' if len(unsized) == 1 else 'are'} not of that form: an unsized "
                 "<product>-NODE (-RACK, <product>) is taken while the cluster has one node size of the product, with a "
                 "warning naming the stable name, and refused once it has several")
    return line


if __name__ == "__main__":
    sys.exit(main())
