"""The ``allox`` workload places its pods as live: a start is a pod kube-scheduler binds where
the served engine's filter and prioritize say, whichever machine the policy counted it on, and
a pod no node has room for waits until a pod's deletion makes some, its job's run starting only
then."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from allox_helpers import EXACT, Checked, check, cluster, spec
from scheduler.config import Settings, parse_settings
from scheduler.core.resources import Resources
from scheduler.matching.model import Demand
from scheduler.preemption import FitGppSettings
from scheduler.simulator.allox.policies import make_interchangeable_policy
from scheduler.simulator.allox.simulation import AlloxRunResult, InterchangeableSimulation
from scheduler.simulator.policy_registry import AlloxOptions, PolicyOptions
from scheduler.simulator.cluster import GIB, MINUTE, ClusterSpec


class _Scripted:
    """Starts the given (job, machine name) pairs at its first call."""

    name = "scripted"
    preemptive = False
    needs_estimates = False

    def __init__(self, starts: list[tuple[str, str]]) -> None:
        self.starts = starts

    def schedule(self, sim: InterchangeableSimulation) -> None:
        machines = {machine.name: machine for machine in sim.machines}
        for job, machine in self.starts:
            sim.start(job, machines[machine])
        self.starts = []


def test_a_pod_is_bound_where_the_engine_packs_it_not_on_the_node_of_its_machine() -> None:
    # Two nodes of two GPUs. Both jobs are counted on node-01's GPUs; resource fit packs GPU
    # pods (its score grows with the node's used GPUs), so kube-scheduler binds both on node-00,
    # the first best of two empty nodes, then the one with a GPU used.
    node = Resources(cpu_millis=40_000, memory_bytes=64 * GIB, gpus=2)
    jobs = [spec("a", 5, 50), spec("b", 6, 60)]
    policy = _Scripted([("a", "node-01/gpu-0"), ("b", "node-01/gpu-1")])
    sim = InterchangeableSimulation(cluster=ClusterSpec(nodes=2, node=node), workload=EXACT, jobs=jobs, policy=Checked(policy))
    seen: dict[str, tuple[str, Resources]] = {}
    original = sim._schedule_pods

    def schedule_pods() -> None:
        original()
        seen.update(sim.bound_pods())
        check(sim)

    sim._schedule_pods = schedule_pods  # type: ignore[method-assign]
    result = sim.run()
    assert {uid: where for uid, (where, _) in seen.items()} == {"a": "node-00", "b": "node-00"}
    assert seen["a"][1] == Resources(cpu_millis=1000, memory_bytes=4 * GIB, gpus=1)
    assert list(result.finish / MINUTE) == pytest.approx([5.0, 6.0])
    assert result.pods_waited == 0


def test_a_pod_no_node_has_room_for_waits_and_its_job_runs_once_it_is_bound() -> None:
    # One node: a GPU and a 19-core CPU slot, 64 GiB. Both configurations ask 40 GiB, so the
    # machines admit both jobs at once but the node holds one pod: the GPU job's pod waits for
    # the CPU job's deletion, and its 3 minutes run from then.
    heavy = MappingProxyType({"gpu": Demand(gpu=1, cpu=1, memory=40), "cpu": Demand(cpu=19, memory=40)})
    jobs = [replace(spec("c", 1, 10), demand=heavy), replace(spec("g", 3, 30), demand=heavy)]
    policy = _Scripted([("c", "node-00/cpu-0"), ("g", "node-00/gpu-0")])
    sim = InterchangeableSimulation(cluster=ClusterSpec(nodes=1, node=Resources(20_000, 64 * GIB, 1)), workload=EXACT,
                                    jobs=jobs, policy=Checked(policy))
    states: list[tuple[float, dict[str, str], list[str]]] = []
    original = sim._schedule_pods

    def schedule_pods() -> None:
        original()
        states.append((sim.now, {uid: where for uid, (where, _) in sim.bound_pods().items()}, sim.waiting_pods()))
        check(sim)

    sim._schedule_pods = schedule_pods  # type: ignore[method-assign]
    result = sim.run()
    assert states[1] == (0.0, {"c": "node-00"}, ["g"])  # after the policy's starts
    assert (10 * MINUTE, {"g": "node-00"}, []) in states
    assert list(result.first_start / MINUTE) == pytest.approx([0.0, 0.0])  # started (unsuspended) at 0
    assert list(result.finish / MINUTE) == pytest.approx([10.0, 13.0])  # g ran from its binding
    assert result.pods_waited == 1


def test_under_hived_admission_counts_the_guarantee_and_the_cells_place_the_pods() -> None:
    # HiveD with cells on two of the three nodes (the implicit default VC owns both): a GPU pod
    # binds only in a cell, and admission, reading the VC's free guarantee as live, counts two
    # GPU machines, not three: the third job waits in admission's queue for a cell's GPU (its
    # 40-minute CPU configuration is slower) and no pod waits for a node. Resource fit on the
    # same jobs uses all three GPUs.
    configuration = parse_settings("""
policy: {name: hived}
cells:
  topology:
    cellTypes:
      GPU-NODE: {childType: GPU, childCount: 1, isNodeLevel: true}
    physicalCells:
    - {cellType: GPU-NODE, nodeName: node-00}
    - {cellType: GPU-NODE, nodeName: node-01}
""")
    jobs = [spec(f"j{i}", 2, 40) for i in range(3)]
    gpu_nodes: set[str] = set()

    def run(configuration: Settings | None) -> AlloxRunResult:
        policy = make_interchangeable_policy("allox", PolicyOptions(settings=FitGppSettings(), allox=AlloxOptions(alpha=1.0)))
        sim = InterchangeableSimulation(cluster=cluster(3), workload=EXACT, jobs=jobs, policy=Checked(policy),
                                        configuration=configuration)
        original = sim._schedule_pods

        def schedule_pods() -> None:
            original()
            gpu_nodes.update(where for where, requests in sim.bound_pods().values() if requests.gpus)

        sim._schedule_pods = schedule_pods  # type: ignore[method-assign]
        return sim.run()

    fit = run(None)
    assert gpu_nodes == {"node-00", "node-01", "node-02"} and fit.pods_waited == 0
    assert list(fit.finish / MINUTE) == pytest.approx([2.0, 2.0, 2.0])
    gpu_nodes.clear()
    hived = run(configuration)
    assert gpu_nodes == {"node-00", "node-01"} and hived.pods_waited == 0
    assert sorted(hived.finish / MINUTE) == pytest.approx([2.0, 2.0, 4.0])
    assert sorted(hived.first_start / MINUTE) == pytest.approx([0.0, 0.0, 2.0])
