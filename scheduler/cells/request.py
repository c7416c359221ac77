"""What a pod asks HiveD for, read from its labels, annotations and GPU request.

Only the syntax is checked here (a label value that is not ``guaranteed|opportunistic``, a gang
without a size), every mistake at once. Whether the VC exists or owns the cell type is the
allocator's business, because it depends on the configuration.
"""

from __future__ import annotations

from enum import Enum
from typing import Final, Literal, NamedTuple, Sequence

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


class InvalidAnnotations(InvalidAnnotation):
    """Several independent mistakes in one pod's request, all told at once: a user who fixes
    the one named first should not meet the next only on the next try. The message is each
    mistake's ``field: problem``, joined by ``; ``; ``field`` is ``None`` (there are several)."""

    def __init__(self, mistakes: Sequence[InvalidAnnotation]) -> None:
        super().__init__("; ".join(str(mistake) for mistake in mistakes))
        self.mistakes = tuple(mistakes)


def parse_request(pod: PodInfo) -> CellRequest:
    """Raise :class:`InvalidAnnotation` naming the label or annotation that cannot be used;
    :class:`InvalidAnnotations` (one of them) when several cannot."""
    request, mistakes = read_request(pod)
    if not mistakes:
        return request
    raise mistakes[0] if len(mistakes) == 1 else InvalidAnnotations(mistakes)


def read_request(pod: PodInfo) -> tuple[CellRequest, list[InvalidAnnotation]]:
    """The pod's request and every independent mistake in it, each naming its field. A key in
    error is read as if it were absent (the priority as guaranteed, the gang as none), so what
    does not depend on it is still checked; a mistake that only follows from another (a gang's
    size where the gang itself is in error) is left out."""
    mistakes: list[InvalidAnnotation] = []
    vc = pod.labels.get(LABEL_VIRTUAL_CLUSTER) or None
    raw_priority = pod.labels.get(LABEL_PRIORITY, PRIORITY_GUARANTEED)
    priority = _PRIORITY_BY_VALUE.get(raw_priority)
    if priority is None:
        mistakes.append(InvalidAnnotation(
            f"{raw_priority!r} is not {PRIORITY_GUARANTEED!r} or {PRIORITY_OPPORTUNISTIC!r}",
            field=f"label {LABEL_PRIORITY}",
        ))
        priority = Priority.GUARANTEED
    cell_type = pod.annotations.get(ANNOTATION_CELL_TYPE) or None
    gang = _read_gang(pod, mistakes)
    return CellRequest(vc=vc, priority=priority, gpus=pod.requests.gpus, cell_type=cell_type, gang=gang), mistakes


def _read_gang(pod: PodInfo, mistakes: list[InvalidAnnotation]) -> GangSpec | None:
    raw = pod.annotations.get(ANNOTATION_GANG, "false").strip().lower()
    if raw in ("false", ""):
        return None
    raw_size = pod.annotations.get(ANNOTATION_GANG_SIZE)
    if raw != "true":
        mistakes.append(InvalidAnnotation(f"{raw!r} is not 'true' or 'false'", field=f"annotation {ANNOTATION_GANG}"))
        # The size written beside it is judged as a gang's would be (the user meant a gang),
        # with or without an owner (user26 #6: a bare pod's "two" went untold); not its absence.
        if raw_size is not None:
            _gang_size(raw_size, mistakes)
        return None
    if pod.owner is None:
        mistakes.append(InvalidAnnotation("a gang pod must be owned by a Job (it has no owner)", field=f"annotation {ANNOTATION_GANG}"))
        return None
    if raw_size is None:
        mistakes.append(InvalidAnnotation("is required on a gang pod (the number of pods of the Job)", field=f"annotation {ANNOTATION_GANG_SIZE}"))
        return None
    size = _gang_size(raw_size, mistakes)
    if size is None:
        return None
    return GangSpec(key=pod.owner.uid, name=f"{pod.namespace}/{pod.owner.name}", size=size)


def _gang_size(raw_size: str, mistakes: list[InvalidAnnotation]) -> int | None:
    """The gang-size annotation's number, or ``None`` with its mistake added to ``mistakes``."""
    try:
        size = int(raw_size)
    except ValueError:
        mistakes.append(InvalidAnnotation(f"{raw_size!r} is not an integer", field=f"annotation {ANNOTATION_GANG_SIZE}"))
        return None
    if not 1 <= size <= MAX_GANG_SIZE:
        mistakes.append(InvalidAnnotation(f"must be between 1 and {MAX_GANG_SIZE}, got {size}", field=f"annotation {ANNOTATION_GANG_SIZE}"))
        return None
    return size


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
