"""AlloX admission's decision time from the live state, against scipy's solve of the same
matrix, and the extender's filter latency while the admission loop runs.

    python tests/benchmarks/bench_admission.py [--rounds 7] [--sizes 100,1000,5000] [--no-full] [--scipy-max-jobs 1000]
                                               [--no-filter] [--states burst,full] [--policies "allox a=1,allox+"] [--json FILE]

Two states of 1,000 machines (100 nodes of 5 GPUs and 5 CPU slots):

* ``burst``: 100, 1,000 and 5,000 pending interchangeable Jobs, a fifth of the machines busy
  with running Jobs: the pass after a burst of arrivals (at 1,000 Jobs it starts 455);
* ``full``: 1,000 pending Jobs on a full cluster, 990 machines busy until their running Jobs'
  estimates end, 10 free: the live steady state of a queue of 1,000 (each pass starts a few).

Each round times (in the extender's process; ``solver process``: the chart's default, the
matching in a child process):

* ``decision``: ``PlacerController.admit()`` from the Job objects as the watch holds them
  (msgspec structs with their annotations) to the starts (configurations and estimates
  parsed, free capacity cut into machines, Algorithm 2's starts): the controller's own
  ``from_state_seconds``, what the issue's target is about. The Jobs are the
  ones its last pass read (the live case: the watch shows most Jobs unchanged from pass to
  pass), so what it keeps per Job (their reading, decide's ``reuse``) serves;
* ``queue``: the queue's positions, planned once the starts are carried out (the
  controller's ``queue_seconds``; in the solver process, asking the child for them);
* ``first pass``: the same as ``decision``, by a new controller, every Job seen for the first
  time (a restart, or every Job of the burst just arrived);
* ``pass``: the whole ``admit()``, the decision carried out too (each start's template
  rewritten, its Event and condition written, every queued Job told where it stands) against
  an API that records nothing;
* ``decide``: ``scheduler.matching.admission.decide`` alone, from typed values (the starts
  and the queue);
* ``scipy``: ``scipy.optimize.linear_sum_assignment`` on the full cost matrix Q of the first
  matching ``decide`` solves (the waiting Jobs over the idle machines and the running Jobs'
  busy machines, ω on admission's grid; built beforehand, not timed): what solving the same
  matrix costs without the folded solve;
* ``scipy idle``: the same on the Q of the waiting Jobs over all 1,000 machines idle (an
  easier matrix, no machine waits).

Each figure is the median (p50) and the largest (p99 with so few rounds) of wall-clock times
over ``--rounds`` rounds, with the median CPU time beside it (the admission thread's for the
decision, the process's otherwise: steadier on a shared machine, where a loaded host stretches
the wall clock 2-3x), every ratio against scipy from the same run. Timed for AlloX at alpha 1 (one
matching serves every free machine), AlloX+ (§4.4, for very large queues), and AlloX at alpha
0.1 (up to 1,000 Jobs: Algorithm 2 matches again whenever a start changes the users considered).
Targets (issue 13): decision p99 <= 20 ms at 1,000 Jobs and <= 2x the scipy solve alone.

Then the extender's filter verb (500 nodes, resource-fit, in-process on the request bytes
kube-scheduler sends) is timed with and without an admission loop of 1,000 Jobs running in a
thread beside it: ``filter p99 with / without`` shows what the loop costs the verbs (the GIL is
shared). This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402

from estimator.objects import JOB_DECODER  # noqa: E402
from placer.controller import PlacerController  # noqa: E402
from scheduler.config import AlloxSettings  # noqa: E402
from scheduler.core.resources import Resources  # noqa: E402
from scheduler.matching.admission import RunningJob, WaitingJob, busy_machines, cpu_slot_for, decide, IdleMachines  # noqa: E402
from scheduler.matching.capacity import NodeResources, machines_for  # noqa: E402
from scheduler.matching.fairness import Capacity  # noqa: E402
from scheduler.matching.model import Demand, Job  # noqa: E402
from scheduler.matching.solve import build, prepare  # noqa: E402

NODES = 100
GPUS_PER_NODE = 5
CPU_SLOT = 8  # cores of the CPU configuration
NOW = 1_800_000_000.0
# Every node offers what the free capacity below says: the running Jobs' pods are left in it (as
# the live cache does for admission), so the cluster's capacity is that, summed.
NODE_CORES = GPUS_PER_NODE * 1 + GPUS_PER_NODE * CPU_SLOT  # 5 GPU-reserved cores + 5 CPU slots
CAPACITY_RESOURCES = Resources(cpu_millis=NODES * NODE_CORES * 1000, memory_bytes=NODES * 512 * 2**30, gpus=NODES * GPUS_PER_NODE)
CAPACITY = Capacity(cpu=NODES * NODE_CORES, gpu=NODES * GPUS_PER_NODE, memory=NODES * 512)
CONFIGURATIONS = json.dumps({"cpu": {"resources": {"cpu": str(CPU_SLOT), "memory": "16Gi"}},
                             "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "8Gi"}}})


class NullApi:
    def patch_job(self, **_: Any) -> None:
        pass

    def set_job_condition(self, **_: Any) -> None:
        pass

    def create_event(self, **_: Any) -> None:
        pass


class Jobs:
    def __init__(self, jobs: list[Any]) -> None:
        self.jobs = jobs

    def interchangeable_jobs(self) -> list[Any]:
        return self.jobs

    def subscribe(self, on_change: Any) -> None:
        pass


BURST_BUSY = NODES * GPUS_PER_NODE * 2 // 5  # a fifth of the 1,000 machines
FULL_BUSY = NODES * GPUS_PER_NODE * 2 - 10  # all but 10


def instance(pending: int, seed: int = 1, *, busy: int = BURST_BUSY, users: int = 10) -> tuple[list[Any], dict[str, Resources], list[WaitingJob], list[RunningJob], list[NodeResources]]:
    rng = np.random.default_rng(seed)
    raw: list[Any] = []
    waiting: list[WaitingJob] = []
    running: list[RunningJob] = []
    for index in range(pending + busy):
        gpu = float(rng.uniform(60, 3600))
        cpu = gpu * float(rng.uniform(1.8, 10))
        user = f"user-{index % users}"  # the namespace, each Job's user
        is_running = index >= pending
        kind = "gpu" if index % 2 else "cpu"
        annotations = {"cellfit.io/configurations": CONFIGURATIONS,
                       "cellfit.io/estimate": json.dumps({"cpu": {"seconds": cpu}, "gpu": {"seconds": gpu}})}
        if is_running:
            annotations["cellfit.io/placement"] = kind
        started = NOW - float(rng.uniform(0, 600))
        body = {"metadata": {"name": f"job-{index}", "namespace": user, "uid": f"uid-{index}", "resourceVersion": str(index), "annotations": annotations,
                             "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 600 + index * 0.1))},
                "spec": {"suspend": not is_running, "template": {"spec": {"containers": [{"name": "c"}]}}},
                "status": {"startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))} if is_running else {}}
        raw.append(JOB_DECODER.decode(json.dumps(body).encode()))
        demand = {"cpu": Demand(cpu=CPU_SLOT, memory=16), "gpu": Demand(gpu=1, cpu=1, memory=8)}
        if is_running:
            running.append(RunningJob(key=f"{user}/job-{index}", user=user, kind=kind, started=started,
                                      seconds={"cpu": cpu, "gpu": gpu}, demand=demand))
        else:
            waiting.append(WaitingJob(key=f"{user}/job-{index}", user=user, arrival=NOW - 600 + index * 0.1,
                                      seconds={"cpu": cpu, "gpu": gpu}, demand=demand))
    free = {f"node-{n:03d}": Resources(cpu_millis=NODE_CORES * 1000, memory_bytes=512 * 2**30, gpus=GPUS_PER_NODE) for n in range(NODES)}
    nodes = [NodeResources(name=name, cpu=r.cpu_millis / 1000, gpu=r.gpus, memory=512) for name, r in free.items()]
    return raw, free, waiting, running, nodes


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def scipy_solve_seconds(waiting: list[WaitingJob], running: list[RunningJob], nodes: list[NodeResources], rounds: int,
                        *, idle_only: bool) -> list[float]:
    """scipy alone on Q: ``decide``'s first matching (``idle_only`` False: its idle machines and
    the running Jobs' busy ones, ω on its grid) or every machine idle."""
    cpu_slot = cpu_slot_for(waiting)
    jobs = [Job(name=w.key, user=w.user, arrival=min(w.arrival, NOW), processing_time=dict(w.seconds)) for w in waiting]
    if idle_only:
        problem = prepare(jobs=jobs, machines=machines_for(nodes, cpu_slot=cpu_slot), now=NOW)
    else:
        idle = IdleMachines(free_nodes=nodes, running=running, cpu_slot=cpu_slot, reserved_cpu_per_gpu=1.0).laid_out()
        busy, _ = busy_machines(now=NOW, running=running, kinds={"cpu", "gpu"})
        problem = prepare(jobs=jobs, machines=[*idle, *busy], now=NOW, busy_until={m.name: t for m, t in busy.items()})
    cost = np.asarray(build(problem, method="scipy").cost)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        linear_sum_assignment(cost)
        times.append(time.perf_counter() - start)
    return times


