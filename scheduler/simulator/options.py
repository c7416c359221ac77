"""Parsing ``cellfit simulate``'s option values: every mistake becomes one error naming the
option (the CLI prints it on one line and exits 2). Shared by the workloads' command paths, with
the exit codes and the cluster options (``--nodes``, ``--node-*``) they have in common."""

from __future__ import annotations

import argparse
import math
from typing import Callable, Final, NoReturn, Sequence, TypeVar

from scheduler.core.resources import Resources, cpu_millis, device_count, whole_units
from scheduler.errors import InvalidRequest
from scheduler.simulator.cluster import ClusterSpec

State = TypeVar("State")

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_BAD_INPUT: Final = 2


class BadOption(InvalidRequest):
    """An option value the simulator cannot use; the message starts with the option's name."""


def fail_option(option: str, message: str) -> NoReturn:
    raise BadOption(message, field=option)


def parse_float(text: str, option: str, *, low: float = -math.inf, positive: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        fail_option(option, f"{text!r} is not a number")
    if math.isnan(value) or value < low or (positive and value <= 0):
        fail_option(option, f"{text!r} is out of range")
    return value


def parse_int(text: str, option: str, *, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        fail_option(option, f"{text!r} is not a whole number")
    if value < low:
        fail_option(option, f"{text!r} is less than {low}")
    return value


def policy_list(text: str, known: list[str], *, workload: str, other: list[str]) -> list[str]:
    """Comma-separated policy names, each registered for ``workload``'s job model; a name that
    belongs to the other model (``other``) is named as such."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        fail_option("--policies", "no policy named")
    for name in names:
        if name in other:
            fail_option(
                "--policies", f"policy {name!r} does not run on workload {workload} (known: {', '.join(known)})"
            )
        if name not in known:
            fail_option("--policies", f"unknown policy {name!r} (known: {', '.join(known)})")
    if len(set(names)) != len(names):
        fail_option("--policies", "a policy is named twice")
    return names


def refuse_repeated_parameters(assignments: list[str]) -> None:
    """``--set KEY=VALUE`` given twice for one key: the last value would win without a word."""
    seen: set[str] = set()
    for assignment in assignments:
        key = assignment.partition("=")[0].strip()
        if key in seen:
            fail_option(f"--set {key}", "given twice")
        seen.add(key)


def apply_in_any_order(state: State, assignments: Sequence[str], apply: Callable[[State, str], State]) -> State:
    """``apply`` each ``--set`` assignment to ``state``. One refused is tried again after the
    others, so that a bound another assignment moves (a low above the default high) does not
    depend on the options' order; what no order accepts is refused with the first refusal."""
    pending = list(assignments)
    while pending:
        refused: list[str] = []
        first: BadOption | None = None
        for assignment in pending:
            try:
                state = apply(state, assignment)
            except BadOption as error:
                refused.append(assignment)
                first = first or error
        if first is not None and len(refused) == len(pending):
            raise first
        pending = refused
    return state


def cluster_from(args: argparse.Namespace, default: ClusterSpec) -> ClusterSpec:
    """--nodes and --node-*, each defaulting to ``default``'s (the workload's cluster)."""
    base = default.node
    try:
        node = Resources(
            cpu_millis=base.cpu_millis if args.node_cpu is None else cpu_millis(args.node_cpu, field="--node-cpu"),
            memory_bytes=base.memory_bytes if args.node_memory is None else whole_units(args.node_memory, field="--node-memory"),
            gpus=base.gpus if args.node_gpus is None else device_count(args.node_gpus, field="--node-gpus"),
        )
    except InvalidRequest as error:
        raise BadOption(str(error)) from None
    nodes = default.nodes if args.nodes is None else parse_int(args.nodes, "--nodes", low=1)
    return ClusterSpec(nodes=nodes, node=node)
