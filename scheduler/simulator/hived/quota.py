"""The quota-only baseline of HiveD §2 and §5.2: each tenant holds a number of GPUs (its
"tokens"), and may use that many anywhere in the cluster; where they go is the default
scheduler's business, which knows nodes and GPU counts but no cells.

* :class:`QuotaGate` — a tenant's job is admitted only while its GPUs in use plus the job's stay
  within its quota (Kubernetes' ResourceQuota on ``requests.nvidia.com/gpu`` per namespace
  does exactly this count).
* :func:`least_allocated` — kube-scheduler's ``NodeResourcesFit`` scoring with its default
  strategy, ``LeastAllocated``, over ``nvidia.com/gpu``: the node with the most GPUs left after
  the pod scores highest (spreading). The other baseline ranks nodes with cellfit's own
  :class:`~scheduler.core.fit.ResourceFitEngine` (most-allocated: packing), see
  ``simulation.engine_choice``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from scheduler.errors import InvalidRequest

# kube-scheduler's framework.MaxNodeScore.
MAX_NODE_SCORE: Final = 100


class QuotaGate:
    """GPUs in use per tenant against its quota; no notion of where they are."""

    def __init__(self, quotas: Mapping[str, int]) -> None:
        for tenant, gpus in quotas.items():
            if gpus < 0:
                raise InvalidRequest(f"{gpus!r} is negative", field=f"quota {tenant}")
        self.quotas = dict(quotas)
        self.used = dict.fromkeys(quotas, 0)

    def admits(self, tenant: str, gpus: int) -> bool:
        return self.used[tenant] + gpus <= self.quotas[tenant]

    def take(self, tenant: str, gpus: int) -> None:
        if not self.admits(tenant, gpus):
            raise AssertionError(f"tenant {tenant} would hold {self.used[tenant] + gpus} GPUs, quota {self.quotas[tenant]}")
        self.used[tenant] += gpus

    def give_back(self, tenant: str, gpus: int) -> None:
        if gpus > self.used[tenant]:
            raise AssertionError(f"tenant {tenant} gives back {gpus} GPUs but holds {self.used[tenant]}")
        self.used[tenant] -= gpus


def least_allocated(*, requested: int, free: Sequence[int], allocatable: Sequence[int]) -> int:
    """kube-scheduler's LeastAllocated choice: the position of the node scoring highest,
    ``(free - requested) * 100 // allocatable`` GPUs, among nodes that fit (``free >=
    requested``); ties go to the first in the offered order (kube-scheduler picks one of the
    tied nodes at random; the first keeps runs deterministic). Raises ValueError if none fits."""
    best, best_score = -1, -1
    for position, (left, total) in enumerate(zip(free, allocatable, strict=True)):
        if left < requested or total <= 0:
            continue
        score = (left - requested) * MAX_NODE_SCORE // total
        if score > best_score:
            best, best_score = position, score
    if best < 0:
        raise ValueError(f"no node has {requested} free GPUs")
    return best
