"""Thirty interchangeable Jobs of three users on a real control plane, against the offline tool
and the simulator (issue 13, "What must be shown").

Three users (namespaces) submit ten interchangeable Jobs each with ``kubectl apply``: suspended,
with ``cellfit.io/configurations`` and a user-set ``cellfit.io/estimate`` (nothing is sampled;
test_estimator.py covers sampling). KWOK plays the workload: a configuration's ``annotations``
carry ``cellfit.io/e2e-run-for``, so a pod runs exactly as long as its estimate says.

So that every Job has arrived when AlloX first decides (the offline instance has them all at
time 0), the Jobs are submitted before the scenario's nodes exist: admission leaves them queued
("NoMachine") until two nodes of 2 GPUs and 64 cores appear together (``allox.nodeSelector``
limits AlloX to them; both get its label in one ``kubectl label``): 4 GPUs and 6 CPU slots of 20
cores (one core kept beside each GPU, §4.4).

Checked, at α = 1 and at α = 0.3 (⌈0.3·3⌉ = 1: each decision matches only the Jobs of the user
with least progress, §3.3.3, unless a machine would stay idle, §4.4): every Job runs exactly
once, on the kind ``cellfit allox`` (``run_instance`` on the document it reads, with the Jobs'
demands and the nodes' capacity so that progress is §3.3.2's, as admission measures it) gives it
for the same instance, its pod carrying exactly that configuration's resources; on each kind,
Jobs start in the order the tool gives (pairs whose planned starts are within the live loop's
latency of each other are not ordered); and the average JCT on the cluster is within 10% of what
the simulator (the same admission core, driven by simulated time) measures for the same instance.

Fairness (α < 1): the paper measures it as the standard deviation of the users' progress over
time (§5 "Metrics", Figs. 14 and 16; progress as §3.3.2: the sum of the values of a user's
running Jobs, a Job's value its dominant share, discounted by p_fast/p_placed on its slower
kind). :func:`progress_spread` integrates that standard deviation, across the users with a Job
not yet finished, from the first start to the last finish, divided by that span, from the Jobs'
kinds and their start and completion times: once from the cluster's (``status.startTime``,
``status.completionTime``), once from the simulator's run of the same instance. What α allows
is what the same algorithm does with exact times, so the cluster's spread must stay within 10%
(and 0.002) of the simulator's; the test prints both, and the α = 1 figures beside them.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterator

import pytest

from chart_support import SCENARIO_LABEL, Cluster, CellfitProcess, Release, Scenarios, allox_extender, ensure_release, wait_for
from scheduler.core.resources import Resources
from scheduler.matching.capacity import default_demands
from scheduler.matching.fairness import Capacity, DemandShare, job_value
from scheduler.matching.model import Demand, Job
from scheduler.matching.schema import parse_instance
from scheduler.matching.tool import run_instance
from scheduler.preemption import FitGppSettings
from scheduler.simulator.allox.policies import make_interchangeable_policy
from scheduler.simulator.allox.simulation import InterchangeableSimulation
from scheduler.simulator.allox.workload import AlloxJobSpec, AlloxWorkload
from scheduler.simulator.policy_registry import AlloxOptions, PolicyOptions
from scheduler.simulator.cluster import GIB, ClusterSpec
from test_allox_admission import completed, interchangeable_job

# ~6 minutes of played work on 10 machines at alpha 1 (~3 at alpha 0.3), behind a control plane that may share 2 cores.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
SCENARIOS = Scenarios("allox-")
USERS = ("alice", "bob", "carol")
NODES = 2
GPUS_PER_NODE = 2
CPU_SLOT = Demand(cpu=20, memory=8)  # the cpu configuration of interchangeable_job()
GPU_DEMAND = Demand(gpu=1, cpu=1, memory=4)
# Two planned starts on one kind closer than this are not ordered: each start passes through
# admission's debounce, the Job controller, kube-scheduler and KWOK (a few seconds).
ORDER_SLACK_SECONDS = 6.0
NODE_CPU, NODE_MEMORY_GIB = 64, 512  # e2e/cluster/add-gpu-nodes.sh
CAPACITY = Capacity(cpu=NODES * NODE_CPU, gpu=NODES * GPUS_PER_NODE, memory=NODES * NODE_MEMORY_GIB)
SHARES = DemandShare(capacity=CAPACITY, default_demand=default_demands(cpu_slot=CPU_SLOT))


def drawn_jobs(*, seed: int, per_user: int, longest_gpu: int, scale: int = 1) -> list[tuple[str, str, int, int]]:
    """(user, job, cpu seconds, gpu seconds): GPU runs of 15 s to ``longest_gpu``, CPU runs 1.3-6x
    longer (the paper's speedups are 1.8-10; lower ones here so that AlloX puts work on the CPU
    slots too), every time then ``scale`` times as long (the same matching, see INSTANCES)."""
    draw = random.Random(seed)
    jobs = []
    for user in USERS:
        for index in range(per_user):
            gpu = draw.randint(15, longest_gpu)
            jobs.append((user, f"{user[0]}{index}", scale * round(gpu * draw.uniform(1.3, 6.0)), scale * gpu))
    return jobs


# α = 1: thirty Jobs. α = 0.3: at α < 1 a decision depends on which machines free together
# (the least-progressed user may take both of two machines freeing at once, but only one of two
# freeing a second apart), and the live loop moves each start by its latency (debounce, Job
# controller, kube-scheduler, KWOK: 1-4 s) while the tool's times are exact. The α = 0.3
# instance (18 Jobs) was chosen among 40 draws as one whose decisions are the same when every
# start is late by 0.5-6 s at random (replaying Algorithm 2 with such latencies 60 times); the
# thirty Jobs' are not (two machines free at 19 s there, two more at 68 s).
#
# The thirty Jobs' times are doubled (GPU runs of 30-90 s). On the cluster each start comes
# later than in the simulator by the live loop's latency: the Job controller marks the
# finished Job complete (~1 s after its pod ends), admission's debounce (1 s), the Job
# controller makes the next pod, kube-scheduler binds it, KWOK runs it; 2-3 s per start, more
# on a loaded machine. It adds up along each machine's queue (a GPU runs ~8 Jobs one after
# another here; measured at the original times, the last ones finished 8-10 s after the
# simulator's), so the cluster's average JCT is the simulator's plus a few seconds per
# position in the queue: +4.8% at the original times on a quiet machine, +6.5-9.2% on a
# loaded one, close to the 10% bound. The loop's latency does not grow with the Jobs' times;
# doubled, the same latency is half the share (measured on a loaded machine: starts 4.8 s
# later on average, 10 s at most, JCT +3.1%), and scaling every time leaves the matching
# (kinds, order) as it was, so the test checks the same decisions with twice the margin.
INSTANCES = {
    1.0: drawn_jobs(seed=13, per_user=10, longest_gpu=45, scale=2),
    0.3: drawn_jobs(seed=24, per_user=6, longest_gpu=60),
}


def instance_document(jobs: list[tuple[str, str, int, int]], namespaces: dict[str, str], alpha: float) -> dict[str, Any]:
    """The instance as ``cellfit allox`` reads it: the scenario's 10 machines, every Job at 0,
    their demands and the nodes' capacity (what admission's fairness divides by)."""
    machines = [{"name": f"n{node}/gpu-{i}", "kind": "gpu"} for node in range(NODES) for i in range(GPUS_PER_NODE)]
    cpu_slots = (NODE_CPU - GPUS_PER_NODE * 1) // int(CPU_SLOT.cpu)
    machines += [{"name": f"n{node}/cpu-{i}", "kind": "cpu"} for node in range(NODES) for i in range(cpu_slots)]
    demand = {"cpu": {"cpu": CPU_SLOT.cpu, "memory": CPU_SLOT.memory},
              "gpu": {"gpu": GPU_DEMAND.gpu, "cpu": GPU_DEMAND.cpu, "memory": GPU_DEMAND.memory}}
    jobs = [{"name": f"{namespaces[user]}/{name}", "user": namespaces[user], "arrival": 0,
             "processing_time": {"cpu": cpu, "gpu": gpu}, "demand": demand} for user, name, cpu, gpu in jobs]
    capacity = {"cpu": CAPACITY.cpu, "gpu": CAPACITY.gpu, "memory": CAPACITY.memory}
    return {"now": 0, "alpha": alpha, "machines": machines, "jobs": jobs, "capacity": capacity}


def progress_spread(jobs: list[tuple[str, str, int, int]], runs: dict[str, tuple[str, float, float]], namespaces: dict[str, str]) -> float:
    """The time average of the standard deviation of the users' progress (see the module's
    docstring), from each Job's (kind, start, finish) keyed ``namespace/name``."""
    values = {}
    for user, name, cpu, gpu in jobs:
        key = f"{namespaces[user]}/{name}"
        kind = runs[key][0]
        job = Job(name=key, user=namespaces[user], arrival=0, processing_time={"cpu": cpu, "gpu": gpu},
                  demand={"cpu": CPU_SLOT, "gpu": GPU_DEMAND})
        values[key] = job_value(job, kind, SHARES)
    last_finish = {ns: max(runs[f"{ns}/{name}"][2] for user, name, *_ in jobs if namespaces[user] == ns) for ns in namespaces.values()}
    instants = sorted({t for _, start, finish in runs.values() for t in (start, finish)})
    integral = 0.0
    for begin, end in zip(instants, instants[1:]):
        middle = (begin + end) / 2
        progress = {ns: 0.0 for ns, until in last_finish.items() if until > middle}
        for key, (_, start, finish) in runs.items():
            ns = key.split("/")[0]
            if start <= middle < finish and ns in progress:
                progress[ns] += values[key]
        if progress:
            mean = sum(progress.values()) / len(progress)
            integral += (sum((p - mean) ** 2 for p in progress.values()) / len(progress)) ** 0.5 * (end - begin)
    span = instants[-1] - instants[0]
    return integral / span if span > 0 else 0.0


