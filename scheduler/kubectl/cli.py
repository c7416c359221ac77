"""``kubectl cellfit``: the plugin's command line (kubectl runs ``kubectl-cellfit`` from PATH).

    kubectl cellfit why job/NAME | pod/NAME   one answer: why it waits, was preempted, runs where
    kubectl cellfit vcs                       quota, bound and unbound cells per VC and cell type
    kubectl cellfit cells [--node N]          the physical cell tree (a node's GPUs with --node)
    kubectl cellfit queue                     AlloX's queue of interchangeable Jobs

Global flags as kubectl's: --kubeconfig, --context, -n/--namespace; -o table|json|yaml.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any, Callable, Sequence

from scheduler.kubectl import output, views
from scheduler.kubectl.api import DEFAULT_CELLFIT_NAMESPACE, DEFAULT_CELLFIT_SERVICE, Cellfit, DirectInspectApi, InspectApi, KubeApi
from scheduler.kubectl.errors import PluginError, UsageError
from scheduler.kubectl.facts import FactReader, parse_target
from scheduler.kubectl.kubeconfig import open_session
from scheduler.kubectl.why import explain


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}\n{self.format_usage().strip()}")


def _common(*, defaults: bool) -> _Parser:
    """The flags kubectl users write anywhere on the line. Only the top level has defaults: a
    subcommand's would overwrite a flag given before it (``kubectl cellfit -n ml why ...``)."""
    common = _Parser(add_help=False)

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    common.add_argument("--kubeconfig", default=default(None), help="kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
    common.add_argument("--context", default=default(None), help="kubeconfig context (default: the current one)")
    common.add_argument("-n", "--namespace", default=default(None), help="namespace of the pod or Job (default: the context's)")
    common.add_argument("-o", "--output", choices=output.FORMATS, default=default("table"), help="table (default), json or yaml")
    common.add_argument("--cellfit-namespace", default=default(os.environ.get("CELLFIT_NAMESPACE", DEFAULT_CELLFIT_NAMESPACE)),
                        help=f"namespace of cellfit's Service (CELLFIT_NAMESPACE; default {DEFAULT_CELLFIT_NAMESPACE})")
    common.add_argument("--cellfit-service", default=default(os.environ.get("CELLFIT_SERVICE", DEFAULT_CELLFIT_SERVICE)),
                        help=f"name of cellfit's Service (CELLFIT_SERVICE; default {DEFAULT_CELLFIT_SERVICE})")
    common.add_argument("--cellfit-url", default=default(os.environ.get("CELLFIT_URL") or None),
                        help="cellfit's own address, read directly instead of through its Service (CELLFIT_URL; "
                             "a `cellfit serve` outside the cluster: http://127.0.0.1:8888)")
    return common


def parser() -> argparse.ArgumentParser:
    common = _common(defaults=False)
    top = _Parser(prog="kubectl cellfit", description="Explain cellfit's scheduling decisions.", parents=[_common(defaults=True)])
    commands = top.add_subparsers(dest="command", required=True, parser_class=_Parser)
    why = commands.add_parser("why", parents=[common], help="why a Job or pod waits, was preempted, or runs where it does")
    why.add_argument("target", help="job/NAME or pod/NAME")
    commands.add_parser("vcs", parents=[common], help="quota, bound and unbound cells per virtual cluster and cell type")
    cells = commands.add_parser("cells", parents=[common], help="the physical cell tree (with --node, that node's GPUs)")
    cells.add_argument("--node", help="only this node's cells, GPUs included")
    commands.add_parser("queue", parents=[common], help="AlloX's queue of interchangeable Jobs")
    return top


# What kubectl exits with when its reader goes (``kubectl ... | head``): killed by SIGPIPE, which
# a shell reports as 128 + the signal, and nothing said.
BROKEN_PIPE_EXIT = 128 + int(signal.SIGPIPE)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        text = run(list(sys.argv[1:] if argv is None else argv))
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader has gone: exit quietly, as kubectl does. What Python still holds for stdout
        # goes to /dev/null, or its flush at exit would print the error again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_EXIT
    return 0


def run(argv: list[str]) -> str:
    args = parser().parse_args(argv)
    session = open_session(kubeconfig=args.kubeconfig, context=args.context, namespace=args.namespace)
    api = KubeApi(session)
    cellfit = Cellfit(namespace=args.cellfit_namespace, service=args.cellfit_service)
    inspect = InspectApi(api, cellfit) if args.cellfit_url is None else DirectInspectApi(api, cellfit, url=_cellfit_url(args.cellfit_url))
    command: Callable[[Any, KubeApi, InspectApi, str], str] = COMMANDS[args.command]
    return command(args, api, inspect, session.namespace)


def _cellfit_url(url: str) -> str:
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1].strip("/")) == 0:
        raise UsageError(f"--cellfit-url (CELLFIT_URL): {url!r} is not an http:// or https:// URL, e.g. http://127.0.0.1:8888")
    return url


def _why(args: Any, api: KubeApi, inspect: InspectApi, namespace: str) -> str:
    kind, name = parse_target(args.target)
    answer = explain(FactReader(api=api, inspect=inspect).facts(kind=kind, name=name, namespace=namespace))
    if args.output != "table":
        return output.structured({"object": f"{kind}/{name}", "namespace": namespace, **answer.as_dict()}, format=args.output)
    return "\n".join([f"{kind}/{name}: {answer.summary}", *(f"  {line}" for line in answer.details)])


def _vcs(args: Any, api: KubeApi, inspect: InspectApi, namespace: str) -> str:
    view = inspect.view("virtual-clusters")
    if args.output != "table":
        return output.structured(view, format=args.output)
    rows = views.vc_rows(view, cells=_cell_tree(inspect) if view.get("virtualClusters") else None)
    return output.table(rows, views.vc_columns(rows), empty="no virtual clusters")


def _cell_tree(inspect: InspectApi) -> Any:
    """The physical tree without GPU cells, for the VCs' cells that cannot serve them now; None
    where it cannot be read (the table is then the VCs' counts alone, as before)."""
    try:
        return inspect.view("cells", query={"gpus": "false"})
    except PluginError:
        return None


def _cells(args: Any, api: KubeApi, inspect: InspectApi, namespace: str) -> str:
    # The table shows GPU cells for one node only: the whole tree is asked for without them.
    query = {"node": args.node} if args.node else ({"gpus": "false"} if args.output == "table" else None)
    view = inspect.view("cells", query=query)
    if args.output != "table":
        return output.structured(view, format=args.output)
    empty = f"no cells on node {args.node} (not a GPU node cellfit knows)" if args.node else "no cells"
    return output.table(views.cell_rows(view, gpus=args.node is not None), views.CELL_COLUMNS, empty=empty)


def _queue(args: Any, api: KubeApi, inspect: InspectApi, namespace: str) -> str:
    view = inspect.view("allox")
    if args.output != "table":
        return output.structured(view, format=args.output)
    rows = views.queue_rows(view)  # with the Jobs AlloX holds outside the queue (no machine, quota)
    return output.table(rows, views.queue_columns(rows), empty="AlloX's queue is empty")


COMMANDS: dict[str, Callable[[Any, KubeApi, InspectApi, str], str]] = {
    "why": _why, "vcs": _vcs, "cells": _cells, "queue": _queue,
}


if __name__ == "__main__":
    sys.exit(main())
