"""The workloads ``cellfit simulate`` runs, and the registry :mod:`scheduler.simulator.cli`
dispatches ``--workload`` through.

A workload registers one :class:`Workload`: its name, the options of its own (added to its
argument group of ``cellfit simulate``), which of the options every workload may read it reads
(:data:`SHARED_OPTIONS`), and :meth:`Workload.prepare`, which parses its options (every bad
value one :class:`~scheduler.simulator.options.BadOption` naming the option) and returns how
it runs and what it reports (a :data:`Produce`, which the command hands to
:func:`~scheduler.simulator.session.run_and_report`: plots folder, progress, table, JSON,
PNGs). :class:`Command` makes one from its parts::

    register_workload(Command(name="fitgpp", title="...", reads=SHARED_OPTIONS, add_arguments=..., prepare=...))

The simulator's own three are registered by their command modules (``fitgpp/cli.py``,
``allox/cli.py``, ``hived/cli.py``), which :mod:`scheduler.simulator.cli` imports.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Final, Protocol

from scheduler.simulator.progress import ProgressBar
from scheduler.simulator.session import RunReport

# What a prepared workload runs: its experiment or sweep, with the progress bar, and what it
# produced for the report.
Produce = Callable[[ProgressBar], RunReport]

# The options ``cellfit simulate`` has for every workload (by their ``argparse`` dest); each
# workload says which of them it reads, and any other one given is an error naming it.
SHARED_OPTIONS: Final = frozenset(
    {
        "load",
        "jobs",
        "set",
        "seed",
        "repeat",
        "nodes",
        "node_cpu",
        "node_memory",
        "node_gpus",
        "policies",
        "config",
        "sweep",
        "sweep_values",
        "output_json",
        "plots",
        "workers",
        "no_progress",
    }
)


class AddsArguments(Protocol):
    """An argument group of ``cellfit simulate`` (``argparse``'s ``add_argument``)."""

    def add_argument(self, *flags: str, **options: Any) -> argparse.Action: ...


class Workload(Protocol):
    """One workload of ``cellfit simulate --workload NAME``."""

    @property
    def name(self) -> str:
        """What ``--workload`` names it."""
        ...

    @property
    def title(self) -> str:
        """Its argument group's title in ``--help``."""
        ...

    @property
    def reads(self) -> frozenset[str]:
        """The :data:`SHARED_OPTIONS` it reads (its own options it reads always)."""
        ...

    def add_arguments(self, group: AddsArguments) -> None:
        """Its own options (values are parsed in :meth:`prepare`, not by ``argparse``, so that
        every mistake is one line naming the option)."""
        ...

    def prepare(self, args: argparse.Namespace) -> Produce:
        """Its options parsed and checked, and how it runs and reports."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """A :class:`Workload` from its parts."""

    name: str
    title: str
    reads: frozenset[str]
    add_arguments: Callable[[AddsArguments], None]
    prepare: Callable[[argparse.Namespace], Produce]


_WORKLOADS: dict[str, Workload] = {}


def register_workload(workload: Workload) -> None:
    """Make ``workload`` available as ``cellfit simulate --workload <its name>``; the first one
    registered is the default."""
    if workload.name in _WORKLOADS:
        raise ValueError(f"workload {workload.name!r} is already registered")
    unknown = workload.reads - SHARED_OPTIONS
    if unknown:
        raise ValueError(f"workload {workload.name!r} reads options no workload shares: {sorted(unknown)}")
    _WORKLOADS[workload.name] = workload


def workloads() -> list[Workload]:
    """The registered workloads, in registration order (the first is the default)."""
    return list(_WORKLOADS.values())


def workload_named(name: str) -> Workload | None:
    return _WORKLOADS.get(name)