def cell_children(view: Any) -> Iterator[set[str]]:
    """The ids of every cell's children in ``/v1/inspect/cells``' tree (a node cell's id is its
    node's name)."""
    if isinstance(view, dict):
        children = view.get("children")
        if isinstance(children, list):
            yield {child.get("id") for child in children if isinstance(child, dict)}
        for value in view.values():
            yield from cell_children(value)
    elif isinstance(view, list):
        for item in view:
            yield from cell_children(item)


def simulated_run(jobs: list[tuple[str, str, int, int]], namespaces: dict[str, str], alpha: float) -> tuple[float, dict[str, tuple[str, float, float]]]:
    """The simulator's average JCT (seconds) for the same instance, AlloX at ``alpha``, and each
    Job's (kind, start, finish) there."""
    specs = [
        AlloxJobSpec(job_id=f"{namespaces[user]}/{name}", user=namespaces[user], submit_time=0.0,
                     processing_time={"cpu": float(cpu), "gpu": float(gpu)},
                     demand={"cpu": CPU_SLOT, "gpu": GPU_DEMAND}, estimate={"cpu": float(cpu), "gpu": float(gpu)})
        for user, name, cpu, gpu in jobs
    ]
    options = AlloxOptions(alpha=alpha, omega_grid_seconds=0.0)  # as the live configuration: exact ω
    policy = make_interchangeable_policy("allox", PolicyOptions(settings=FitGppSettings(), allox=options))
    node = Resources(cpu_millis=64_000, memory_bytes=512 * GIB, gpus=GPUS_PER_NODE)
    workload = AlloxWorkload(user_estimate_share=1.0, cpu_slot_cores=CPU_SLOT.cpu, reserved_cpu_per_gpu=1.0)
    result = InterchangeableSimulation(cluster=ClusterSpec(nodes=NODES, node=node), workload=workload, jobs=specs,
                                       policy=policy).run()
    runs = {spec.job_id: ("gpu" if int(result.final_kind[index]) == 0 else "cpu", float(result.first_start[index]),
                          float(result.finish[index])) for index, spec in enumerate(specs)}
    return float(result.completion_time.mean()), runs