POLICIES = {  # label -> (keyword arguments of decide / AlloxSettings, largest queue it is timed at, in the solver process)
    "allox a=1": ({"alpha": 1.0}, 10**9, False),
    # The chart's default (allox.solverProcess): decide in a child process, its inputs and
    # decision sent as msgpack; the decision's wall clock includes that, its CPU only this side's.
    "allox a=1, solver process": ({"alpha": 1.0}, 1000, True),
    "allox+": ({"policy": "allox+"}, 10**9, False),
    # Algorithm 2 at small alpha re-solves whenever a start changes the users with least progress.
    "allox a=0.1": ({"alpha": 0.1}, 1000, False),
}


def ms(values: list[float], cpu: list[float] | None = None) -> dict[str, float]:
    figures = {"p50_ms": 1000 * statistics.median(values), "p99_ms": 1000 * percentile(values, 99)}
    if cpu:
        figures["cpu_p50_ms"] = 1000 * statistics.median(cpu)
    return figures


def timed(call: Any) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def admission_figures(sizes: list[int], rounds: int, *, full: bool, scipy_max_jobs: int, states_timed: set[str] | None = None,
                      policies: set[str] | None = None, users: int = 10) -> dict[str, Any]:
    results: dict[str, Any] = {}
    states = [("burst", size, BURST_BUSY) for size in sizes] + ([("full", 1000, FULL_BUSY)] if full else [])
    for state, size, busy in states:
        if states_timed is not None and state not in states_timed:
            continue
        raw, free, waiting, running, nodes = instance(size, busy=busy, users=users)
        # scipy on the full cluster's Q takes seconds a solve (fewer rounds); on 5,000 Jobs'
        # more than ten minutes (not timed above --scipy-max-jobs).
        if size > scipy_max_jobs:
            scipy_same = scipy_idle = {"p50_ms": math.nan, "p99_ms": math.nan}
        else:
            scipy_rounds = rounds if state == "burst" else min(rounds, 3)
            scipy_same = ms(scipy_solve_seconds(waiting, running, nodes, scipy_rounds, idle_only=False))
            scipy_idle = ms(scipy_solve_seconds(waiting, running, nodes, scipy_rounds, idle_only=True))
        for label, (options, largest, in_child) in POLICIES.items():
            if policies is not None and label not in policies:
                continue
            if size > largest:
                print(f"{size:>5} pending Jobs ({state}), {label}: not timed (above {largest})", flush=True)
                continue
            placer = PlacerController(api=NullApi(), jobs=Jobs(raw), free_by_node=lambda _running: free, capacity=lambda: CAPACITY_RESOURCES,
                                      settings=AlloxSettings(**options, solver_process=in_child), gpu_resource="nvidia.com/gpu", clock=lambda: NOW)
            # One pass before the rounds: each round's decision is then a pass over Jobs it read before (the
            # first pass is timed apart), and in the solver process the child started and warm.
            placer.admit()
            samples: dict[str, list[float]] = {name: [] for name in ("decision", "decision_cpu", "queue", "queue_cpu", "pass", "pass_cpu",
                                                                     "decide", "decide_cpu", "first", "first_cpu")}
            for _ in range(rounds):
                if not in_child:
                    fresh = PlacerController(api=NullApi(), jobs=Jobs(raw), free_by_node=lambda _running: free,
                                             capacity=lambda: CAPACITY_RESOURCES, settings=AlloxSettings(**options, solver_process=False),
                                             gpu_resource="nvidia.com/gpu", clock=lambda: NOW)
                    fresh.admit()
                    samples["first"].append(fresh.last.from_state_seconds)
                    samples["first_cpu"].append(fresh.last.from_state_cpu_seconds)
                placer._started.clear()
                placer._told.clear()
                wall, cpu = timed(placer.admit)
                samples["pass"].append(wall)
                samples["pass_cpu"].append(cpu)
                samples["decision"].append(placer.last.from_state_seconds)
                samples["decision_cpu"].append(placer.last.from_state_cpu_seconds)
                samples["queue"].append(placer.last.queue_seconds)
                samples["queue_cpu"].append(placer.last.queue_cpu_seconds)
                wall, cpu = timed(lambda: decide(now=NOW, waiting=waiting, running=running, free_nodes=nodes, capacity=CAPACITY, **options))
                samples["decide"].append(wall)
                samples["decide_cpu"].append(cpu)
            first = ms(samples["first"], samples["first_cpu"]) if samples["first"] else {"p50_ms": math.nan, "p99_ms": math.nan, "cpu_p50_ms": math.nan}
            row: dict[str, Any] = {"state": state, "starts": len(placer.last.starts), "decision": ms(samples["decision"], samples["decision_cpu"]),
                                   "queue": ms(samples["queue"], samples["queue_cpu"]), "first_pass": first,
                                   "pass": ms(samples["pass"], samples["pass_cpu"]), "decide": ms(samples["decide"], samples["decide_cpu"]),
                                   "scipy": scipy_same, "scipy_idle": scipy_idle}
            row["decision_over_scipy_p99"] = row["decision"]["p99_ms"] / scipy_same["p99_ms"]
            row["decision_over_scipy_idle_p99"] = row["decision"]["p99_ms"] / scipy_idle["p99_ms"]
            results[f"{state}/{size}/{label}"] = row
            print(f"{size:>5} pending Jobs of {users} users, {state} ({row['starts']} starts), {label}: decision p50 {row['decision']['p50_ms']:.1f} ms "
                  f"p99 {row['decision']['p99_ms']:.1f} ms (CPU {row['decision']['cpu_p50_ms']:.1f}; queue after the starts p50 "
                  f"{row['queue']['p50_ms']:.1f} ms, CPU {row['queue']['cpu_p50_ms']:.1f}; first pass p50 {first['p50_ms']:.1f} "
                  f"p99 {first['p99_ms']:.1f}, CPU {first['cpu_p50_ms']:.1f}) | pass p50 {row['pass']['p50_ms']:.1f} ms p99 {row['pass']['p99_ms']:.1f} ms "
                  f"(CPU {row['pass']['cpu_p50_ms']:.1f}) | decide p50 {row['decide']['p50_ms']:.1f} ms (CPU {row['decide']['cpu_p50_ms']:.1f}) | "
                  f"scipy on the same Q p50 {scipy_same['p50_ms']:.1f} ms, all idle {scipy_idle['p50_ms']:.1f} ms | decision/scipy p99 "
                  f"{row['decision_over_scipy_p99']:.3f}x (all idle: {row['decision_over_scipy_idle_p99']:.2f}x)", flush=True)
            placer.stop()
    return results


