"""The ``allox`` tool's input format, validated with pydantic, and its translation into core values.

Every error names the field it is about (``jobs[2].processing_time: …``), so a user can fix the
file from the message alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Final, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scheduler.matching.errors import InvalidInstance
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand, Job, Machine

# About 31,700 years in seconds: a time beyond it is a mistake in the file, and a machine's queue
# of such times would add up past the floats' range into infinities (a matching scipy calls
# infeasible, or "Infinity" in the output, which is not JSON).
MAX_SECONDS: Final = 1e12

Name = Annotated[str, Field(min_length=1)]
Time = Annotated[float, Field(ge=-MAX_SECONDS, le=MAX_SECONDS, allow_inf_nan=False)]
Duration = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Model(BaseModel):
    # strict: "10" is not a number; extra="forbid": a misspelt key is an error, not ignored.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class MachineIn(_Model):
    name: Name
    kind: Name


class ResourcesIn(_Model):
    cpu: Amount = 0.0
    gpu: Amount = 0.0
    memory: Amount = 0.0


class JobIn(_Model):
    name: Name
    user: Name
    arrival: Time
    processing_time: dict[Name, Duration]
    demand: dict[Name, ResourcesIn] | None = None


class InstanceIn(_Model):
    now: Time = 0.0
    alpha: Annotated[float, Field(ge=0, le=1)] = 1.0
    machines: list[MachineIn]
    jobs: list[JobIn]
    busy_until: dict[Name, Time] = Field(default_factory=dict)
    capacity: ResourcesIn | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """One validated instance of the tool, as core values."""

    now: float
    alpha: float
    machines: tuple[Machine, ...]
    jobs: tuple[Job, ...]
    busy_until: Mapping[str, float]
    capacity: Capacity | None

    @property
    def all_arrived(self) -> bool:
        return all(job.arrival <= self.now for job in self.jobs)


def parse_instance(text: str | bytes) -> Instance:
    """Parse and check an instance; :class:`InvalidInstance` names the first bad fields."""
    _refuse_duplicate_keys(text)
    try:
        model = InstanceIn.model_validate_json(text)
    except ValidationError as error:
        raise InvalidInstance("; ".join(_describe(e) for e in error.errors()[:3])) from None
    return _to_instance(model)


def _refuse_duplicate_keys(text: str | bytes) -> None:
    """JSON readers keep the last of two equal keys, dropping the first value without a word;
    here it is an error naming where. Malformed JSON is left to the schema's own message."""
    duplicates: list[tuple[dict[str, object], str]] = []

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        mapping: dict[str, object] = {}
        for key, value in items:
            if key in mapping:
                duplicates.append((mapping, key))
            mapping[key] = value
        return mapping

    try:
        document = json.loads(text, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return
    if duplicates:
        mapping, key = duplicates[0]
        where = _path_to(document, mapping)
        raise InvalidInstance(f"duplicate key {key!r}", field=f"{where}.{key}" if where else key)


def _path_to(node: object, target: object, path: str = "") -> str | None:
    """The field path (``jobs[0].processing_time``) of the object ``target`` inside ``node``."""
    if node is target:
        return path
    children: list[tuple[str, object]]
    if isinstance(node, dict):
        children = [(f"{path}.{key}" if path else key, value) for key, value in node.items()]
    elif isinstance(node, list):
        children = [(f"{path}[{index}]", value) for index, value in enumerate(node)]
    else:
        return None
    for child_path, child in children:
        found = _path_to(child, target, child_path)
        if found is not None:
            return found
    return None


def _describe(error: Mapping[str, object]) -> str:
    location = error.get("loc", ())
    path = ""
    for part in location if isinstance(location, tuple) else ():
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    message = str(error.get("msg", "invalid"))
    return f"{path or 'input'}: {message}"


def _to_instance(model: InstanceIn) -> Instance:
    machines: list[Machine] = []
    seen_machines: set[str] = set()
    for index, machine in enumerate(model.machines):
        if machine.name in seen_machines:
            raise InvalidInstance(f"duplicate machine name {machine.name!r}", field=f"machines[{index}].name")
        seen_machines.add(machine.name)
        machines.append(Machine(name=machine.name, kind=machine.kind))
    for name in model.busy_until:
        if name not in seen_machines:
            raise InvalidInstance(f"unknown machine {name!r}", field=f"busy_until.{name}")
    kinds = {machine.kind for machine in machines}

    jobs: list[Job] = []
    seen_jobs: set[str] = set()
    for index, job in enumerate(model.jobs):
        if job.name in seen_jobs:
            raise InvalidInstance(f"duplicate job name {job.name!r}", field=f"jobs[{index}].name")
        seen_jobs.add(job.name)
        if not any(kind in kinds for kind in job.processing_time):
            raise InvalidInstance(
                f"no machine kind in this instance can run job {job.name!r}",
                field=f"jobs[{index}].processing_time",
            )
        for kind in job.processing_time:
            if kind not in kinds:
                # A misspelt kind ("GPU") would drop that configuration without a word.
                raise InvalidInstance(
                    f"no machine of kind {kind!r} in this instance (kinds: {', '.join(sorted(kinds))})",
                    field=f"jobs[{index}].processing_time.{kind}",
                )
        demand: dict[str, Demand] = {}
        for kind, resources in (job.demand or {}).items():
            if kind not in job.processing_time:
                raise InvalidInstance(
                    f"job {job.name!r} has no processing time on {kind!r}", field=f"jobs[{index}].demand.{kind}"
                )
            if model.capacity is not None:
                _check_within(resources, model.capacity, field=f"jobs[{index}].demand.{kind}")
            demand[kind] = Demand(cpu=resources.cpu, gpu=resources.gpu, memory=resources.memory)
        if demand and model.capacity is None:
            raise InvalidInstance(
                f"required when a job gives a demand (jobs[{index}].demand): shares are relative to it",
                field="capacity",
            )
        jobs.append(
            Job(
                name=job.name,
                user=job.user,
                arrival=job.arrival,
                processing_time=dict(job.processing_time),
                demand=demand,
            )
        )
    capacity = None
    if model.capacity is not None:
        capacity = Capacity(cpu=model.capacity.cpu, gpu=model.capacity.gpu, memory=model.capacity.memory)
    return Instance(
        now=model.now,
        alpha=model.alpha,
        machines=tuple(machines),
        jobs=tuple(jobs),
        busy_until=dict(model.busy_until),
        capacity=capacity,
    )


def _check_within(demand: ResourcesIn, capacity: ResourcesIn, *, field: str) -> None:
    # Fairness divides a demand by the capacity and skips a resource the capacity has none of:
    # a demand of it would count for nothing, one over the capacity for more than the cluster.
    for resource in ("cpu", "gpu", "memory"):
        wanted, total = getattr(demand, resource), getattr(capacity, resource)
        if wanted > total:
            raise InvalidInstance(
                f"{wanted:g} is more than capacity.{resource} ({total:g})", field=f"{field}.{resource}"
            )
