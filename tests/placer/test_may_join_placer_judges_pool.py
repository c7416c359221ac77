"""review26 #1 and #2: estimator.nodesMayJoin samples a CPU configuration only an autoscaled pool's
absent node takes (pool=cpu-big, 32 cores a pod). The sample ran on the node the autoscaler
added; the autoscaler then removed it (idle). AlloX's placer judges the configuration by the
nodes there are now (two 16-core nodes of another pool), tells the Job NoMachine "more than any
one of them has: it never fits", and never starts it: no pod of it is ever Pending, so the
autoscaler never adds the node again. The Job the admin listed the pool for never runs."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi

GI = 2**30
SMALL = Resources(cpu_millis=16_000, memory_bytes=64 * GI, gpus=0)


def big_cpu_job() -> Any:
    annotations = {
        "cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "32", "memory": "8Gi"}, "nodeSelector": {"pool": "cpu-big"}}}),
        # written by the estimator from the sample that ran on the joined (since removed) node
        "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 300}}),
    }
    body = {
        "metadata": {"name": "scale", "namespace": "ml", "uid": "uid-scale", "annotations": annotations, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def on_small_nodes(api: RecordingApi, *, may_join: list[dict[str, str]]) -> PlacerController:
    """AlloX's nodes now: two 16-core nodes of another pool, the joined node gone."""
    by_node = {"small-0": SMALL, "small-1": SMALL}
    return PlacerController(
        api=api, jobs=Jobs([big_cpu_job()]), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: by_node, capacity=lambda: sum(by_node.values(), Resources()), clock=lambda: 1767225700.0,
        allocatable_by_node=lambda: by_node, nodes_may_join=may_join,
    )


def test_a_configuration_sampled_on_a_joined_node_is_not_told_it_never_fits_once_that_node_left() -> None:
    api = RecordingApi()
    decision = on_small_nodes(api, may_join=[{"pool": "cpu-big"}]).admit()
    told = [condition for _, condition in api.conditions]
    never = [c for c in told if c["reason"] == "NoMachine" and "never fits" in c["message"]]
    # "never fits" is false, the pool is listed in estimator.nodesMayJoin: it is started, its
    # pod's Pending brings the node back.
    assert never == [], (decision, told)
    assert [(c["reason"], c["message"]) for c in told] == [(
        "Started",
        "running on cpu: no node of AlloX's holds it now, and only a node of pool=cpu-big runs it: it waits for one to join "
        "(estimator.nodesMayJoin), up to 1800 s (estimator.pendingLimitSeconds)",
    )]


def test_a_configuration_no_listed_pool_runs_still_never_fits() -> None:
    api = RecordingApi()
    on_small_nodes(api, may_join=[{"pool": "gpu-big"}]).admit()
    assert [c["reason"] for _, c in api.conditions] == ["NoMachine"]
    assert "never fits" in api.conditions[0][1]["message"]


def test_a_job_whose_pool_is_still_joining_is_not_suspended_again_before_the_wait_its_sample_was_given() -> None:
    """The same pool, its node present when AlloX booked (or a small enough CPU run booked on the
    other pool's cores): the Job's pods select pool=cpu-big, whose node the autoscaler adds again
    after it removed the sample's. The estimator gave the sample estimator.pendingLimitSeconds
    (1800 s) for that; the placer gives the Job the NotBound limit (300 s), then suspends it again
    (its pods deleted, the autoscaler's trigger gone) and backs it off, though nothing but the
    node's joining keeps it Pending: "the room it was started on went to other pods, or no node
    takes them now" misleads, and the node that joins meanwhile sits idle."""
    import datetime

    from placer.holding import JobPods
    from tests.placer.test_holding import NOW
    from tests.placer.test_placer24_suspend_again import SuspendingApi

    started = datetime.datetime.fromtimestamp(NOW - 400, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    configurations = {"cpu": {"resources": {"cpu": "2", "memory": "8Gi"}, "nodeSelector": {"pool": "cpu-big"}},
                      "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    body = {
        "metadata": {"name": "scale", "namespace": "ml", "uid": "uid-scale", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/placement": "cpu",
                                     "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 300}, "gpu": {"seconds": 900}})}},
        "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "c"}]}}},
        "status": {"startTime": started},
    }
    api = SuspendingApi()
    pods = {"uid-scale": JobPods(unbound=1)}

    def placer(now: float) -> PlacerController:
        return PlacerController(
            api=api, jobs=Jobs([JOB_DECODER.decode(json.dumps(body).encode())]), settings=AlloxSettings(alpha=1.0, solver_process=False),
            gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"n1": Resources(cpu_millis=5000, memory_bytes=64 * GI, gpus=1)},
            capacity=lambda: Resources(cpu_millis=5000, memory_bytes=64 * GI, gpus=1), clock=lambda: now,
            job_pods=lambda owners: {uid: found for uid, found in pods.items() if uid in owners}, unbound_hold_seconds=300,
            nodes_may_join=[{"pool": "cpu-big"}], joining_limit_seconds=1800,
        )

    placer(NOW).admit()
    assert api.suspends == [], [c for _, c in api.conditions]
    assert [(c["reason"], c["message"]) for _, c in api.conditions] == [(
        "NotBound",
        "started on cpu, its pods wait for a node of pool=cpu-big to join (estimator.nodesMayJoin): AlloX keeps no cpu machine "
        "for it meanwhile, and suspends it again if none is bound within 1800 s of its start (estimator.pendingLimitSeconds)",
    )]
    # Past the wait its sample got, it is suspended again, told the pool never joined.
    api.conditions.clear()
    placer(NOW + 1500).admit()
    assert len(api.suspends) == 1
    assert "within 1800 s (estimator.pendingLimitSeconds) (no node of pool=cpu-big joined" in api.conditions[-1][1]["message"]


def test_the_runtime_gives_the_placer_the_pools_and_the_wait_its_samples_got() -> None:
    from scheduler.config import parse_settings
    from scheduler.extender.runtime import build_runtime
    from tests.support.api_double import ListingApi
    from tests.support.hived import CONFIG, NODES

    text = CONFIG + ("estimator: {nodesMayJoin: [{pool: cpu-big}], pendingLimitSeconds: 900}\nnudge: {enabled: false}\n"
                     "exchange: {enabled: false}\nleaderElection: {enabled: false}\n")
    runtime = build_runtime(parse_settings(text), api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    assert runtime.terms is not None
    runtime.terms.begin()
    try:
        (placer,) = [driver for driver in runtime.terms.drivers if isinstance(driver, PlacerController)]
        assert (placer._nodes_may_join, placer._joining_limit_seconds) == (({"pool": "cpu-big"},), 900.0)
    finally:
        runtime.terms.end()
