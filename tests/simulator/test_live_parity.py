"""Parity: the simulator's decisions are the live extender's.

Each trace runs twice through the same simulation: once on the engine the simulator composes
itself, once on the service ``cellfit serve`` builds from the same configuration, reached over
HTTP with the JSON kube-scheduler writes (:class:`~live_extender.LiveExtender`). Every
decision, step by step, and every job's outcome must be equal.

* FitGpp's preemption (the ``fitgpp`` workload's loop: kube-scheduler's queue, nominated nodes,
  preemption dry run, victims leaving after their grace period, resumed Jobs' next pods), under
  the default standalone composition (resource fit) and under HiveD (one VC owning the cells):
  the node of each bind and each preemption's node and victims, in order, at the same instant.
* HiveD's gangs (the ``hived`` workload's loop): two tenants' jobs of one to three pods, each
  pod filtered, prioritized and bound, a gang waiting for its tenant's cells; the nodes of each
  job's pods at each attempt.
"""

from __future__ import annotations

from typing import Any, Iterator

import httpx
import numpy as np
import pytest

from scheduler.cells import HivedEngine
from scheduler.config import Settings, parse_settings
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.resources import Resources
from scheduler.extender.runtime import build_runtime
from scheduler.preemption import FitGppSettings
from scheduler.simulator.fitgpp.experiment import Experiment, derive_arrivals
from scheduler.simulator.hived.cluster import gpu_nodes, shared_cells_config
from scheduler.simulator.hived.experiment import as_served
from scheduler.simulator.hived.simulation import ClusterScheduler, GangSimulation
from scheduler.simulator.hived.workload import GangJob, HivedWorkload
from scheduler.simulator.fitgpp.policies import make_policy
from scheduler.simulator.policy_registry import PolicyOptions
from scheduler.simulator.fitgpp.simulation import RunResult, Simulation
from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.fitgpp.workload import FitGppWorkload, JobSpec
from tests.support.api_double import EventRecordingApi
from tests.support.server import running_server, wait_until_ready

from hived_helpers import gang, two_tenants
from live_extender import BindingLiveExtender, LiveExtender, LiveService, SimulationClock, node_object
from sim_helpers import SMALL_NODE, job
from scheduler.kube.names import filter_offered

CLUSTER = ClusterSpec(nodes=3, node=SMALL_NODE)
# The configurations ``cellfit serve`` runs the preemption traces under: its embedded default
# standalone (resource fit inside FitGpp), and HiveD with the three nodes as its cells (one VC
# owning them all), what a connected cellfit discovers by default. FitGpp's P = 1, s = 4, seed 0.
COMPOSITIONS = {
    "resource-fit": "",
    "hived": """
policy: {name: hived}
cells:
  topology:
    cellTypes:
      GPU-NODE: {childType: GPU, childCount: 8, isNodeLevel: true}
    physicalCells:
    - {cellType: GPU-NODE, nodeName: node-00}
    - {cellType: GPU-NODE, nodeName: node-01}
    - {cellType: GPU-NODE, nodeName: node-02}
""",
}
EVERY_COMPOSITION = pytest.mark.parametrize("composition", sorted(COMPOSITIONS))


@pytest.fixture
def live(composition: str) -> Iterator[LiveService]:
    """``cellfit serve`` on that configuration, standalone, over HTTP, on the clock of the
    simulation that drives it."""
    clock = SimulationClock()
    runtime = build_runtime(parse_settings(COMPOSITIONS[composition]), standalone=True, clock=clock)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield LiveService(client, runtime, clock)


def _run(
    jobs: list[JobSpec], policy: str, composition: str, *, engine: LiveExtender | None = None
) -> tuple[RunResult, Simulation]:
    settings = FitGppSettings()
    sim = Simulation(
        cluster=CLUSTER,
        jobs=jobs,
        policy=make_policy(policy, PolicyOptions(settings=settings, seed=0)),
        settings=settings,
        seed=0,
        configuration=parse_settings(COMPOSITIONS[composition]),
        engine=engine,
        record_decisions=True,
    )
    if engine is not None:
        engine.follow(lambda: sim.now)
    return sim.run(), sim


def _assert_same(simulated: tuple[RunResult, Simulation], served: tuple[RunResult, Simulation]) -> None:
    (result, sim), (live_result, live_sim) = simulated, served
    assert sim.decisions is not None and live_sim.decisions is not None
    for step, (ours, theirs) in enumerate(zip(sim.decisions, live_sim.decisions)):
        assert ours == theirs, f"decision {step} differs: simulated {ours}, live {theirs}"
    assert len(sim.decisions) == len(live_sim.decisions)
    for field in ("first_start", "finish", "preemptions", "intervals"):
        assert np.array_equal(getattr(result, field), getattr(live_result, field)), field