@dataclass
class Env:
    cluster: Cluster
    release: Release
    cellfit: CellfitProcess
    cp: Any
    alpha: float
    scenario: str  # the scenario's name (its nodes' prefix)
    where: dict[str, str]  # its nodes' label, AlloX's nodeSelector


@pytest.fixture(scope="module", params=[1.0, 0.3], ids=lambda alpha: f"alpha-{alpha}")
def env(request: pytest.FixtureRequest, control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    alpha = float(request.param)
    short = f"thirty{int(alpha * 10)}"  # nodes of each α's own: a deleted node may linger a moment
    scenario, where = SCENARIOS.name(short), SCENARIOS.selector(short)
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    # Exact ω (no grid): the Jobs run for seconds, and the offline tool's matching is exact.
    allox = {"alpha": alpha, "debounceSeconds": 1.0, "resyncSeconds": 2, "omegaGridSeconds": 0}
    try:
        with allox_extender(cluster, release, tmp_path_factory.mktemp(scenario), name=scenario, where=where, allox=allox) as cellfit:
            yield Env(cluster=cluster, release=release, cellfit=cellfit, cp=control_plane, alpha=alpha, scenario=scenario, where=where)
    finally:
        SCENARIOS.delete_nodes(cluster, [short])
        cluster.delete_nodes(f"{SCENARIO_LABEL}={scenario}-staged")  # left under that label if the test stopped early


def seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_thirty_jobs_follow_the_offline_matching_and_the_simulated_jct(env: Env) -> None:
    cluster, release, cellfit, cp, alpha, where = env.cluster, env.release, env.cellfit, env.cp, env.alpha, env.where
    drawn = INSTANCES[alpha]
    namespaces = {user: cp.create_namespace(f"thirty-{user}") for user in USERS}
    for user in USERS:
        items = []
        for owner, name, cpu, gpu in drawn:
            if owner == user:
                body = interchangeable_job(name, release.scheduler_name, cpu, gpu)
                body["metadata"]["labels"] = dict(where)
                body["spec"]["template"]["metadata"]["labels"] = dict(where)
                body["spec"]["template"]["spec"]["nodeSelector"] = dict(where)
                items.append(body)
        cluster.apply(*items, namespace=namespaces[user])

    def listed() -> dict[str, dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in where.items())
        items = cluster.kubectl_json("get", "jobs", "--all-namespaces", "-l", selector)["items"]
        return {f"{j['metadata']['namespace']}/{j['metadata']['name']}": j for j in items}

    def reasons(job: dict[str, Any]) -> set[str]:
        return {c.get("reason", "") for c in job.get("status", {}).get("conditions") or []}

    try:
        wait_for(lambda: (lambda jobs: len(jobs) == len(drawn) and all("NoMachine" in reasons(j) for j in jobs.values()))(listed()),
                 120, "every Job queued without a machine")
    except AssertionError as error:
        told = {key: sorted(reasons(job)) for key, job in listed().items()}
        raise AssertionError(f"{error}\n{told}\n{cellfit.tail(20)}") from None
    # The machines appear together, in one label change of both nodes, made Ready beforehand
    # under another label (at α < 1 a first decision over one node's machines would differ from
    # the tool's); the clock of the instance starts here.
    staged = {SCENARIO_LABEL: f"{env.scenario}-staged"}
    names = cluster.add_gpu_nodes(NODES, f"{env.scenario}-gpu", labels=staged, gpus=GPUS_PER_NODE)
    # Ready is not yet in cellfit's cells: HiveD adds a new node's cells, then regroups both
    # nodes into their rack, as its watch brings the nodes. Labelled before that, the first
    # admission pass could see one node's CPU slots and no GPU (seen once: three CPU Jobs
    # started alone, then the rest a pass later, against the tool's order). Wait for the rack.
    wait_for(lambda: any(set(names) <= ids for ids in cell_children(cellfit.get("/v1/inspect/cells"))), 60,
             f"cellfit's cells hold the rack of {names}")
    cluster.kubectl("label", "nodes", "-l", f"{SCENARIO_LABEL}={staged[SCENARIO_LABEL]}", "--overwrite",
                    *(f"{key}={value}" for key, value in where.items()))
    origin = time.time()

    def progress(jobs: dict[str, dict[str, Any]]) -> str:
        done = sum(completed(j) for j in jobs.values())
        running = sum(not j["spec"].get("suspend") and not completed(j) for j in jobs.values())
        return f"{done} completed, {running} started and running, {len(jobs) - done - running} suspended\n{cellfit.tail(15)}"

    try:
        wait_for(lambda: all(completed(j) for j in listed().values()), 900, f"all {len(drawn)} Jobs completed", interval=3.0)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{progress(listed())}") from None
    jobs = listed()

    offline = run_instance(parse_instance(json.dumps(instance_document(drawn, namespaces, alpha))))
    planned = {a.job.name: a for a in offline.schedule}
    assert len(planned) == len(drawn)
    kinds = {key: job["metadata"]["annotations"]["cellfit.io/placement"] for key, job in jobs.items()}
    for key, kind in kinds.items():
        ns, name = key.split("/")
        pods = cluster.pods(ns, f"batch.kubernetes.io/job-name={name}")
        assert len(pods) == 1, f"{key} ran {len(pods)} pods"  # exactly once
        (container,) = pods[0]["spec"]["containers"]
        if kind == "cpu":  # exactly the configuration AlloX chose
            assert container["resources"] == {"requests": {"cpu": "20", "memory": "8Gi"}}, key
        else:
            assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}, key
    started = {key: seconds(job["status"]["startTime"]) - origin for key, job in jobs.items()}
    finished = [seconds(job["status"]["completionTime"]) - origin for job in jobs.values()]
    live = sum(finished) / len(finished)
    simulated, simulated_runs = simulated_run(drawn, namespaces, alpha)
    live_runs = {key: (kinds[key], started[key], seconds(job["status"]["completionTime"]) - origin) for key, job in jobs.items()}
    live_spread, simulated_spread = progress_spread(drawn, live_runs, namespaces), progress_spread(drawn, simulated_runs, namespaces)
    other_kind = [(key, kinds[key], planned[key].kind, planned[key].start) for key in jobs if kinds[key] != planned[key].kind]
    misordered = [
        (a, b) for a in planned for b in planned
        if planned[a].kind == planned[b].kind and planned[a].start + ORDER_SLACK_SECONDS < planned[b].start
        and started[a] > started[b]
    ]
    # Where the cluster's JCT differs from the simulator's: how much later each Job started
    # (the live loop's latency, summed along its machine's queue) and ran longer than played.
    late = sorted(started[key] - simulated_runs[key][1] for key in jobs)
    longer = [(live_runs[key][2] - live_runs[key][1]) - (simulated_runs[key][2] - simulated_runs[key][1]) for key in jobs]
    print(f"alpha {alpha}: progress spread (time-averaged sd): cluster {live_spread:.4f}, simulator {simulated_spread:.4f}; "
          f"average JCT: cluster {live:.1f} s, simulator {simulated:.1f} s, offline matching "
          f"{offline.average_completion_time:.1f} s ({live / simulated - 1:+.1%} against the simulator); "
          f"starts later than the simulator's by {sum(late) / len(late):.1f} s on average (median {late[len(late) // 2]:.1f}, "
          f"most {late[-1]:.1f}), runs longer by {sum(longer) / len(longer):.1f} s; "
          f"{len(other_kind)} Jobs on another kind than the offline matching's {other_kind}; "
          f"{len(misordered)} pairs started against its order {misordered[:5]}")
    assert not other_kind, other_kind
    assert not misordered, f"started against the matching's order: {misordered[:5]}"
    assert abs(live - simulated) <= 0.10 * simulated, (live, simulated)
    assert live_spread <= 1.10 * simulated_spread + 0.002, (live_spread, simulated_spread)
