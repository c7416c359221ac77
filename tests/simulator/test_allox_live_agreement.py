"""One engine (DESIGN.md, issue 13): the simulator's ``allox`` and ``allox+`` decide through AlloX
admission itself, so at every scheduling event of a simulated run the live placer controller,
fed the same state as a cluster would show it, starts the same Jobs on the same kinds.

At each call the simulation makes to its policy, the state is written the way the live side
reads it: every job in the system as a ``batch/v1`` Job (the waiting ones suspended with
``cellfit.io/configurations`` and the estimate the simulated estimator produced, the ones still
sampling without an estimate, the running ones unsuspended with ``cellfit.io/placement`` and
their start time), and free capacity as the cluster cache computes it (allocatable less the
bookings of the fit engine, the running Jobs' own pods excepted). A :class:`PlacerController`
over a recording API admits once on that state with the simulator's clock; the Jobs it patches
(and the kind it writes) must be the jobs the simulation started at that instant, on those
kinds. Timestamps are RFC 3339 with microseconds, as precise as the API keeps them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

import pytest

from allox_helpers import cluster
from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.matching.model import Demand
from scheduler.preemption import FitGppSettings
from scheduler.simulator.allox.policies import AdmissionDriver, InterchangeablePolicy, make_interchangeable_policy
from scheduler.simulator.allox.simulation import InterchangeableSimulation, Phase, _SimJob
from scheduler.simulator.allox.workload import AlloxWorkload
from scheduler.simulator.policy_registry import AlloxOptions, PolicyOptions

GPU = "nvidia.com/gpu"


def _quantity(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{round(value * 1000)}m"


def _configurations(demand: Mapping[str, Demand]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, d in demand.items():
        resources = {"cpu": _quantity(d.cpu), "memory": f"{_quantity(d.memory)}Gi"}
        if d.gpu:
            resources[GPU] = _quantity(d.gpu)
        out[kind] = {"resources": resources}
    return out


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _as_kubernetes_job(job: _SimJob) -> Any:
    """``job`` as the live controller reads it from the API."""
    spec = job.spec
    annotations = {"cellfit.io/configurations": json.dumps(_configurations(spec.demand))}
    if job.phase is not Phase.PROFILING:  # the estimator has written its estimate
        annotations["cellfit.io/estimate"] = json.dumps({kind: {"seconds": s} for kind, s in job.seen.processing_time.items()})
    running = job.phase is Phase.RUNNING
    if running:
        assert job.machine is not None
        annotations["cellfit.io/placement"] = job.machine.kind
    body = {
        "metadata": {"name": spec.job_id, "namespace": spec.user, "uid": f"uid-{spec.job_id}", "annotations": annotations,
                     "creationTimestamp": _rfc3339(spec.submit_time)},
        "spec": {"suspend": not running, "template": {"metadata": {"labels": {"job-name": spec.job_id}},
                                                      "spec": {"containers": [{"name": "train", "image": "train"}]}}},
        "status": {"startTime": _rfc3339(job.started_at)} if running else {},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


@dataclass(frozen=True)
class Point:
    """One scheduling call: the state as the live side would see it, and what the simulation did."""

    now: float
    jobs: list[Any]
    free_by_node: Callable[[frozenset[str]], Mapping[str, Resources]]
    sampling_pods: int
    running: int
    idle_machines: int
    took: set[tuple[str, str]]  # (job, kind) the simulation started


class Recording:
    """Wraps the simulator's policy; records each call's state and the starts it made."""

    def __init__(self, inner: InterchangeablePolicy) -> None:
        assert isinstance(inner, AdmissionDriver)
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.needs_estimates = inner.needs_estimates
        self.points: list[Point] = []

    def schedule(self, sim: InterchangeableSimulation) -> None:
        present = [job for job in sim.jobs if job.phase in (Phase.PROFILING, Phase.WAITING, Phase.RUNNING)]
        jobs = [_as_kubernetes_job(job) for job in present]
        # The cluster cache's free_by_node(except_owners=...): allocatable less every pod booked
        # on the node, except the pods of the Jobs named.
        engine_free = {name: sim.free_on(name) for name in sim.cluster.node_names()}
        bound = sim.bound_pods()
        owners = [(f"uid-{job.spec.job_id}", *bound[job.spec.job_id])
                  for job in present if job.phase is Phase.RUNNING and job.spec.job_id in bound]

        def free_by_node(except_owners: frozenset[str]) -> Mapping[str, Resources]:
            free = dict(engine_free)
            for uid, node, requests in owners:
                if uid in except_owners:
                    free[node] = free[node] + requests
            return free

        holdings = sim.holdings()
        before = {job.spec.job_id for job in present if job.phase is Phase.RUNNING}
        now = sim.now
        self.inner.schedule(sim)
        took = {(job.spec.job_id, job.machine.kind) for job in sim.jobs
                if job.phase is Phase.RUNNING and job.machine is not None and job.spec.job_id not in before}
        self.points.append(Point(
            now=now, jobs=jobs, free_by_node=free_by_node, took=took, running=len(before),
            sampling_pods=sum(1 for pod in holdings.values() if pod is not None and "/sample-" in pod),
            idle_machines=sum(1 for pod in holdings.values() if pod is None),
        ))


class RecordingApi:
    """The API the controller writes to: which Jobs it started, on which kind."""

    def __init__(self) -> None:
        self.placed: set[tuple[str, str]] = set()

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        assert operations[0] == {"op": "test", "path": "/spec/suspend", "value": True}
        kind = next(op["value"] for op in operations if op["path"] == "/metadata/annotations/cellfit.io~1placement")
        self.placed.add((name, kind))

    set_job_condition = create_event = staticmethod(lambda **_: None)


class Jobs(list[Any]):
    """The estimator's watch of interchangeable Jobs, frozen at one instant."""

    def interchangeable_jobs(self) -> list[Any]:
        return list(self)

    def subscribe(self, on_change: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("policy", "alpha", "timeout"),
    [("allox", 0.25, math.inf), ("allox", 1.0, math.inf), ("allox+", 0.25, 1800.0)],
)
def test_the_live_controller_takes_the_simulators_decisions(policy: str, alpha: float, timeout: float) -> None:
    workload = AlloxWorkload(users=4)  # samples from the estimator: they hold part of the machines
    jobs = workload.generate(jobs=120, seed=5, cluster=cluster(4), load=0.9)
    options = PolicyOptions(settings=FitGppSettings(), allox=AlloxOptions(alpha=alpha, timeout=timeout))
    recording = Recording(make_interchangeable_policy(policy, options))
    InterchangeableSimulation(cluster=cluster(4), workload=workload, jobs=jobs, policy=recording).run()
    settings = AlloxSettings(policy=policy, alpha=alpha, allox_plus_timeout_seconds=None if math.isinf(timeout) else timeout,
                             reserved_cpu_per_gpu=workload.reserved_cpu_per_gpu, solver_process=False)
    points = recording.points
    capacity = cluster(4).capacity  # the cluster cache's capacity(): every node's allocatable, summed
    for index, point in enumerate(points):
        api = RecordingApi()
        live = PlacerController(api=api, jobs=Jobs(point.jobs), free_by_node=point.free_by_node, capacity=lambda: capacity,
                                settings=settings, gpu_resource=GPU, clock=lambda now=point.now: now)
        live.admit()
        assert api.placed == point.took, (index, point.now)
    # The run went through the states that matter: starts, AlloX leaving an idle machine idle,
    # running jobs as busy machines, sampling pods holding capacity.
    assert sum(len(p.took) for p in points) == len(jobs)
    assert any(p.took and p.running and p.sampling_pods for p in points)
    assert any(not p.took and p.idle_machines for p in points)
    assert len(points) > 100
