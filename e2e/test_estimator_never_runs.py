"""A configuration no node could ever run, on a real control plane (hand session, H2): a
suspended Job whose cpu configuration asks ``"cpu": "200"`` on the 64-core KWOK nodes. Before,
its cpu sample stayed Pending (``Insufficient cpu``) holding the sampling budget for up to
``pendingLimitSeconds`` x ``maxAttempts``; now it is never created, the Job gets a
``ConfigurationNeverRuns`` Event naming the field, and it is estimated on its gpu configuration
alone. Uses e2e/test_estimator.py's cellfit and nodes."""

from __future__ import annotations

from typing import Any

import pytest

from chart_support import wait_for
from test_estimator import PLAYED, ITERATIONS, configurations, env, estimate_of, interchangeable_job, job, sampling_pods

pytestmark = pytest.mark.e2e
__all__ = ["env"]  # the module's fixture: its cellfit and its nodes


def test_a_cpu_configuration_of_more_cores_than_any_node_is_not_sampled(env: Any) -> None:
    cluster, release, cellfit, cp = env
    ns = cp.create_namespace("estimate")
    configs = configurations()
    configs["cpu"]["resources"] = {"cpu": "200", "memory": "8Gi"}
    cluster.apply(interchangeable_job("huge", release.scheduler_name, configs=configs), namespace=ns)
    uid = job(cluster, ns, "huge")["metadata"]["uid"]

    estimate = wait_for(lambda: estimate_of(cluster, ns, "huge"), 120, "the Job's cellfit.io/estimate")
    assert set(estimate) == {"gpu"}, estimate
    startup, per_iteration = PLAYED["gpu"]
    assert estimate["gpu"]["seconds"] == pytest.approx(startup + per_iteration * ITERATIONS, rel=0.10)
    kinds = {p["metadata"]["annotations"]["cellfit.io/sample-configuration"] for p in sampling_pods(cluster, ns, uid)}
    assert kinds == {"gpu"}, "no cpu sample was ever created"
    (event,) = [e for e in cluster.events(ns, "huge", kind="Job") if e["reason"] == "ConfigurationNeverRuns"]
    assert event["type"] == "Warning"
    assert event["message"] == ("cpu is not sampled: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than any "
                                "node has (64 cores at most): no node could ever run it"), event
    condition = next(c for c in job(cluster, ns, "huge")["status"]["conditions"] if c["type"] == "Estimated")
    assert condition["status"] == "True"
    assert condition["message"].endswith("; cpu not sampled: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than "
                                         "any node has (64 cores at most): no node could ever run it"), condition
