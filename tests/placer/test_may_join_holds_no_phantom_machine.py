"""A Job AlloX started whose pods only a pool of estimator.nodesMayJoin runs holds no machine of
AlloX's while no node of that pool could take its pods: they wait for the autoscaler to add one.
Before, such a Job counted as a busy CPU machine for the NotBound limit (300 s) after its start
though its pods could hold none of the nodes there are, and a Job that fit the cores it was
counted on waited behind it. Once a node of the pool that holds its pods is up, it holds its
machine as any starting Job does (its pods are on their way to that node)."""

from __future__ import annotations

import datetime
import json
from typing import Any, Mapping

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.holding import JobPods
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi

GI = 2**30
NOW = 1767225700.0
SMALL = Resources(cpu_millis=16_000, memory_bytes=64 * GI, gpus=0)
BIG = Resources(cpu_millis=64_000, memory_bytes=256 * GI, gpus=0)
POOL = {"pool": "cpu-big"}


def cpu_job(name: str, *, cores: str, selector: Mapping[str, str] | None = None, started: float | None = None, created: int = 0) -> Any:
    configuration: dict[str, Any] = {"resources": {"cpu": cores, "memory": "8Gi"}}
    if selector:
        configuration["nodeSelector"] = dict(selector)
    annotations = {"cellfit.io/configurations": json.dumps({"cpu": configuration}),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 600}})}
    if started is not None:
        annotations["cellfit.io/placement"] = "cpu"
    body = {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "resourceVersion": "7", "annotations": annotations,
                     "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z"},
        "spec": {"suspend": started is None, "template": {"spec": {"containers": [{"name": "c"}]}}},
        "status": {"startTime": _stamp(started)} if started is not None else {},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def _stamp(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def placer(api: RecordingApi, jobs: list[Any], *, nodes: Mapping[str, Resources], labels: Mapping[str, Mapping[str, str]],
           pods: Mapping[str, JobPods], now: float = NOW) -> PlacerController:
    def carrying(selector: Mapping[str, str]) -> dict[str, Resources]:
        return {name: size for name, size in nodes.items() if all(labels.get(name, {}).get(k) == v for k, v in selector.items())}

    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: dict(nodes), capacity=lambda: sum(nodes.values(), Resources()), clock=lambda: now,
        allocatable_by_node=lambda: dict(nodes), allocatable_carrying=carrying,
        job_pods=lambda owners: {uid: found for uid, found in pods.items() if uid in owners}, unbound_hold_seconds=300,
        nodes_may_join=[POOL], joining_limit_seconds=1800,
    )


def started_names(api: RecordingApi) -> list[str]:
    return sorted(name for name, condition in api.conditions if condition["reason"] == "Started")


def test_a_job_waiting_for_its_pool_holds_no_cpu_machine_within_the_notbound_limit() -> None:
    """Started 20 s ago in a configuration only pool=cpu-big runs (32 cores, no node of the pool
    up): its pod waits for the autoscaler. Two 16-core Jobs fit the two 16-core nodes there are:
    both start (before: one, the other queued behind the joining Job's phantom machine)."""
    api = RecordingApi()
    scale = cpu_job("scale", cores="32", selector=POOL, started=NOW - 20)
    jobs = [scale, cpu_job("a", cores="16", created=1), cpu_job("b", cores="16", created=2)]
    live = placer(api, jobs, nodes={"small-0": SMALL, "small-1": SMALL}, labels={}, pods={"uid-scale": JobPods(unbound=1)})
    decision = live.admit()
    assert sorted(start.key for start in decision.starts) == ["ml/a", "ml/b"], (decision, api.conditions)
    assert decision.busy_machines.get("cpu", 0) == 0
    # Shown as waiting for its pool, not as holding a machine nor as unplaceable.
    document = live.inspect()["lastDecision"]
    assert document["waitingForNodes"] == [{"job": "ml/scale", "kind": "cpu", "pool": "pool=cpu-big"}]
    assert document["unplaceable"] == []
    # Its Started condition (it waits for a node to join) stands: nothing told it otherwise.
    assert [name for name, _ in api.conditions if name == "scale"] == []


