"""Errors of the simulator, as subclasses of cellfit's domain errors so that the CLI turns every
one a user can cause into one line naming the field (exit 2)."""

from __future__ import annotations

from scheduler.errors import CellfitError, InvalidRequest


class TraceError(InvalidRequest):
    """A trace file cannot be used; the message names the file, the line (CSV) or the index
    (JSON) and the field, e.g. ``trace.csv line 5: duration: -3 is negative``."""


class UnknownPolicy(InvalidRequest):
    """A policy name nobody registered, or one registered for the other job model (a FitGpp
    policy asked to run interchangeable jobs, or the reverse)."""

    def __init__(self, name: str, known: list[str], *, other_model: str | None = None) -> None:
        if other_model is None:
            message = f"unknown policy {name!r} (known: {', '.join(known)})"
        else:
            message = (
                f"policy {name!r} does not run on this workload: it schedules {other_model} jobs "
                f"(known here: {', '.join(known)})"
            )
        super().__init__(message, field="policy")
        self.name = name


class InvalidWorkload(InvalidRequest):
    """A workload parameter (a distribution, the TE share, the load) is out of range."""


class SimulationStalled(CellfitError):
    """Jobs are waiting and nothing is left to happen: a policy left the cluster idle with work
    queued (a bug in the policy, never in the input)."""


class PolicyError(AssertionError):
    """A policy asked the interchangeable-job simulation for something impossible (a busy
    machine, a job that is not waiting): a bug in the policy, never in the input."""
