"""Small clusters, hand-made jobs and an invariant-checking wrapper for the simulator tests."""

from __future__ import annotations

from typing import Sequence

from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings, JobClass
from scheduler.simulator.fitgpp.policies import Policy, make_policy
from scheduler.simulator.policy_registry import PolicyOptions
from scheduler.simulator.fitgpp.simulation import RunResult, Simulation
from scheduler.simulator.fitgpp.state import JobState
from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.fitgpp.workload import JobSpec

GIB = 2**30
SMALL_NODE = Resources(32_000, 256 * GIB, 8)


def job(
    job_id: str,
    *,
    at: float = 0.0,
    trial: bool = False,
    gpus: int = 1,
    cpu: int = 1,
    memory_gib: int = 1,
    duration: float = 60.0,
    grace: float = 0.0,
) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        submit_time=at,
        job_class=JobClass.TRIAL if trial else JobClass.BEST_EFFORT,
        demand=Resources(cpu * 1000, memory_gib * GIB, gpus),
        duration=duration,
        grace_period=grace,
    )


class Checked:
    """Wraps a policy and checks the cluster after every scheduling pass."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.passes = 0

    def schedule(self, sim: Simulation) -> None:
        self.inner.schedule(sim)
        self.passes += 1
        check_cluster(sim)


def check_cluster(sim: Simulation) -> None:
    node = sim.cluster.node
    held: dict[str, Resources] = {name: Resources() for name in sim.node_names}
    for job in sim.jobs:
        if job.state in (JobState.RUNNING, JobState.TERMINATING):
            assert job.node is not None
            held[job.node] = held[job.node] + job.demand
        else:
            assert job.node is None
    for name in sim.node_names:
        free = sim.engine.inner.free_on(name)
        # No node is ever over capacity, and FitGpp's index (inside the composed engine) sees
        # what the placement engine books.
        assert free.cpu_millis >= 0 and free.memory_bytes >= 0 and free.gpus >= 0, (name, free)
        assert sim.engine._free_on(name) == free
        assert held[name].fits_in(node - free), (name, held[name], free)


def simulate(
    jobs: Sequence[JobSpec],
    *,
    policy: str = "fifo",
    nodes: int = 1,
    node: Resources = SMALL_NODE,
    settings: FitGppSettings | None = None,
    seed: int = 0,
    arrivals: str = "trace",
    load: float = 2.0,
    checked: bool = True,
    tick: float = 0.0,
) -> tuple[RunResult, Simulation]:
    chosen = settings or FitGppSettings()
    inner = make_policy(policy, PolicyOptions(settings=chosen, seed=seed))
    sim = Simulation(
        cluster=ClusterSpec(nodes=nodes, node=node),
        jobs=jobs,
        policy=Checked(inner) if checked else inner,
        settings=chosen,
        seed=seed,
        arrivals=arrivals,  # type: ignore[arg-type]
        load=load,
        tick=tick,
    )
    return sim.run(), sim
