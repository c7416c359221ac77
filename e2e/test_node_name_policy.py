"""Pods that take GPUs without a scheduler, against a real kube-apiserver: the chart's
nodeNamePolicy (charts/cellfit/templates/node-name-policy.yaml, on by default, installed with the
release) refuses a tenant's pod that asks for GPUs with spec.nodeName set, whether the GPUs are
requested or only limited (the request then defaults to the limit), by a container or an init container; it admits the same pod without
spec.nodeName, a pod that asks for no GPU, and a creator trusted with cellfit's scheduling state
(the cluster admin kubectl runs as holds every permission).

Every request is a server-side dry run: only admission is under test, nothing is scheduled and
no node is needed.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from chart_support import KWOK_TOLERATION, Cluster, ensure_release, wait_for

pytestmark = pytest.mark.e2e

TENANT = "e2e-node-name-tenant"
GPU = "nvidia.com/gpu"


def pod(name: str, *, node: str | None = "gpu-node-0", gpus: int = 1, limits_only: bool = False, init: bool = False) -> dict[str, Any]:
    # The API server wants a limit for an extended resource; a request alone is invalid.
    asked = {GPU: str(gpus)}
    resources = ({"limits": asked} if limits_only else {"requests": asked, "limits": asked}) if gpus else {}
    container = {"name": "c", "image": "busybox", "resources": resources}
    spec: dict[str, Any] = {"tolerations": [KWOK_TOLERATION], "containers": [{"name": "c", "image": "busybox"}] if init else [container]}
    if init:
        spec["initContainers"] = [{**container, "name": "setup"}]
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


class Namespace:
    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster, self.name = cluster, name

    def create(self, body: dict[str, Any], *, user: str | None = TENANT) -> Any:
        who = ("--as", user) if user else ()
        return self.cluster.kubectl("-n", self.name, *who, "create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False)


def refused(proc: Any) -> None:
    assert proc.returncode != 0, f"admitted:\n{proc.stdout}"
    assert "ValidatingAdmissionPolicy" in proc.stderr and "Forbidden" in proc.stderr, proc.stderr
    assert "spec.nodeName" in proc.stderr and GPU in proc.stderr, proc.stderr


def admitted(proc: Any) -> None:
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def ns(control_plane: Any) -> Iterator[Namespace]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    assert any(o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-node-name") for o in release.objects), (
        "the installed release has no nodeNamePolicy: it was installed from an older chart; "
        "`helm uninstall cellfit -n cellfit-system` and run again"
    )
    here = Namespace(cluster, control_plane.create_namespace("node-name"))
    cluster.kubectl("-n", here.name, "create", "rolebinding", "tenant-edit", "--clusterrole=edit", f"--user={TENANT}")
    # The policy acts once the API server has compiled it, the RoleBinding once RBAC has seen it.
    wait_for(lambda: "ValidatingAdmissionPolicy" in here.create(pod("probe")).stderr, 60, "the policy to refuse a tenant's pod")
    yield here


def test_a_tenants_gpu_pod_with_a_node_name_is_refused_however_it_asks(ns: Namespace) -> None:
    refused(ns.create(pod("requests")))
    refused(ns.create(pod("limits-only", limits_only=True)))
    refused(ns.create(pod("init-container", init=True)))


def test_the_same_pod_through_a_scheduler_and_a_pod_without_gpus_are_admitted(ns: Namespace) -> None:
    admitted(ns.create(pod("scheduled", node=None)))
    admitted(ns.create(pod("no-gpus", gpus=0)))


def test_a_creator_trusted_with_the_scheduling_state_is_admitted(ns: Namespace) -> None:
    admitted(ns.create(pod("by-the-admin"), user=None))
