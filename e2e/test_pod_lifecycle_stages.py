"""KWOK plays the kubelet's part of a graceful deletion (e2e/cluster/stages/): a deleted
Running pod keeps its grace period, its process exits on SIGTERM after
``cellfit.io/e2e-exit-after`` (default 1 s) with exit code 143, or is killed with 137 when its
grace period ends first; then the pod goes, once its finalizers are gone. The preemption
scenario (test_scenarios.py) relies on this for its victim."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

import pytest

from chart_support import EXIT_AFTER, KWOK_TOLERATION, Cluster, PodVersion, wait_for

pytestmark = pytest.mark.e2e
HOLD = "cellfit.io/e2e-hold"  # a finalizer the test removes itself, as the Job controller would


def pod(name: str, *, grace_seconds: int, exit_after: str | None, hold: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {EXIT_AFTER: exit_after} if exit_after else {},
                     "finalizers": [HOLD] if hold else []},
        "spec": {
            "tolerations": [KWOK_TOLERATION],
            "nodeSelector": {"cellfit.io/e2e-node": "true"},
            "terminationGracePeriodSeconds": grace_seconds,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "fake", "resources": {"requests": {"cpu": "10m"}}},
                           {"name": "sidecar", "image": "fake", "resources": {"requests": {"cpu": "10m"}}}],
        },
    }


def timestamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def history(versions: list[PodVersion], name: str) -> list[PodVersion]:
    return [v for v in versions if v.pod["metadata"]["name"] == name]


def first_failed(versions: list[PodVersion], name: str) -> dict[str, Any] | None:
    return next((v.pod for v in history(versions, name) if v.pod["status"].get("phase") == "Failed"), None)


def test_deleted_pods_exit_within_their_grace_period(control_plane: Any) -> None:
    cluster = Cluster.from_control_plane(control_plane)
    ns = control_plane.create_namespace("stages")
    run = uuid.uuid4().hex[:4]
    # name -> (grace period s, exit-after, expected exit code, expected seconds from deletion to exit)
    cases = {
        f"quick-{run}": (30, None, 143, 1),  # the default: exits 1 s after SIGTERM
        f"checkpoints-{run}": (10, "4s", 143, 4),  # needs part of its grace period
        f"stuck-{run}": (3, "1m", 137, 3),  # would need longer: killed when the period ends
    }
    cluster.apply(*(pod(name, grace_seconds=grace, exit_after=after, hold=True) for name, (grace, after, _, _) in cases.items()),
                  namespace=ns)
    wait_for(lambda: all(p["status"].get("phase") == "Running" for p in cluster.pods(ns)) and len(cluster.pods(ns)) == 3,
             60, "the pods Running")
    with cluster.watch_pods(ns) as versions:
        cluster.kubectl("-n", ns, "delete", "pod", *cases, "--wait=false")
        wait_for(lambda: all(first_failed(versions, name) for name in cases), 60, "every deleted pod Failed")
        for name, (grace, _, code, seconds) in cases.items():
            deleting = next(v.pod for v in history(versions, name) if v.pod["metadata"].get("deletionTimestamp"))
            # The grace period is kept while the process runs (kwok's own pod-delete stage cut it to 0).
            assert deleting["metadata"]["deletionGracePeriodSeconds"] == grace, deleting["metadata"]
            assert deleting["status"]["phase"] == "Running"
            deleted_at = timestamp(deleting["metadata"]["deletionTimestamp"]) - grace  # whole seconds
            failed = first_failed(versions, name)
            assert failed is not None
            terminated = [c["state"]["terminated"] for c in failed["status"]["containerStatuses"]]
            assert len(terminated) == 2 and {(t["exitCode"], t["reason"]) for t in terminated} == {(code, "Error")}, terminated
            exited_after = timestamp(terminated[0]["finishedAt"]) - deleted_at
            # Up to 1 s early (the deletion time is known to the second); late by how busy kwok is.
            assert seconds - 1.5 <= exited_after <= seconds + 3, (name, exited_after)
            assert {c["type"]: c["status"] for c in failed["status"]["conditions"]}["Ready"] == "False"
        # Held by the finalizer until its owner lets go; then deleted at once (grace period 0).
        time.sleep(1)
        assert {p["metadata"]["name"] for p in cluster.pods(ns)} == set(cases)
        for name in cases:
            cluster.kubectl("-n", ns, "patch", "pod", name, "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
        wait_for(lambda: {v.pod["metadata"]["name"] for v in versions if v.event == "DELETED"} == set(cases), 30,
                 "every pod gone once its finalizer is")


def test_a_deleted_pod_that_finished_goes_at_once(control_plane: Any) -> None:
    """A Succeeded (or Failed, or never started) pod has no process to wait for: deleted with
    grace period 0, as the kubelet does."""
    cluster = Cluster.from_control_plane(control_plane)
    ns = control_plane.create_namespace("stages")
    done = pod("done", grace_seconds=30, exit_after=None, hold=False)
    done["metadata"]["annotations"]["cellfit.io/e2e-run-for"] = "1s"
    cluster.apply(done, namespace=ns)
    wait_for(lambda: cluster.pods(ns)[0]["status"].get("phase") == "Succeeded", 60, "done Succeeded")
    started = time.monotonic()
    cluster.kubectl("-n", ns, "delete", "pod", "done", "--wait=true", timeout=60)
    assert time.monotonic() - started < 10  # not its 30 s grace period
