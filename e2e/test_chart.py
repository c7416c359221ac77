"""The Helm chart against a real kube-apiserver.

1. ``helm install`` charts/cellfit with its default values: the apiserver accepts every object
   (schema, admission, RBAC escalation checks on the bindings), and each one exists afterwards.
2. The chart's two containers run here, configured exactly as the chart configures them (see
   chart_support): kube-scheduler with the chart's KubeSchedulerConfiguration and a token of
   the chart's ServiceAccount, which must be enough to serve HTTPS with delegated authn/authz,
   win the chart's Lease and bind through the extender; cellfit with a token of an account
   holding only the chart's cellfit ClusterRole.
3. A pod of the chart's profile is bound by cellfit with its bind-info annotations, and
   nothing either process did was forbidden. cellfit's metrics listener, which the chart's
   probes, Service and ServiceMonitor use, answers /metrics, /healthz and /readyz, and
   nothing else.
4. ``helm upgrade`` with a changed cellfit setting rolls the Deployment (the checksum
   annotation changes its pod template).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml

from chart_support import (
    NAMESPACE,
    Cluster,
    Release,
    Scenarios,
    chart_scheduler,
    ensure_release,
    gpu_pod,
    lease_holder,
    wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("chart-")
WHERE = SCENARIOS.selector("bind")


@pytest.fixture(scope="module")
def installed(control_plane: Any) -> tuple[Cluster, Release]:
    cluster = Cluster.from_control_plane(control_plane)
    return cluster, ensure_release(cluster)


def test_helm_install_creates_every_object(installed: tuple[Cluster, Release]) -> None:
    cluster, release = installed
    status = json.loads(cluster.helm("status", release.name, "-n", release.namespace, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    kinds = {o["kind"] for o in release.objects}
    assert kinds >= {"Deployment", "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                     "RoleBinding", "PriorityClass", "Service", "PodDisruptionBudget"}, kinds
    for obj in release.objects:
        namespace = obj["metadata"].get("namespace")
        args = ["get", obj["kind"].lower(), obj["metadata"]["name"]] + (["-n", namespace] if namespace else [])
        found = cluster.kubectl_json(*args)
        assert found["metadata"]["name"] == obj["metadata"]["name"]
    # The live cluster's version picked the kube-scheduler image.
    version = cluster.env["CELLFIT_E2E_KUBE_VERSION"]
    containers = {c["name"]: c for c in release.find("Deployment")["spec"]["template"]["spec"]["containers"]}
    assert containers["kube-scheduler"]["image"] == f"registry.k8s.io/kube-scheduler:{version}"
    assert "schedulerName: cellfit" in release.notes or "second scheduler \"cellfit\"" in release.notes, release.notes


@pytest.fixture(scope="module")
def running(installed: tuple[Cluster, Release], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, Any]]:
    cluster, release = installed
    SCENARIOS.add_nodes(cluster, "bind")  # before cellfit starts: HiveD discovers it
    try:
        with chart_scheduler(cluster, release, tmp_path_factory.mktemp(SCENARIOS.name("bind"))) as procs:
            yield cluster, release, procs
    finally:
        SCENARIOS.delete_nodes(cluster, ["bind"])


def test_chart_scheduler_binds_a_pod_with_the_charts_rbac(running: tuple[Cluster, Release, Any], control_plane: Any) -> None:
    cluster, release, procs = running
    ns = control_plane.create_namespace("chart")
    # kube-scheduler won the chart's Lease with the chart's ServiceAccount.
    holder = wait_for(lambda: lease_holder(cluster, release), 60, "the chart's Lease to be held")
    assert holder, holder
    pod = gpu_pod("train-0", scheduler_name=release.scheduler_name, node_selector=WHERE, gpus=2,
                  priority_class="cellfit-best-effort")
    cluster.apply(pod, namespace=ns)

    def bound() -> dict[str, Any] | None:
        got = cluster.kubectl_json("-n", ns, "get", "pod", "train-0")
        return got if got["spec"].get("nodeName") else None

    got = wait_for(bound, 60, f"train-0 bound (scheduler log {procs.scheduler.log}, cellfit log {procs.cellfit.log})")
    assert got["spec"]["nodeName"] == SCENARIOS.node("bind")
    annotations = got["metadata"]["annotations"]
    bind_info = json.loads(annotations["cellfit.io/bind-info"])
    assert bind_info["node"] == SCENARIOS.node("bind") and len(bind_info["gpuIndices"]) == 2
    assert annotations["cellfit.io/gpu-indices"] == ",".join(map(str, bind_info["gpuIndices"]))
    assert got["spec"]["priority"] == 500  # the chart's cellfit-best-effort PriorityClass
    assert procs.cellfit.metric('cellfit_bindings_total{result="bound"}') >= 1
    assert procs.scheduler.healthz() == "ok"
    assert not procs.logs_forbidden(), "\n".join(procs.logs_forbidden())


def test_chart_metrics_listener_serves_probes_and_metrics_only(running: tuple[Cluster, Release, Any]) -> None:
    cluster, release, procs = running
    # What the installed objects point at: Service port "metrics" -> container port "metrics"
    # -> the port the chart's cellfit config listens on for metrics.
    service = cluster.kubectl_json("-n", release.namespace, "get", "service", release.find("Service", release.name)["metadata"]["name"])
    service_port, inspect_port = service["spec"]["ports"]
    assert service_port["name"] == "metrics" and service_port["targetPort"] == "metrics", service_port
    assert inspect_port["name"] == "inspect" and inspect_port["targetPort"] == "inspect", inspect_port  # kubectl cellfit
    containers = {c["name"]: c for c in release.find("Deployment")["spec"]["template"]["spec"]["containers"]}
    cellfit = containers["cellfit"]
    ports = {p["name"]: p["containerPort"] for p in cellfit["ports"]}
    server = yaml.safe_load(release.cellfit_config_text)["server"]
    assert ports["metrics"] == server["metricsPort"] and server["metricsHost"] == "0.0.0.0", (ports, server)
    assert ports["inspect"] == server["inspectPort"] and server["inspectHost"] == "0.0.0.0", (ports, server)
    assert {cellfit[probe]["httpGet"]["port"] for probe in ("startupProbe", "livenessProbe", "readinessProbe")} == {"metrics"}

    # The process the chart configures (moved to a free port of 127.0.0.1 here) answers them.
    url = procs.cellfit.metrics_url
    assert httpx.get(f"{url}/healthz", timeout=5).json() == {"status": "ok"}
    assert httpx.get(f"{url}/readyz", timeout=5).status_code == 200  # watch cache synced
    scraped = httpx.get(f"{url}/metrics", timeout=5)
    assert scraped.status_code == 200 and "cellfit_cache_objects" in scraped.text, scraped.text[:1000]
    # ... and nothing else: no verb (bind binds any pod), no inspect, no OpenAPI document.
    for method, path in (("POST", "/v1/extender/filter"), ("POST", "/v1/extender/bind"), ("GET", "/v1/inspect/engine"),
                         ("GET", "/openapi.json")):
        assert httpx.request(method, f"{url}{path}", content=b"{}", timeout=5).status_code == 404, path
    # The inspect listener (also moved to 127.0.0.1 here) answers inspect, and no verb.
    inspect = f"http://127.0.0.1:{procs.cellfit.inspect_port}"
    assert httpx.get(f"{inspect}/v1/inspect/engine", timeout=5).json() == procs.cellfit.get("/v1/inspect/engine")
    for path in ("/v1/extender/bind", "/metrics"):
        assert httpx.request("POST" if "extender" in path else "GET", f"{inspect}{path}", content=b"{}", timeout=5).status_code in (404, 405), path
        assert httpx.request(method, f"{procs.cellfit.url}{path}", content=b"{}", timeout=5).status_code != 404, path


def test_helm_upgrade_rolls_the_pods_on_a_config_change(installed: tuple[Cluster, Release]) -> None:
    cluster, release = installed

    def template_checksums() -> dict[str, str]:
        deployment = cluster.kubectl_json("-n", NAMESPACE, "get", "deployment", release.find("Deployment")["metadata"]["name"])
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        return {k: v for k, v in annotations.items() if k.startswith("checksum/")}

    before = template_checksums()
    cluster.helm("upgrade", release.name, str(Path(__file__).resolve().parents[1] / "charts" / "cellfit"), "-n",
                 release.namespace, "--reuse-values", "--set", "preemption.gracePeriodWeight=3")
    try:
        after = template_checksums()
        assert after["checksum/cellfit-config"] != before["checksum/cellfit-config"]
        assert after["checksum/scheduler-config"] == before["checksum/scheduler-config"]
        # kube-controller-manager makes a new ReplicaSet for the changed pod template.
        selector = "app.kubernetes.io/instance=" + release.name
        wait_for(lambda: len(cluster.kubectl_json("-n", NAMESPACE, "get", "replicasets", "-l", selector)["items"]) >= 2,
                 60, "a second ReplicaSet after the upgrade")
    finally:
        cluster.helm("rollback", release.name, "-n", release.namespace)  # to the previous revision