def _preemptions(sim: Simulation) -> list[tuple[float, str, str, str, tuple[str, ...]]]:
    assert sim.decisions is not None
    return [decision for decision in sim.decisions if decision[1] == "preempt"]


@EVERY_COMPOSITION
def test_a_hand_made_trace_decides_the_same_live(composition: str, live: LiveService) -> None:
    """Three nodes of 8 GPUs filled by best-effort jobs; trial jobs then preempt the one FitGpp
    picks (short grace period, small), a second trial job arrives while the first one's victim
    is still terminating on its node (cellfit waits for it rather than taking another victim),
    and the victims resume on the room their Jobs left."""
    jobs = [
        job("be-long-a", at=0, gpus=4, duration=3600, grace=600),
        job("be-short-a", at=0, gpus=4, duration=3600, grace=30),
        job("be-long-b", at=0, gpus=6, duration=3000, grace=300),
        job("be-small-b", at=0, gpus=2, duration=2400, grace=60),
        job("be-c", at=0, gpus=8, cpu=8, duration=4000, grace=120),
        job("te-1", at=60, trial=True, gpus=4, duration=300),
        job("te-2", at=70, trial=True, gpus=2, duration=200),
        job("be-late", at=80, gpus=3, duration=600, grace=30),
        job("te-3", at=900, trial=True, gpus=6, duration=120),
        job("be-tail", at=1000, gpus=1, duration=100, grace=10),
    ]
    # Run here first: the scenario must hold what the docstring promises.
    simulated = _run(jobs, "fitgpp", composition)
    preemptions = _preemptions(simulated[1])
    assert len(preemptions) >= 2, simulated[1].decisions
    assert all(len(victims) == 1 for *_, victims in preemptions)
    extender = LiveExtender(*live)
    served = _run(jobs, "fitgpp", composition, engine=extender)
    _assert_same(simulated, served)
    assert extender.calls.get("preempt", 0) >= len(preemptions)


@EVERY_COMPOSITION
def test_a_trial_job_whose_nominated_room_was_taken_decides_the_same_live(
    composition: str, live: LiveService
) -> None:
    """te-2 is given victims on te-1's nominated node whose room is owed to te-1 (FitGpp does
    not see nominations); te-1 goes back to the queue when its victim is gone (see
    test_kube_model), live as in the simulator."""
    jobs = [
        job("be-a", gpus=6, duration=1000, grace=100),
        job("be-b", gpus=2, duration=1000, grace=10),
        job("be-full-1", gpus=8, duration=1000, grace=900),
        job("be-full-2", gpus=8, duration=1000, grace=900),
        job("te-1", at=1, trial=True, gpus=2, duration=50),
        job("te-2", at=5, trial=True, gpus=4, duration=50),
    ]
    simulated = _run(jobs, "fitgpp", composition)
    assert simulated[1].requeues == 1
    served = _run(jobs, "fitgpp", composition, engine=LiveExtender(*live))
    _assert_same(simulated, served)
    assert served[1].requeues == 1


@EVERY_COMPOSITION
@pytest.mark.parametrize("policy", ["fitgpp", "fifo", "kube"])
@pytest.mark.parametrize("node_cache_capable", [False, True], ids=["full-objects", "node-names"])
def test_a_synthetic_trace_decides_the_same_live(
    policy: str, composition: str, node_cache_capable: bool, live: LiveService
) -> None:
    """Forty jobs of the calibrated workload on three nodes, arrivals from the closed FIFO loop
    at load 2.0 (the paper's setting, shrunk): FitGpp preempts several times, on the paper's
    FIFO queues and on kube-scheduler's own queue; kube-scheduler's requests with full objects
    and as the chart configures it (``nodeCacheCapable: true``: names and victims' UIDs)."""
    specs = FitGppWorkload().generate(jobs=40, seed=3, cluster=CLUSTER)
    jobs, _ = derive_arrivals(Experiment(cluster=CLUSTER, jobs=40), specs, seed=3)
    simulated = _run(jobs, policy, composition)
    if policy != "fifo":
        assert len(_preemptions(simulated[1])) >= 2
    served = _run(jobs, policy, composition, engine=LiveExtender(*live, node_cache_capable=node_cache_capable))
    _assert_same(simulated, served)


# ---------------------------------------------------------------- HiveD: gangs of several pods