def filter_figures(requests: int) -> dict[str, float]:
    import logging

    from scheduler.config import Settings
    from scheduler.core.model import NodeInfo
    from scheduler.extender.runtime import build_runtime
    from tests.support import kube_objects as k

    logging.disable(logging.WARNING)
    runtime = build_runtime(Settings.model_validate({"policy": {"name": "resource-fit"}}), standalone=True)
    names = [f"gpu-node-{i:05d}" for i in range(500)]
    for name in names:
        runtime.engine.apply_node(NodeInfo(name=name, allocatable=Resources(64000, 512 * 2**30, 8)))
    body = k.dumps({"Pod": k.pod("p", gpus=1), "Nodes": None, "NodeNames": names})
    handler = runtime.app.routes["/v1/extender/filter"].handler

    def sample() -> list[float]:
        times = []
        for _ in range(requests):
            start = time.perf_counter()
            answer = handler(body)
            times.append(time.perf_counter() - start)
            assert answer.status == 200
        return times

    raw, free, *_ = instance(1000)
    figures: dict[str, float] = {}
    alone = sample()
    for where, in_process in (("solver process", False), ("same process", True)):
        placer = PlacerController(api=NullApi(), jobs=Jobs(raw), free_by_node=lambda _running: free, capacity=lambda: CAPACITY_RESOURCES,
                                  settings=AlloxSettings(alpha=1.0, solver_process=not in_process), gpu_resource="nvidia.com/gpu",
                                  clock=lambda: NOW)
        placer.admit()  # the child process started and warm
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                placer._started.clear()
                placer.admit()

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        beside = sample()
        stop.set()
        thread.join()
        placer.stop()
        figures[f"filter_p99_ms_with_loop_{where.replace(' ', '_')}"] = 1000 * percentile(beside, 99)
        figures[f"filter_p50_ms_with_loop_{where.replace(' ', '_')}"] = 1000 * statistics.median(beside)
    alone += sample()
    figures["filter_p99_ms_without"] = 1000 * percentile(alone, 99)
    figures["filter_p50_ms_without"] = 1000 * statistics.median(alone)
    print(f"filter, 500 names, p50 / p99: without an admission loop {figures['filter_p50_ms_without']:.3f} / "
          f"{figures['filter_p99_ms_without']:.3f} ms; with the loop (1,000 Jobs, back to back) solving in its child process "
          f"{figures['filter_p50_ms_with_loop_solver_process']:.3f} / {figures['filter_p99_ms_with_loop_solver_process']:.3f} ms; "
          f"solving in the extender's process {figures['filter_p50_ms_with_loop_same_process']:.3f} / "
          f"{figures['filter_p99_ms_with_loop_same_process']:.3f} ms", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--filter-requests", type=int, default=3000)
    parser.add_argument("--no-full", action="store_true", help="skip the full cluster (scipy's solve of its Q takes seconds)")
    parser.add_argument("--scipy-max-jobs", type=int, default=1000, help="time scipy's solve up to this many pending Jobs")
    parser.add_argument("--no-filter", action="store_true", help="skip the filter-latency part")
    parser.add_argument("--states", help="only these states, comma-separated (burst, full)")
    parser.add_argument("--policies", help=f"only these policies, comma-separated ({', '.join(POLICIES)})")
    parser.add_argument("--users", type=int, default=10,
                        help="the Jobs (waiting and running) spread over this many users (namespaces), Job i the user i mod N")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    states = set(args.states.split(",")) if args.states else None
    policies = set(args.policies.split(",")) if args.policies else None
    if policies is not None and not policies <= POLICIES.keys():
        parser.error(f"--policies: unknown {sorted(policies - POLICIES.keys())}")
    results: dict[str, Any] = {"admission": admission_figures([int(s) for s in args.sizes.split(",")], args.rounds, full=not args.no_full,
                                                          scipy_max_jobs=args.scipy_max_jobs, states_timed=states, policies=policies,
                                                          users=args.users)}
    if not args.no_filter:
        results["filter"] = filter_figures(args.filter_requests)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
