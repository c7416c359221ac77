"""review26 #4: a Job whose cpu configuration only a pool of estimator.nodesMayJoin takes, and
whose gpu configuration is sampled at once on the GPUs there are. Its gpu runs finish in
seconds; its cpu sample waits Pending for a node the autoscaler may never add (its node group at
its maximum, a cloud's stock-out). Until the cpu runs succeed or fail every attempt
(pendingLimitSeconds x maxAttempts: 1800 s x 3, the short run after the long one), the Job has
no estimate, so AlloX cannot start it on the idle GPUs: before nodesMayJoin it was estimated
from gpu within a minute (cpu never-runs). Listing a pool makes every such Job wait for that
pool's scale-up, or 90 minutes. Now it is estimated from its other configurations once they are
sampled, and told the configuration it was estimated without."""

from __future__ import annotations

import json
from typing import Any

from tests.estimator.test_controller import finished
from tests.estimator.test_nodes_may_join import UNSCHEDULABLE, job, sampler
from tests.estimator.test_review_62 import CREATED_AT, Clock, DeletingApi, edited, with_status


def kind_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["annotations"]["cellfit.io/sample-configuration"])


def test_a_job_whose_other_configuration_is_sampled_is_estimated_while_its_pool_has_yet_to_join() -> None:
    clock = Clock(CREATED_AT + 10)
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-big"}], clock=clock)
    estimator._replace_jobs([job("scale", cpu_selector={"pool": "cpu-big"})])
    for _ in range(4):  # the gpu runs (long, then short if needed) finish; cpu's stays Pending
        estimator.reconcile()
        estimator._replace_pods(
            [finished(p, 30.0) if kind_of(p) == "gpu" else with_status(p, UNSCHEDULABLE) for p in api.created if p["metadata"]["name"] not in api.deleted]
        )
        clock.now += 120
    estimator.reconcile()
    states = {j["name"]: (j["state"], j["message"]) for j in estimator.inspect()["jobs"]}
    # 10 minutes on, every gpu run done: the Job could be started on a GPU now.
    assert states["scale"][0] == "estimated", states
    assert states["scale"][1].endswith(
        "; cpu not sampled: its sampling pod still waits for a node of estimator.nodesMayJoin (pool=cpu-big) to join; "
        "the Job is estimated from its other configurations, so AlloX can start it now"
    ), states
    estimated = [json.loads(added["cellfit.io/estimate"]) for _, added in api.annotations if "cellfit.io/estimate" in added]
    # (written each pass here: the Jobs fed to it are not updated with what it writes)
    assert estimated and all(sorted(estimate) == ["gpu"] for estimate in estimated), estimated


def test_a_configuration_whose_node_joins_before_the_start_is_added_to_the_estimate() -> None:
    """Estimated without cpu, the Job waits in AlloX's queue; its cpu sample goes on, and once
    the pool's node joins and cpu's runs finish the estimate gains cpu (AlloX may then choose it)."""
    clock = Clock(CREATED_AT + 10)
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-big"}], clock=clock)
    scale = job("scale", cpu_selector={"pool": "cpu-big"})
    estimator._replace_jobs([scale])
    for _ in range(4):
        estimator.reconcile()
        estimator._replace_pods(
            [finished(p, 30.0) if kind_of(p) == "gpu" else with_status(p, UNSCHEDULABLE) for p in api.created if p["metadata"]["name"] not in api.deleted]
        )
        clock.now += 120
    estimator.reconcile()
    written: dict[str, str] = {}
    for _, added in api.annotations:
        written.update(added)
    assert sorted(json.loads(written["cellfit.io/estimate"])) == ["gpu"]
    estimator._replace_jobs([edited(scale, annotations=written)])  # the watch brings back what it wrote
    cpu = [p for p in api.created if kind_of(p) == "cpu"]
    assert cpu and not set(p["metadata"]["name"] for p in cpu) & set(api.deleted)  # its sample is not deleted
    for _ in range(4):  # the node joined: cpu's runs finish
        estimator._replace_pods([finished(p, 30.0) for p in api.created if p["metadata"]["name"] not in api.deleted])
        estimator.reconcile()
        clock.now += 60
    estimated = [json.loads(added["cellfit.io/estimate"]) for _, added in api.annotations if "cellfit.io/estimate" in added]
    assert sorted(estimated[-1]) == ["cpu", "gpu"], estimated[-1]
    states = {j["name"]: (j["state"], j["message"]) for j in estimator.inspect()["jobs"]}
    assert states["scale"][0] == "estimated" and "not sampled" not in states["scale"][1], states