class _Recorded(ClusterScheduler):
    """kube-scheduler's cycle per job, each outcome kept: the nodes of a gang's pods, or None."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.outcomes: list[tuple[str, list[str] | None]] = []

    def try_start(self, job: GangJob) -> list[str] | None:
        nodes = super().try_start(job)
        self.outcomes.append((job.job_id, nodes))
        return nodes


def _gangs(workload: HivedWorkload) -> list[GangJob]:
    """Tenant ``a``'s gangs of two and three whole nodes and single-GPU jobs, tenant ``b``'s
    single GPUs and a one-node job: a gang that must wait for its tenant's cells while the other
    tenant's jobs run, and gangs that start when cells come back."""
    return [
        gang("a-gang-16", "a", 16, at=0, minutes=30),
        gang("b-1", "b", 1, at=0, minutes=20),
        gang("b-2", "b", 1, at=10, minutes=25),
        gang("a-1", "a", 1, at=20, minutes=5),
        gang("a-gang-24", "a", 24, at=30, minutes=10),  # a's 3 nodes are busy: waits for a-gang-16
        gang("b-8", "b", 8, at=40, minutes=15),
        gang("b-3", "b", 1, at=50, minutes=5),
        gang("a-2", "a", 1, at=60, minutes=5),
        gang("a-gang-16b", "a", 16, at=2000, minutes=10),
        gang("b-4", "b", 1, at=2100, minutes=5),
    ]


def _gang_run(jobs: list[GangJob], workload: HivedWorkload, engine: Any, tracker: Any) -> tuple[Any, list[tuple[str, list[str] | None]]]:
    shape = workload.shape
    scheduler = _Recorded(engine=engine, jobs=tracker, nodes=gpu_nodes(shape.node_names(), shape.gpus_per_node))
    result = GangSimulation(
        jobs=jobs, scheduler=scheduler, tenants=["a", "b"], setting="hived", seed=0, gpus_per_node=shape.gpus_per_node, queue="kube"
    ).run()
    return result, scheduler.outcomes


def _simulated_gangs() -> tuple[HivedWorkload, dict[str, Any], list[GangJob], Any, list[tuple[str, list[str] | None]]]:
    """The two tenants' gang trace on one rack of five 8-GPU nodes, simulated under the HiveD
    composition: the workload, its ``cells:`` section, the jobs, the run and its outcomes."""
    workload = two_tenants(nodes_per_rack=5, a_nodes=3, b_nodes=2)
    cells = shared_cells_config(workload)
    jobs = _gangs(workload)
    hived = HivedEngine.from_config(cells)
    composed = as_served(hived, cells=hived)
    simulated, outcomes = _gang_run(jobs, workload, composed.engine, composed.jobs)
    return workload, cells, jobs, simulated, outcomes


