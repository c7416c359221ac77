"""Errors of the AlloX core, as subclasses of cellfit's domain errors so that drivers catching
``CellfitError``/``InvalidRequest`` handle them without knowing this package."""

from __future__ import annotations

from scheduler.errors import CellfitError, InvalidRequest


class InvalidInstance(InvalidRequest):
    """An AlloX instance (jobs, machines, times) a caller handed in is inconsistent; the message
    names the field, e.g. ``jobs[2].processing_time``."""


class InfeasibleInstance(CellfitError):
    """No schedule exists: some job has no machine of any kind it can run on."""

    def __init__(self, job_name: str) -> None:
        super().__init__(f"no machine in this instance can run job {job_name!r}")
        self.job_name = job_name


class StalledSchedule(CellfitError):
    """A policy left jobs waiting with every machine idle and nothing left to happen, so a
    planned schedule could never finish."""


class PolicyViolation(CellfitError):
    """A policy returned a decision that cannot be carried out (a busy machine, a job that is
    not waiting, a start other than now): a bug in the policy, never in the input."""
