"""What a pod asks HiveD for, read from its labels, annotations and GPU request.

Only the syntax is checked here (a label value that is not ``guaranteed|opportunistic``, a gang
without a size). Whether the VC exists or owns the cell type is the allocator's business, because
it depends on the configuration.
"""

from __future__ import annotations

from enum import Enum
from typing import Final, Literal, NamedTuple

from scheduler.constants import (
    ANNOTATION_CELL_TYPE,
    ANNOTATION_GANG,
    ANNOTATION_GANG_SIZE,
    LABEL_PRIORITY,
    LABEL_VIRTUAL_CLUSTER,
    PRIORITY_GUARANTEED,
    PRIORITY_OPPORTUNISTIC,
)
from scheduler.core.model import PodInfo
from scheduler.errors import InvalidAnnotation

# A guard against typos like "gang-size: 1000000" booking the whole cluster.
MAX_GANG_SIZE: Final = 4096

# What makes a request one the running configuration can never place (HivedEngine.request_problem).
RequestProblem = Literal["virtual-cluster", "cells"]


class Priority(Enum):
    GUARANTEED = PRIORITY_GUARANTEED
    OPPORTUNISTIC = PRIORITY_OPPORTUNISTIC


# Priority(value) goes through Enum's lookup machinery (~1 us); every pod is parsed.
_PRIORITY_BY_VALUE: Final = {p.value: p for p in Priority}


# Immutable values made for every pod: NamedTuples, which are built several times faster than
# frozen dataclasses (whose __init__ goes through object.__setattr__ for every field).
class GangSpec(NamedTuple):
    key: str  # the owner Job's UID: every pod of the Job shares it
    name: str  # the owner Job's namespace/name, for messages
    size: int


class CellRequest(NamedTuple):
    vc: str | None  # None: the pod has no VC label
    priority: Priority
    gpus: int
    cell_type: str | None
    gang: GangSpec | None

    @property
    def pods(self) -> int:
        return self.gang.size if self.gang else 1


def parse_request(pod: PodInfo) -> CellRequest:
    """Raise :class:`InvalidAnnotation` naming the label or annotation that cannot be used."""
    vc = pod.labels.get(LABEL_VIRTUAL_CLUSTER) or None
    raw_priority = pod.labels.get(LABEL_PRIORITY, PRIORITY_GUARANTEED)
    priority = _PRIORITY_BY_VALUE.get(raw_priority)
    if priority is None:
        raise InvalidAnnotation(
            f"{raw_priority!r} is not {PRIORITY_GUARANTEED!r} or {PRIORITY_OPPORTUNISTIC!r}",
            field=f"label {LABEL_PRIORITY}",
        )
    cell_type = pod.annotations.get(ANNOTATION_CELL_TYPE) or None
    return CellRequest(vc=vc, priority=priority, gpus=pod.requests.gpus, cell_type=cell_type, gang=_parse_gang(pod))


def _parse_gang(pod: PodInfo) -> GangSpec | None:
    raw = pod.annotations.get(ANNOTATION_GANG, "false").strip().lower()
    if raw in ("false", ""):
        return None
    if raw != "true":
        raise InvalidAnnotation(f"{raw!r} is not 'true' or 'false'", field=f"annotation {ANNOTATION_GANG}")
    if pod.owner is None:
        raise InvalidAnnotation("a gang pod must be owned by a Job (it has no owner)", field=f"annotation {ANNOTATION_GANG}")
    raw_size = pod.annotations.get(ANNOTATION_GANG_SIZE)
    if raw_size is None:
        raise InvalidAnnotation("is required on a gang pod (the number of pods of the Job)", field=f"annotation {ANNOTATION_GANG_SIZE}")
    try:
        size = int(raw_size)
    except ValueError:
        raise InvalidAnnotation(f"{raw_size!r} is not an integer", field=f"annotation {ANNOTATION_GANG_SIZE}") from None
    if not 1 <= size <= MAX_GANG_SIZE:
        raise InvalidAnnotation(f"must be between 1 and {MAX_GANG_SIZE}, got {size}", field=f"annotation {ANNOTATION_GANG_SIZE}")
    return GangSpec(key=pod.owner.uid, name=f"{pod.namespace}/{pod.owner.name}", size=size)


def pods_at_once(*, parallelism: int | None, completions: int | None) -> int | None:
    """How many pods a batch/v1 Job runs at the same time at most: ``spec.parallelism``
    (Kubernetes defaults it to 1), fewer when ``spec.completions`` is smaller. ``None`` for a
    Job scaled to 0 (``parallelism: 0``): it runs none until it is scaled up, which says nothing
    yet about its gang."""
    width = 1 if parallelism is None else parallelism
    if width == 0:
        return None
    return width if completions is None else min(width, completions)


def gang_size_problem(size: int, *, parallelism: int | None, completions: int | None) -> str | None:
    """Why a gang of ``size`` pods can never be complete in a Job with this spec, or ``None``.

    Pure, for every place that sees the Job: HiveD's filter refuses such a gang's pods (its
    booking would hold the cells for pods that never come), and the admission webhook warns
    when the Job is created. The sentence names both fields."""
    at_once = pods_at_once(parallelism=parallelism, completions=completions)
    if at_once is None or size <= at_once:
        return None
    spec = f"spec.parallelism {1 if parallelism is None else parallelism}"
    if completions is not None and completions < (1 if parallelism is None else parallelism):
        spec += f", spec.completions {completions}"
    pods = "1 pod" if at_once == 1 else f"{at_once} pods"
    return (
        f"annotation {ANNOTATION_GANG_SIZE} is {size} but the Job runs at most {pods} at once ({spec}): "
        f"the gang could never be complete (set it to {at_once})"
    )
