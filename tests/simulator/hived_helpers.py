"""Small hand-made clusters and jobs for the ``hived`` workload's tests."""

from __future__ import annotations

from scheduler.simulator.hived.workload import (
    ClusterShape,
    GangJob,
    HivedWorkload,
    Tenant,
)

MINUTE = 60.0


def gang(job_id: str, tenant: str, gpus: int, *, at: float = 0.0, minutes: float = 10.0, gpus_per_node: int = 8) -> GangJob:
    return GangJob(
        job_id=job_id,
        tenant=tenant,
        gpus=gpus,
        pods=1 if gpus <= gpus_per_node else gpus // gpus_per_node,
        submit_time=at,
        duration=minutes * MINUTE,
    )


def two_tenants(*, nodes_per_rack: int, a_nodes: int, b_nodes: int) -> HivedWorkload:
    """One rack; tenants ``a`` and ``b`` with node cells (the job mix is not used: the tests
    hand the jobs over themselves)."""
    return HivedWorkload(
        shape=ClusterShape(racks=1, nodes_per_rack=nodes_per_rack, gpus_per_node=8),
        tenants=(
            Tenant(name="a", nodes=a_nodes, sizes=((1, 1.0), (8, 1.0))),
            Tenant(name="b", nodes=b_nodes, sizes=((1, 1.0),)),
        ),
    )
