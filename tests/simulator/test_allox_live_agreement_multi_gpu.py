"""One engine (DESIGN.md) for pods of several GPUs under HiveD: the simulator's ``allox`` hands AlloX
admission the VCs' GPU machines as the live placer controller does (placer/guarantee.py
``vc_machines``: their size, ``decide(gpu_slots=)``, and their count), so on the same state both
start the same Jobs. Before, the simulator sized a VC's machines by the nodes' free GPUs alone and
passed no ``gpu_slots``: with the VC's 8-GPU cell held by an opportunistic pod, the simulator cut
it into eight machines of 1 GPU and started three 4-GPU Jobs, where the live controller, sizing
them on the cell HiveD reclaims, started two (the third pod's 4 GPUs are not there).

The state is written as the live side reads it (test_allox_live_agreement's translation): the
Jobs, the free capacity of kube-scheduler's cache, and HiveD's view with the opportunistic pod's
requests."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import pytest

from placer.controller import Guarantees, PlacerController
from placer.guarantee import guarantees
from scheduler.config import AlloxSettings, parse_settings
from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.matching.model import Demand
from scheduler.preemption import FitGppSettings
from scheduler.simulator.allox.policies import AdmissionDriver, InterchangeableView, make_interchangeable_policy
from scheduler.simulator.allox.simulation import InterchangeableSimulation, Phase
from scheduler.simulator.allox.workload import AlloxJobSpec, AlloxWorkload
from scheduler.simulator.cluster import GIB, ClusterSpec
from scheduler.simulator.policy_registry import AlloxOptions, PolicyOptions
from test_allox_live_agreement import GPU, Jobs, RecordingApi, _as_kubernetes_job

MINUTE = 60.0
NODE = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=8)
HIVED = parse_settings("""
policy: {name: hived}
cells:
  topology:
    cellTypes:
      GPU8-NODE: {childType: GPU, childCount: 8, isNodeLevel: true}
    physicalCells:
    - {cellType: GPU8-NODE, nodeName: node-00}
""")
WORKLOAD = AlloxWorkload(user_estimate_share=1.0)


def four_gpu_job(name: str) -> AlloxJobSpec:
    times = MappingProxyType({"gpu": 10 * MINUTE, "cpu": 200 * MINUTE})
    return AlloxJobSpec(job_id=name, user="u", submit_time=0.0, processing_time=times, estimate=times,
                        demand=MappingProxyType({"gpu": Demand(gpu=4, cpu=4, memory=16), "cpu": Demand(cpu=16, memory=16)}))


class Seen(Exception):
    """The first scheduling call was compared: the run stops there."""


class FirstCall:
    """Wraps the simulator's AlloX admission: at its first call, what the simulation started and
    what the live controller, given the same state, starts."""

    def __init__(self, inner: AdmissionDriver) -> None:
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.needs_estimates = inner.needs_estimates
        self.simulated: set[tuple[str, str]] = set()
        self.live: set[tuple[str, str]] = set()

    def schedule(self, view: InterchangeableView) -> None:
        assert isinstance(view, InterchangeableSimulation)
        sim = view
        present = [job for job in sim.jobs if job.phase in (Phase.PROFILING, Phase.WAITING, Phase.RUNNING)]
        jobs = [_as_kubernetes_job(job) for job in present]
        free = {name: sim.free_on(name) for name in sim.cluster.node_names()}
        cells = sim._cells
        assert cells is not None

        def requests(uid: str) -> Resources | None:
            bound = sim.kube.bound.get(uid)
            return bound.pod.requests if bound is not None else None

        guaranteed = Guarantees(cells=guarantees(cells.inspect_guarantees(), requests=requests), default_vc=cells.default_vc)
        api = RecordingApi()
        now = sim.now
        live = PlacerController(
            api=api, jobs=Jobs(jobs), free_by_node=lambda running: free, capacity=lambda: NODE, gpu_resource=GPU,
            settings=AlloxSettings(alpha=1.0, reserved_cpu_per_gpu=WORKLOAD.reserved_cpu_per_gpu, solver_process=False),
            clock=lambda: now, guarantees=lambda running: guaranteed,
        )
        live.admit()
        self.live = api.placed
        self.inner.schedule(sim)
        self.simulated = {(job.spec.job_id, job.machine.kind) for job in sim.jobs if job.phase is Phase.RUNNING and job.machine is not None}
        raise Seen


def opportunistic_pod_on_every_gpu(sim: InterchangeableSimulation) -> None:
    """An opportunistic pod (of the implicit VC, whose cell it is) on all 8 GPUs of the node,
    bound through HiveD as kube-scheduler binds it: no node shows a GPU free, and HiveD reclaims
    the cell for the VC's guaranteed pods."""
    held: Mapping[str, Any] = {"cellfit.io/priority": "opportunistic"}
    pod = PodInfo(uid="opp-0", namespace="other", name="opp-0", requests=Resources(cpu_millis=2000, memory_bytes=8 * GIB, gpus=8),
                  labels=dict(held))
    node = sim.kube.schedule(pod)
    assert node == "node-00"
    sim.kube.bind(pod, node, at=0.0)


def test_simulated_and_live_admission_start_the_same_multi_gpu_jobs_on_a_cell_hived_reclaims() -> None:
    policy = make_interchangeable_policy("allox", PolicyOptions(settings=FitGppSettings(), allox=AlloxOptions(alpha=1.0)))
    assert isinstance(policy, AdmissionDriver)
    first = FirstCall(policy)
    sim = InterchangeableSimulation(cluster=ClusterSpec(nodes=1, node=NODE), workload=WORKLOAD,
                                    jobs=[four_gpu_job(f"j{index}") for index in range(3)], policy=first, configuration=HIVED)
    opportunistic_pod_on_every_gpu(sim)
    with pytest.raises(Seen):
        sim.run()
    # The cell's 8 GPUs hold two pods of 4 once HiveD reclaims them: two Jobs start on gpu, the
    # third waits (its CPU run is 20 times longer).
    assert first.live == {("j0", "gpu"), ("j1", "gpu")}
    assert first.simulated == first.live