def test_a_small_job_of_the_pool_started_while_no_node_of_it_is_up_holds_no_machine_either() -> None:
    """2 cores fit any node: AlloX started it on a CPU machine, but only a node of pool=cpu-big
    takes its pod and none is up."""
    api = RecordingApi()
    jobs = [cpu_job("small-pool", cores="2", selector=POOL, started=NOW - 20), cpu_job("a", cores="16", created=1),
            cpu_job("b", cores="16", created=2)]
    decision = placer(api, jobs, nodes={"small-0": SMALL, "small-1": SMALL}, labels={},
                      pods={"uid-small-pool": JobPods(unbound=1)}).admit()
    assert sorted(start.key for start in decision.starts) == ["ml/a", "ml/b"]


def test_once_a_node_of_the_pool_that_holds_its_pods_is_up_the_starting_job_holds_its_machine() -> None:
    """The autoscaler added a 64-core node of pool=cpu-big: the Job's pod is on its way to it,
    so it holds its machine as any starting Job does, and the queued Jobs are judged without
    that node's room (as before)."""
    api = RecordingApi()
    nodes = {"small-0": SMALL, "big-0": BIG}
    jobs = [cpu_job("scale", cores="32", selector=POOL, started=NOW - 20), cpu_job("a", cores="32", created=1)]
    live = placer(api, jobs, nodes=nodes, labels={"big-0": POOL}, pods={"uid-scale": JobPods(unbound=1)})
    decision = live.admit()
    assert decision.busy_machines.get("cpu", 0) == 1
    assert live.inspect()["lastDecision"]["waitingForNodes"] == []


def test_a_node_of_the_pool_too_small_for_its_pods_does_not_hold_them() -> None:
    """A 16-core node of pool=cpu-big joined for another pod: a 32-core pod still waits for a
    node sized for it (review26 #3), so the Job holds no machine."""
    api = RecordingApi()
    nodes = {"small-0": SMALL, "small-1": SMALL}
    jobs = [cpu_job("scale", cores="32", selector=POOL, started=NOW - 20), cpu_job("a", cores="16", created=1),
            cpu_job("b", cores="16", created=2)]
    decision = placer(api, jobs, nodes=nodes, labels={"small-1": POOL}, pods={"uid-scale": JobPods(unbound=1)}).admit()
    assert decision.busy_machines.get("cpu", 0) == 0
    assert sorted(start.key for start in decision.starts) == ["ml/a", "ml/b"]


def test_the_pass_that_starts_a_job_for_its_pool_shows_it_waiting_for_the_pool_not_unplaceable() -> None:
    api = RecordingApi()
    live = placer(api, [cpu_job("scale", cores="32", selector=POOL)], nodes={"small-0": SMALL, "small-1": SMALL}, labels={}, pods={})
    live.admit()
    assert started_names(api) == ["scale"]
    document = live.inspect()["lastDecision"]
    assert document["unplaceable"] == []
    assert document["waitingForNodes"] == [{"job": "ml/scale", "kind": "cpu", "pool": "pool=cpu-big"}]


def test_the_runtime_gives_the_placer_the_nodes_of_allox_s_pool_carrying_a_pool_s_labels() -> None:
    import msgspec

    from scheduler.config import parse_settings
    from scheduler.extender.runtime import build_runtime
    from scheduler.kube import wire
    from tests.support import kube_objects as k
    from tests.support.api_double import ListingApi
    from tests.support.hived import CONFIG, NODES

    text = CONFIG + ("estimator: {nodesMayJoin: [{pool: cpu-big}]}\nnudge: {enabled: false}\n"
                     "exchange: {enabled: false}\nleaderElection: {enabled: false}\n")
    runtime = build_runtime(parse_settings(text), api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    assert runtime.terms is not None and runtime.cache is not None
    joined = k.node("cpu-big-0", gpus=0, cpu="96")
    joined["metadata"]["labels"]["pool"] = "cpu-big"
    runtime.cache._apply_node(msgspec.convert(joined, wire.Node))
    runtime.terms.begin()
    try:
        (live,) = [driver for driver in runtime.terms.drivers if isinstance(driver, PlacerController)]
        assert live._allocatable_carrying is not None
        assert {name: size.cpu_millis for name, size in live._allocatable_carrying(POOL).items()} == {"cpu-big-0": 96_000}
        assert live._allocatable_carrying({"pool": "gpu-big"}) == {}
    finally:
        runtime.terms.end()
