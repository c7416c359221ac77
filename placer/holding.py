"""Whether a Job AlloX started still holds machines of its kind (pure).

AlloX counts a started Job as busy machines of its kind until ``start + estimate``. That is
only true while its pods are where AlloX's machines are. A started Job whose pods run on nodes
outside ``allox.nodeSelector``, or whose pods never reached a node, or are gone, holds none of
AlloX's capacity; counted anyway, AlloX's busy machines exceed the GPUs it has (two busy GPUs
on a one-GPU node) and Jobs wait for machines that are free.

The rule, from the pods of the Job that the cluster cache holds (it forgets finished pods):

- a pod bound to one of AlloX's nodes: it holds its machines (``running``);
- else a pod bound to another node: none (``elsewhere``: the capacity it uses is not AlloX's);
- else within ``unbound_hold_seconds`` of its start: it holds them (``starting``: its pods are
  on their way through the Job controller and kube-scheduler, and starting another Job on the
  same machine meanwhile would book it twice; a Job between two waves of pods holds too);
- else a pod not bound to any node: none (``unbound``: nothing of it reached a node in that
  long, say a pod that fits no node, or its pods were bound and are waiting to be placed again,
  their node deleted (a pod bound to a node the cluster no longer has counts as not bound, not
  as bound outside AlloX's nodes); the Job is told, and counted again once a pod binds);
- else no pod at all: none (``gone``: its pods finished and the Job controller has not marked
  it complete yet, or they were deleted).

A Job whose pods only a pool of ``estimator.nodesMayJoin`` runs, none of them bound yet, holds
none while no node of that pool up now could take them (``joining``, judged by the controller,
which knows the pools): they wait for the autoscaler to add one, and no machine of AlloX's is
theirs meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Mapping

from scheduler.constants import ANNOTATION_PODS_BOUND

# Long enough for the Job controller to create the pods and kube-scheduler to bind them on a
# loaded control plane (seconds), and for a gang's pods to gather; short enough that a Job
# whose pods fit no node gives its machine back within minutes.
DEFAULT_UNBOUND_HOLD_SECONDS: Final = 300.0

Hold = Literal["running", "starting", "elsewhere", "unbound", "gone", "joining"]
HOLDING: Final[frozenset[Hold]] = frozenset({"running", "starting"})


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPods:
    """A Job's pods as the cluster cache holds them."""

    here: int = 0  # bound to one of AlloX's nodes, not finished
    elsewhere: int = 0  # bound to another node, not finished
    unbound: int = 0  # not bound to a node yet, or to a node the cluster no longer has


def hold(*, pods: JobPods | None, started: float, now: float, unbound_hold_seconds: float) -> Hold:
    """What a started Job holds (see the module's docstring). ``pods`` None: the cache holds no
    pod of it (not created yet, finished, or deleted)."""
    pods = pods or JobPods()
    if pods.here > 0:
        return "running"
    if pods.elsewhere > 0:
        return "elsewhere"
    if now - started < unbound_hold_seconds:
        return "starting"
    return "unbound" if pods.unbound > 0 else "gone"


def bound_in_this_run(annotations: Mapping[str, str], start_time: str | None) -> bool:
    """Whether the Job's record (:data:`ANNOTATION_PODS_BOUND`) says a pod of it was bound in
    the run that started at ``start_time`` (its ``status.startTime``)."""
    return bool(start_time) and annotations.get(ANNOTATION_PODS_BOUND) == start_time


def explain(kind: str, state: Hold, *, unbound_hold_seconds: float, was_bound: bool = False) -> str:
    """The Job's condition message when it holds no machine (``elsewhere`` or ``unbound``);
    ``was_bound``: its pods were seen bound to AlloX's nodes before (so not "none was bound")."""
    if state == "elsewhere":
        return f"its pods run on nodes outside AlloX's (allox.nodeSelector): AlloX keeps no {kind} machine for it"
    if was_bound:
        return (f"its pods are waiting to be placed again (their node was deleted, or they were replaced), none bound "
                f"to a node now: AlloX keeps no {kind} machine for it until one is bound")
    return (f"started on {kind}, and none of its pods was bound to a node within {unbound_hold_seconds:.0f} s: "
            f"AlloX no longer keeps a {kind} machine for it (again as soon as a pod is bound)")
