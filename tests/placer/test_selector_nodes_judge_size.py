"""A configuration whose node selector admits only some of AlloX's nodes is judged by those nodes'
sizes, as the estimator judges it (allox26, estimator.nodesMayJoin: 'a configuration larger than
every node of an unlisted pool'). AlloX's machines are cut from all of its nodes: a 32-core
configuration of pool=cpu-small (16-core nodes) looked startable while a 64-core node of another
pool was up (say one the autoscaler added for a Job of a listed pool), was started, and its pod
never bound (NotBound, suspended again, backed off, again). Now it is told it never fits, naming
the configuration and the pool's nodes, as a configuration larger than every node is."""

from __future__ import annotations

from placer.holding import JobPods
from tests.placer.test_controller import RecordingApi
from tests.placer.test_may_join_holds_no_phantom_machine import BIG, POOL, SMALL, cpu_job, placer

SMALL_POOL = {"pool": "cpu-small"}
NODES = {"small-0": SMALL, "small-1": SMALL, "big-0": BIG}
LABELS = {"small-0": SMALL_POOL, "small-1": SMALL_POOL, "big-0": POOL}
NEVER = ("AlloX's nodes (allox.nodeSelector) carrying pool=cpu-small cannot start this Job: cellfit.io/configurations.cpu.resources, "
         "32 cores and 8 GiB a pod, more than any one of them has (16 cores at most): it never fits")


def test_a_configuration_larger_than_every_node_of_its_pool_never_fits_though_another_pools_node_is_larger() -> None:
    api = RecordingApi()
    live = placer(api, [cpu_job("huge", cores="32", selector=SMALL_POOL)], nodes=NODES, labels=LABELS, pods={})
    decision = live.admit()
    assert decision.starts == ()
    assert [(c["reason"], c["message"]) for _, c in api.conditions] == [("NoMachine", NEVER)]
    assert [(reason, message) for _, reason, message in api.events] == [("NoMachine", NEVER)]
    document = live.inspect()
    assert document["lastDecision"]["unplaceable"] == ["ml/huge"]
    assert document["waiting"] == [{"job": "ml/huge", "reason": "NoMachine", "message": NEVER}]
    # Told once: the next pass writes no second Event.
    live.admit()
    assert len(api.events) == 1


def test_a_configuration_its_pools_nodes_hold_starts_as_before() -> None:
    api = RecordingApi()
    decision = placer(api, [cpu_job("fits", cores="8", selector=SMALL_POOL)], nodes=NODES, labels=LABELS, pods={}).admit()
    assert [start.key for start in decision.starts] == ["ml/fits"]


def test_a_configuration_only_a_listed_pool_runs_is_not_judged_by_its_nodes_up_now() -> None:
    """pool=cpu-big is listed in estimator.nodesMayJoin: the autoscaler sizes the node it adds
    for the pending pod, so a 128-core configuration of it is started to wait for that node."""
    api = RecordingApi()
    placer(api, [cpu_job("bigger", cores="128", selector=POOL)], nodes=NODES, labels=LABELS, pods={}).admit()
    assert [c["reason"] for _, c in api.conditions] == ["Started"]


def test_a_selector_no_node_carries_now_is_left_to_the_nodes_there_are() -> None:
    """No node of pool=cpu-tiny is up (a node being replaced, or a pool the estimator told the
    Job about): nothing to judge its size by here, as before."""
    api = RecordingApi()
    decision = placer(api, [cpu_job("tiny", cores="8", selector={"pool": "cpu-tiny"})], nodes=NODES, labels=LABELS,
                      pods={"uid-tiny": JobPods()}).admit()
    assert [start.key for start in decision.starts] == ["ml/tiny"]


def test_a_job_suspended_again_is_judged_by_the_selector_its_next_start_gives_not_its_last_placements() -> None:
    """Placed on cpu in pool=cpu-small before, then suspended again: its template still carries
    that selector (and records the placement), which a start on gpu takes out first. Its GPU
    configuration, selecting nothing, is not judged by pool=cpu-small's nodes (no GPU there)."""
    import json

    from estimator.objects import JOB_DECODER
    from scheduler.core.resources import Resources

    configurations = {"cpu": {"resources": {"cpu": "8", "memory": "8Gi"}, "nodeSelector": SMALL_POOL},
                      "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    text = json.dumps(configurations)
    body = {
        "metadata": {"name": "again", "namespace": "ml", "uid": "uid-again", "resourceVersion": "9", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"cellfit.io/configurations": text, "cellfit.io/placement": "cpu",
                                     "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 60}})}},
        "spec": {"suspend": True, "template": {
            "metadata": {"labels": {"cellfit.io/placement": "cpu"}, "annotations": {"cellfit.io/configurations": text}},
            "spec": {"nodeSelector": SMALL_POOL, "containers": [{"name": "c", "resources": {"requests": {"cpu": "8", "memory": "8Gi"}}}]}}},
    }
    nodes = {**NODES, "gpu-0": Resources(cpu_millis=32_000, memory_bytes=128 * 2**30, gpus=8)}
    api = RecordingApi()
    decision = placer(api, [JOB_DECODER.decode(json.dumps(body).encode())], nodes=nodes, labels=LABELS, pods={}).admit()
    assert [(start.key, start.kind) for start in decision.starts] == [("ml/again", "gpu")], api.conditions
