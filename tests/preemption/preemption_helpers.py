"""Builders and a brute-force reference of eqs. 1–4 for the FitGpp tests."""

from __future__ import annotations

import math
from typing import Sequence

from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import Candidate, FitGppSettings, JobClass, NodeState

GIB = 2**30
NODE = Resources(32_000, 256 * GIB, 8)
TRIAL = {"cellfit.io/job-class": "trial"}
BEST_EFFORT = {"cellfit.io/job-class": "best-effort"}


def res(cpu: float, memory_gib: float, gpus: int) -> Resources:
    return Resources(int(cpu * 1000), int(memory_gib * GIB), gpus)


def te_pod(cpu: float, memory_gib: float, gpus: int, *, uid: str = "te") -> PodInfo:
    return PodInfo(uid=uid, namespace="ns", name=uid, requests=res(cpu, memory_gib, gpus), labels=TRIAL)


def be(
    uid: str,
    cpu: float,
    memory_gib: float,
    gpus: int,
    *,
    grace: float = 60.0,
    preemptions: int = 0,
    job_class: JobClass = JobClass.BEST_EFFORT,
    terminating: bool = False,
) -> Candidate:
    return Candidate(
        uid=uid,
        key=f"ns/{uid}",
        job_class=job_class,
        requests=res(cpu, memory_gib, gpus),
        grace_period_seconds=grace,
        preemptions=preemptions,
        terminating=terminating,
    )


def node(name: str, candidates: Sequence[Candidate], *, capacity: Resources = NODE, others: Resources = Resources()) -> NodeState:
    """A node running ``candidates`` and ``others`` (pods that are not candidates, e.g. TE)."""
    used = others
    for candidate in candidates:
        used = used + candidate.requests
    return NodeState(name=name, capacity=capacity, free=capacity - used, candidates=tuple(candidates))


def reference_choice(
    preemptor: PodInfo, nodes: Sequence[NodeState], settings: FitGppSettings
) -> tuple[float, str, str] | None:
    """Eq. 4 by the letter, one candidate at a time: (score, node, uid) of the victim, or None."""
    pool = [(n, c) for n in nodes for c in n.candidates if c.job_class is JobClass.BEST_EFFORT and not c.terminating]
    if not pool:
        return None

    def size(n: NodeState, c: Candidate) -> float:
        total = 0.0
        for amount, whole in zip(c.requests.as_tuple(), n.capacity.as_tuple()):
            if whole:
                total += (amount / whole) ** 2
        return math.sqrt(total)

    max_size = max(size(n, c) for n, c in pool)
    max_grace = max(c.grace_period_seconds for _, c in pool)
    best: tuple[float, str, str] | None = None
    for n, c in pool:
        if settings.max_preemptions is not None and c.preemptions >= settings.max_preemptions:
            continue
        if not preemptor.requests.fits_in(c.requests + n.free):
            continue
        score = (size(n, c) / max_size if max_size else 0.0) + settings.grace_period_weight * (
            c.grace_period_seconds / max_grace if max_grace else 0.0
        )
        key = (score, n.name, c.uid)
        if best is None or key < best:
            best = key
    return best