def test_hived_gangs_decide_the_same_live() -> None:
    """Two tenants' virtual clusters on one rack of five 8-GPU nodes under HiveD, as ``cellfit
    serve`` runs with that ``cells:`` section: each pod of each job goes through filter (the
    first pod of a gang books the gang's cells), prioritize and binding, and every job starts on
    the same nodes at the same time in the simulator and live."""
    workload, cells, jobs, simulated, simulated_outcomes = _simulated_gangs()
    assert any(nodes is not None and len(nodes) > 1 for _, nodes in simulated_outcomes)  # gangs ran
    assert any(nodes is None for _, nodes in simulated_outcomes)  # and one had to wait
    settings = Settings.model_validate({"policy": {"name": "hived"}, "cells": cells})
    runtime = build_runtime(settings, standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        extender = LiveExtender(client, runtime)
        served, served_outcomes = _gang_run(jobs, workload, extender, extender)  # the live cache's Job watch
    assert simulated_outcomes == served_outcomes
    assert np.array_equal(simulated.start, served.start) and np.array_equal(simulated.finish, served.finish)
    assert extender.calls["filter"] >= sum(job.pods for job in jobs)


def test_hived_gangs_decide_the_same_binding_through_cellfit() -> None:
    """The two tenants' gangs again, the live side connected as production runs it: the nodes
    from its Node watch (kube-scheduler's requests carry names only), every pod change through
    the watch cache, and each pod bound by cellfit's bind verb, which writes HiveD's bind info
    with the binding (the gang's first filter booked its cells). The same starts, node for node."""
    workload, cells, jobs, simulated, simulated_outcomes = _simulated_gangs()
    shape = workload.shape
    api = EventRecordingApi(nodes=[node_object(node) for node in gpu_nodes(shape.node_names(), shape.gpus_per_node)])
    settings = Settings.model_validate({
        "policy": {"name": "hived"}, "cells": cells, "estimator": {"enabled": False}, "leaderElection": {"enabled": False},
    })
    runtime = build_runtime(settings, api=api)  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        extender = BindingLiveExtender(client, runtime, api)
        served, served_outcomes = _gang_run(jobs, workload, extender, extender)
    assert simulated_outcomes == served_outcomes
    assert np.array_equal(simulated.start, served.start) and np.array_equal(simulated.finish, served.finish)
    started_pods = sum(job.pods for job in jobs)
    assert extender.calls["bind"] == len(api.bindings) == started_pods
    assert all("cellfit.io/bind-info" in written for written in api.binding_annotations.values())


@pytest.mark.parametrize("policy", ["fitgpp", "kube"])
def test_offering_only_the_best_node_places_as_the_scores_do(policy: str) -> None:
    """``policy.offerBestNodes: 1``: resource fit's filter passes on only its best-scored node
    (among those FitGpp's holds leave the pod), so kube-scheduler has nothing left to score. A
    scheduler that follows the extender's scores alone, as the simulated one does, makes every
    decision it made with every fitting node offered: the forty-job trace with its preemptions
    and resumed Jobs, bind for bind."""
    specs = FitGppWorkload().generate(jobs=40, seed=3, cluster=CLUSTER)
    jobs, _ = derive_arrivals(Experiment(cluster=CLUSTER, jobs=40), specs, seed=3)
    every = _run(jobs, policy, "resource-fit")
    settings = FitGppSettings()
    best = Simulation(
        cluster=CLUSTER, jobs=jobs, policy=make_policy(policy, PolicyOptions(settings=settings, seed=0)), settings=settings,
        seed=0, configuration=parse_settings("policy: {name: resource-fit, offerBestNodes: 1}"), record_decisions=True,
    )
    assert len(_preemptions(every[1])) >= 2
    _assert_same(every, (best.run(), best))
    idle = PodInfo(uid="probe", namespace="sim", name="probe", requests=Resources(1000, 2**30, 1))
    assert len(filter_offered(best.engine, idle, best.node_names).feasible) == 1  # of three idle nodes


# The configurations of a connected cellfit for the same engines: resource fit named (a
# connected cellfit's auto policy is HiveD), the estimator off (no sampling pods here), one replica.
CONNECTED = {
    "resource-fit": "policy: {name: resource-fit}\n",
    "hived": COMPOSITIONS["hived"],
}


@pytest.fixture
def bound_live(composition: str) -> Iterator[tuple[LiveService, EventRecordingApi]]:
    """``cellfit serve`` connected to a cluster (the API double: the simulated nodes listed, the
    bindings recorded), over HTTP, once its watch cache has synced."""
    nodes = [node_object(NodeInfo(name=name, allocatable=CLUSTER.node)) for name in CLUSTER.node_names()]
    api = EventRecordingApi(nodes=nodes)
    settings = parse_settings(CONNECTED[composition] + "estimator: {enabled: false}\nleaderElection: {enabled: false}\n")
    clock = SimulationClock()
    runtime = build_runtime(settings, api=api, clock=clock)  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        yield LiveService(client, runtime, clock), api


@EVERY_COMPOSITION
@pytest.mark.parametrize("policy", ["fitgpp", "kube"])
def test_a_synthetic_trace_decides_the_same_binding_through_cellfit(
    policy: str, composition: str, bound_live: tuple[LiveService, EventRecordingApi]
) -> None:
    """The forty-job trace again, the live side as production runs it: connected, every pod
    change through the watch cache, every decision bound by cellfit's bind verb (the engine's
    reservation and the binding with its annotations). The same decisions, step by step."""
    specs = FitGppWorkload().generate(jobs=40, seed=3, cluster=CLUSTER)
    jobs, _ = derive_arrivals(Experiment(cluster=CLUSTER, jobs=40), specs, seed=3)
    simulated = _run(jobs, policy, composition)
    assert len(_preemptions(simulated[1])) >= 2
    (client, runtime, clock), api = bound_live
    extender = BindingLiveExtender(client, runtime, api, clock)
    served = _run(jobs, policy, composition, engine=extender)
    _assert_same(simulated, served)
    binds = [decision for decision in simulated[1].decisions or () if decision[1] == "bind"]
    assert extender.calls["bind"] == len(binds) == len(api.bindings)
    assert [node for _, node in api.bindings] == [decision[3] for decision in binds]
    if composition == "hived":  # HiveD's bind info written with each GPU pod's binding, read back by the watch
        gpus = {spec.job_id: spec.demand.gpus for spec in jobs}
        for uid, written in api.binding_annotations.items():
            assert ("cellfit.io/bind-info" in written) == (gpus[uid.split("-run")[0]] > 0), uid
