"""Small interchangeable-job instances and an invariant-checking policy wrapper for the tests of
the ``allox`` workload."""

from __future__ import annotations

from types import MappingProxyType
from typing import Sequence

from scheduler.core.resources import Resources
from scheduler.matching.model import Demand
from scheduler.preemption import FitGppSettings
from scheduler.simulator.allox.policies import InterchangeablePolicy, make_interchangeable_policy
from scheduler.simulator.allox.sampling import SampledJob
from scheduler.simulator.allox.simulation import AlloxRunResult, InterchangeableSimulation, demand_resources
from scheduler.simulator.allox.workload import AlloxJobSpec, AlloxWorkload
from scheduler.simulator.policy_registry import AlloxOptions, PolicyOptions
from scheduler.simulator.cluster import GIB, MINUTE, ClusterSpec

ALLOX_NODE = Resources(cpu_millis=20_000, memory_bytes=64 * GIB, gpus=1)
# Every job's user states its exact times (cellfit.io/estimate): nothing is sampled.
EXACT = AlloxWorkload(user_estimate_share=1.0)


def cluster(nodes: int) -> ClusterSpec:
    """``nodes`` of the paper's kind: each one GPU and one 19-core CPU slot."""
    return ClusterSpec(nodes=nodes, node=ALLOX_NODE)


def spec(
    name: str,
    gpu_minutes: float,
    cpu_minutes: float,
    *,
    user: str = "u",
    at_minutes: float = 0.0,
    estimate: tuple[float, float] | None = None,
    sampling: SampledJob | None = None,
) -> AlloxJobSpec:
    """A job of ``gpu_minutes`` / ``cpu_minutes``. What policies see: ``estimate`` (minutes)
    if given, else the estimator on ``sampling``'s runs if given, else the exact times (set
    by the user)."""
    truth = {"gpu": gpu_minutes * MINUTE, "cpu": cpu_minutes * MINUTE}
    seen = {"gpu": estimate[0] * MINUTE, "cpu": estimate[1] * MINUTE} if estimate is not None else truth
    return AlloxJobSpec(
        job_id=name,
        user=user,
        submit_time=at_minutes * MINUTE,
        processing_time=MappingProxyType(truth),
        estimate=None if sampling is not None and estimate is None else MappingProxyType(seen),
        sampling=sampling,
        demand=MappingProxyType({"gpu": Demand(gpu=1, cpu=1, memory=4), "cpu": Demand(cpu=19, memory=12)}),
    )


def world(
    gpu_minutes: float,
    cpu_minutes: float,
    *,
    iterations: int = 10_000,
    startup: tuple[float, float] = (0.0, 0.0),
    noise: dict[tuple[str, str], float] | None = None,
) -> SampledJob:
    """The sampling world of a job of these true times: start-ups (seconds) ``startup`` on
    (GPU, CPU), the rest spread over ``iterations``; measured times exact unless ``noise``."""
    startups = {"gpu": startup[0], "cpu": startup[1]}
    truth = {"gpu": gpu_minutes * MINUTE, "cpu": cpu_minutes * MINUTE}
    return SampledJob(
        iterations=iterations,
        startup=MappingProxyType(startups),
        per_iteration=MappingProxyType({kind: (truth[kind] - startups[kind]) / iterations for kind in truth}),
        noise=MappingProxyType(dict(noise or {})),
    )


class Checked:
    """Wraps a policy and checks, after every scheduling call, that every machine holds at most
    one pod, that the fit engine books exactly the pods the machines hold, that no node is
    over-allocated, and that no job has done more than all of its work."""

    def __init__(self, inner: InterchangeablePolicy) -> None:
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.needs_estimates = inner.needs_estimates
        self.calls = 0

    def schedule(self, sim: InterchangeableSimulation) -> None:
        self.inner.schedule(sim)
        self.calls += 1
        check(sim)


def check(sim: InterchangeableSimulation) -> None:
    holdings = sim.holdings()
    held = [pod for pod in holdings.values() if pod is not None]
    assert len(held) == len(set(held)), "a pod on two machines"
    bound = sim.bound_pods()
    waiting = sim.waiting_pods()
    assert not set(bound) & set(waiting), "a pod both bound and waiting"
    assert set(held) == set(bound) | set(waiting), "a machine's pod neither bound nor waiting, or a pod without a machine"
    node = sim.cluster.node
    for name in sim.cluster.node_names():
        free = sim.free_on(name)
        assert free.cpu_millis >= 0 and free.memory_bytes >= 0 and free.gpus >= 0, (name, free)
        assert free.fits_in(node)
        here = [requests for where, requests in bound.values() if where == name]
        assert free == node - sum(here, Resources())
        fit = getattr(getattr(sim.engine, "inner", None), "free_on", None)  # resource fit inside FitGpp
        if fit is not None:
            assert fit(name) == free, (name, fit(name), free)  # the engine books what kube-scheduler bound
    for uid, (_, requests) in bound.items():
        assert requests == _requests(sim, uid, holdings)
    for pod in held:
        if "/sample-" not in pod:
            assert sim.progress_of(pod) <= 1.0 + 1e-9


def _requests(sim: InterchangeableSimulation, pod: str, holdings: dict[str, str | None]) -> Resources:
    """What ``pod`` asks for: its configuration's demand, the kind of the machine it holds."""
    job_id = pod.partition("/sample-")[0]  # <job>/sample-<kind>-<length>
    job = next(j for j in sim.jobs if j.spec.job_id == job_id)
    machine = next(name for name, holder in holdings.items() if holder == pod)
    kind = next(m.kind for m in sim.machines if m.name == machine)
    return demand_resources(job.spec.demand[kind])


def run(
    jobs: Sequence[AlloxJobSpec],
    policy: str,
    *,
    nodes: int = 1,
    workload: AlloxWorkload = EXACT,
    alpha: float = 1.0,
    timeout: float = float("inf"),
    checked: bool = True,
    node: Resources = ALLOX_NODE,
) -> AlloxRunResult:
    inner = make_interchangeable_policy(
        policy, PolicyOptions(settings=FitGppSettings(), allox=AlloxOptions(alpha=alpha, timeout=timeout))
    )
    sim = InterchangeableSimulation(
        cluster=ClusterSpec(nodes=nodes, node=node),
        workload=workload,
        jobs=jobs,
        policy=Checked(inner) if checked else inner,
    )
    return sim.run()


def average_jct_minutes(result: AlloxRunResult) -> float:
    return float(result.completion_time.mean()) / MINUTE
