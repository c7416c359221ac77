"""Helpers shared by the chart's e2e tests (test_chart.py, test_scenarios.py) and the
throughput benchmark (bench_throughput.py).

The chart is installed with ``helm install`` into the live apiserver. Its pods cannot run
under KWOK, so the two containers of its Deployment run here as local processes, configured
exactly as the chart configures them:

* kube-scheduler with the KubeSchedulerConfiguration from the chart's ConfigMap (the extender's
  urlPrefix moved to a free local port), authenticated with a token of the chart's
  ServiceAccount: its ClusterRoleBindings, the kube-system auth-reader RoleBinding and the
  Lease Role are what lets it run, elect and bind;
* ``cellfit serve`` with the cellfit ConfigMap, authenticated with a token of a ServiceAccount
  bound *only* to the chart's cellfit ClusterRole (``<release>-extender``), which proves that
  role alone suffices for everything cellfit does (watch, bind, Job annotations, events).

Test modules import this file (``e2e/`` is on sys.path under pytest, and the benchmark adds it).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tests.support: the same certificate helper the unit tests use
    sys.path.insert(0, str(ROOT))
from tests.support.ports import free_port  # noqa: E402
from tests.support.tls import ServingCertificate, make_serving_certificate  # noqa: E402

CHART = ROOT / "charts" / "cellfit"
EXAMPLES = ROOT / "deploy" / "examples"
RELEASE = "cellfit"
NAMESPACE = "cellfit-system"
EXTENDER_ONLY_SA = "cellfit-extender-only"  # bound to the chart's cellfit ClusterRole and nothing else

KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
RUN_FOR = "cellfit.io/e2e-run-for"
# How long a deleted pod's process takes to exit on SIGTERM (e2e/cluster/stages/pod-exit-on-delete.yaml).
EXIT_AFTER = "cellfit.io/e2e-exit-after"
SCENARIO_LABEL = "cellfit.io/e2e-scenario"


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    """Poll until truthy; raise AssertionError (not pytest.fail: the benchmark uses it too)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


# ------------------------------------------------------------------------------ the cluster


class Cluster:
    """kubectl and helm against the e2e cluster; built from the ``control_plane`` fixture or,
    for the benchmark, from a cluster.env file."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.kubeconfig = Path(env["KUBECONFIG"])

    @classmethod
    def from_control_plane(cls, cp: Any) -> Cluster:
        return cls({**cp.env, "KUBECONFIG": str(cp.kubeconfig)})

    def process_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.env["CELLFIT_E2E_KUBECTL"], "--kubeconfig", str(self.kubeconfig), *args],
            input=input, capture_output=True, text=True, timeout=timeout, env=self.process_env(), check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
        return proc

    def kubectl_json(self, *args: str, timeout: float = 120) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", timeout=timeout).stdout)

    def apply(self, *objects: dict[str, Any], namespace: str | None = None) -> None:
        ns = ["-n", namespace] if namespace else []
        items = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        self.kubectl("apply", *ns, "-f", "-", input=json.dumps(items))

    def helm(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.env["CELLFIT_E2E_HELM"], "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True, text=True, timeout=timeout, env=self.process_env(), check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
        return proc

    def add_gpu_nodes(self, count: int, prefix: str, *, labels: dict[str, str], gpus: int = 8, rack: str | None = None,
                      wait: bool = True, timeout: float = 300) -> list[str]:
        args = [str(ROOT / "e2e/cluster/add-gpu-nodes.sh"), str(count), "--prefix", prefix, "--gpus", str(gpus)]
        args += ["--rack", rack or prefix]
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        if not wait:
            args.append("--no-wait")
        proc = subprocess.run(args, env=self.process_env(), capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"add-gpu-nodes.sh failed:\n{proc.stderr}{proc.stdout}")
        return [f"{prefix}-{i}" for i in range(count)]

    def delete_nodes(self, selector: str, timeout: float = 60) -> None:
        """Delete the nodes ``selector`` picks, and first, at once, the pods bound to them. Left
        behind, those pods are deleted by kube-controller-manager's pod garbage collector as
        orphans 40-60 s later, in whatever module runs then; and every deletion of a bound pod
        makes every kube-scheduler retry all the pods it parked, which a later module's test of
        parked pods must not see happen without a cause of its own."""
        nodes = {n["metadata"]["name"] for n in self.kubectl_json("get", "nodes", "-l", selector)["items"]}
        bound: dict[str, list[str]] = {}
        for pod in self.kubectl_json("get", "pods", "-A")["items"] if nodes else []:
            if pod["spec"].get("nodeName") in nodes:
                bound.setdefault(pod["metadata"]["namespace"], []).append(pod["metadata"]["name"])
        for namespace, names in bound.items():
            # A Job's pods keep their finalizer until its controller has counted them: waited for.
            self.kubectl("-n", namespace, "delete", "pods", *names, "--grace-period=0", "--force", "--ignore-not-found",
                         f"--timeout={int(timeout)}s", check=False, timeout=timeout + 30)
        self.kubectl("delete", "nodes", "-l", selector, "--wait=false", "--ignore-not-found", check=False)

    def orphaned_or_terminating_pods(self) -> list[str]:
        """Pods whose deletion is coming: being deleted, or bound to a node that no longer
        exists (the pod garbage collector deletes those)."""
        nodes = {n["metadata"]["name"] for n in self.kubectl_json("get", "nodes")["items"]}
        return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in self.kubectl_json("get", "pods", "-A")["items"]
                if p["metadata"].get("deletionTimestamp") or p["spec"].get("nodeName") not in (None, *nodes)]

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["-n", namespace, "get", "pods"] + (["-l", selector] if selector else [])
        return list(self.kubectl_json(*args)["items"])

    @contextlib.contextmanager
    def watch_pods(self, namespace: str, name: str | None = None) -> Iterator[list[PodVersion]]:
        """Every version of the namespace's pods (or of the one named) as the API server sends
        them (``kubectl get --watch``), appended while the block runs. Polling misses short
        states: a preempted Job pod is Failed only until the Job controller drops its
        finalizer. The block starts once the watch has listed what exists (at least one pod)."""
        with self.watch("pods", namespace, name) as versions:
            yield versions

    @contextlib.contextmanager
    def watch(self, kind: str, namespace: str, name: str | None = None) -> Iterator[list[PodVersion]]:
        """:meth:`watch_pods` for objects of another ``kind`` (``PodVersion.pod`` is the object)."""
        proc = subprocess.Popen(
            [self.env["CELLFIT_E2E_KUBECTL"], "--kubeconfig", str(self.kubeconfig), "-n", namespace, "get", kind,
             *([name] if name else []), "--watch", "--output-watch-events", "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=self.process_env(),
        )
        versions: list[PodVersion] = []

        def read() -> None:
            assert proc.stdout is not None
            pending = ""
            for line in proc.stdout:  # one event per line, in kubectl 1.32; joined if split
                pending += line
                try:
                    event = json.loads(pending)
                except json.JSONDecodeError:
                    continue
                pending = ""
                versions.append(PodVersion(event=event["type"], pod=event["object"], received=time.time()))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            wait_for(lambda: versions, 30, f"the watch of {kind} in {namespace} to start")
            yield versions
        finally:
            proc.terminate()
            proc.wait(10)
            reader.join(10)

    def events(self, namespace: str, name: str, kind: str = "Pod") -> list[dict[str, Any]]:
        selector = f"involvedObject.name={name},involvedObject.kind={kind}"
        return list(self.kubectl_json("-n", namespace, "get", "events", "--field-selector", selector)["items"])

    def token_kubeconfig(self, service_account: str, namespace: str, path: Path, duration: str = "4h") -> Path:
        """A kubeconfig that authenticates as the ServiceAccount (``kubectl create token``)."""
        token = self.kubectl("create", "token", service_account, "-n", namespace, "--duration", duration).stdout.strip()
        admin = yaml.safe_load(self.kubeconfig.read_text())
        context_name = admin.get("current-context") or admin["contexts"][0]["name"]
        context = next(c["context"] for c in admin["contexts"] if c["name"] == context_name)
        cluster = copy.deepcopy(next(c["cluster"] for c in admin["clusters"] if c["name"] == context["cluster"]))
        ca = cluster.get("certificate-authority")
        if ca and not Path(ca).is_absolute():
            cluster["certificate-authority"] = str((self.kubeconfig.parent / ca).resolve())
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": cluster}],
            "users": [{"name": service_account, "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": service_account}}],
            "current-context": "sa",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path


@dataclass
class PodVersion:
    event: str  # ADDED, MODIFIED or DELETED
    pod: dict[str, Any]  # the object (a pod, unless Cluster.watch was given another kind)
    received: float  # time.time() when it arrived here


# ------------------------------------------------------------------------------ the release


@dataclass
class Release:
    name: str
    namespace: str
    objects: list[dict[str, Any]]  # the manifest helm applied
    installed_now: bool
    notes: str

    def find(self, kind: str, suffix: str = "") -> dict[str, Any]:
        found = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
        assert len(found) == 1, (kind, suffix, [o["metadata"]["name"] for o in found])
        return found[0]

    @property
    def service_account(self) -> str:
        return str(self.find("ServiceAccount")["metadata"]["name"])

    @property
    def scheduler_config(self) -> dict[str, Any]:
        return dict(yaml.safe_load(self.find("ConfigMap", "-scheduler-config")["data"]["scheduler-config.yaml"]))

    @property
    def cellfit_config_text(self) -> str:
        (cm,) = [o for o in self.objects if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {})]
        return str(cm["data"]["config.yaml"])

    @property
    def scheduler_name(self) -> str:
        return str(self.scheduler_config["profiles"][0]["schedulerName"])

    @property
    def extender_role(self) -> str:
        return str(self.find("ClusterRole", "-extender")["metadata"]["name"])


def ensure_release(cluster: Cluster, *extra: str) -> Release:
    """``helm install`` the chart once per cluster (release ``cellfit`` in ``cellfit-system``);
    later callers get the installed release. ``extra`` are helm flags for the first install."""
    installed_now = False
    if cluster.helm("status", RELEASE, "-n", NAMESPACE, check=False).returncode != 0:
        cluster.helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", *extra)
        installed_now = True
    manifest = cluster.helm("get", "manifest", RELEASE, "-n", NAMESPACE).stdout
    notes = cluster.helm("get", "notes", RELEASE, "-n", NAMESPACE, check=False).stdout
    release = Release(RELEASE, NAMESPACE, [o for o in yaml.safe_load_all(manifest) if o], installed_now, notes)
    _ensure_extender_only_account(cluster, release)
    return release


def _ensure_extender_only_account(cluster: Cluster, release: Release) -> None:
    cluster.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": EXTENDER_ONLY_SA, "namespace": release.namespace}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"e2e-{EXTENDER_ONLY_SA}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": release.extender_role},
            "subjects": [{"kind": "ServiceAccount", "name": EXTENDER_ONLY_SA, "namespace": release.namespace}],
        },
        # ... and to the chart's Role for cellfit's own Lease (leaderElection), cellfit's other grant.
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"e2e-{EXTENDER_ONLY_SA}", "namespace": release.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": release.extender_role},
            "subjects": [{"kind": "ServiceAccount", "name": EXTENDER_ONLY_SA, "namespace": release.namespace}],
        },
    )


# ------------------------------------------------------------------------------ processes


class LocalProcess:
    """A server of the control plane's side running here, its output appended to ``log``."""

    log: Path
    process: subprocess.Popen[bytes] | None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class CellfitProcess(LocalProcess):
    """``cellfit serve`` with the chart's config file on a free local port. A metrics listener
    the config asks for (the chart's does, on 0.0.0.0) moves to another free port of
    127.0.0.1: this machine is shared."""

    def __init__(self, config_text: str, kubeconfig: Path, workdir: Path, name: str = "cellfit",
                 inspect_host: str = "127.0.0.1") -> None:
        self.port = free_port()
        self.metrics_port: int | None = None
        document = yaml.safe_load(config_text) or {}
        server = document.get("server") or {}
        if server.get("metricsPort") is not None:
            self.metrics_port = next(p for p in iter(free_port, None) if p != self.port)
            document["server"] = {**server, "metricsHost": "127.0.0.1", "metricsPort": self.metrics_port}
        # The inspect listener the config asks for (the chart's does, on 0.0.0.0:8890) moves to a
        # free port of ``inspect_host``: loopback, unless a test has the API server's service
        # proxy reach it (e2e/test_kubectl_plugin.py).
        self.inspect_port: int | None = None
        if server.get("inspectPort") is not None:
            self.inspect_port = next(p for p in iter(free_port, None) if p not in (self.port, self.metrics_port))
            document["server"] = {**document["server"], "inspectHost": inspect_host, "inspectPort": self.inspect_port}
        # The webhook listener the config asks for (the chart's does, with the certificate of a
        # Secret mounted in the pod) moves to a free loopback port, with a certificate made here
        # for 127.0.0.1: a test registers it with the API server by URL and this CA.
        self.admission_port: int | None = None
        self.admission_certificate: ServingCertificate | None = None
        admission = document.get("admission") or {}
        if admission.get("enabled"):
            self.admission_port = next(p for p in iter(free_port, None) if p not in (self.port, self.metrics_port, self.inspect_port))
            self.admission_certificate = make_serving_certificate(workdir / f"{name}-tls")
            document["admission"] = {**admission, "host": "127.0.0.1", "port": self.admission_port,
                                     "certFile": str(self.admission_certificate.cert_file),
                                     "keyFile": str(self.admission_certificate.key_file)}
        config_text = yaml.safe_dump(document, sort_keys=False)
        self.kubeconfig = kubeconfig
        self.config = workdir / f"{name}.yaml"
        self.config.write_text(config_text)
        self.log = workdir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        assert self.metrics_port is not None, "this cellfit's config has no server.metricsPort"
        return f"http://127.0.0.1:{self.metrics_port}"

    def start(self, timeout: float = 120) -> None:
        with self.log.open("ab") as out:
            out.write(f"\n===== start {time.strftime('%H:%M:%S')}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "scheduler.cli", "serve", "--config", str(self.config),
                 "--host", "127.0.0.1", "--port", str(self.port), "--kubeconfig", str(self.kubeconfig)],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            )
        ready_urls = [f"{self.url}/readyz"] + ([f"{self.metrics_url}/readyz"] if self.metrics_port is not None else [])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(httpx.get(url, timeout=2).status_code == 200 for url in ready_urls):
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                raise AssertionError(f"cellfit exited with {self.process.returncode}; log {self.log}:\n{self.tail()}")
            time.sleep(0.2)
        # Not left running: a cellfit that is not ready may still win cellfit's controllers'
        # Lease and renew it for the rest of the session, so that no later module's cellfit leads.
        self.stop()
        raise AssertionError(f"cellfit not ready after {timeout:.0f}s; log {self.log}:\n{self.tail()}")

    def get(self, path: str, **params: str) -> Any:
        response = httpx.get(f"{self.url}{path}", params=params, timeout=10)
        response.raise_for_status()
        return response.json() if "json" in response.headers.get("content-type", "") else response.text

    def metric(self, line_prefix: str) -> float:
        total = 0.0
        for line in str(self.get("/metrics")).splitlines():
            if line.startswith(line_prefix):
                total += float(line.rsplit(" ", 1)[1])
        return total


class KubeSchedulerProcess(LocalProcess):
    """kube-scheduler with a KubeSchedulerConfiguration, serving HTTPS on a free local port
    with delegated authentication and authorization through the same kubeconfig (as in a pod)."""

    def __init__(self, binary: str, config: dict[str, Any], kubeconfig: Path, workdir: Path, name: str = "kube-scheduler",
                 verbosity: int = 2, extra_args: Sequence[str] = ()) -> None:
        self.binary = binary
        self.extra_args = tuple(extra_args)
        self.secure_port = free_port()
        self.kubeconfig = kubeconfig
        self.config_path = workdir / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump({**config, "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400}}))
        self.log = workdir / f"{name}.log"
        self.verbosity = verbosity
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [self.binary, "--config", str(self.config_path), "--bind-address", "127.0.0.1",
                 "--secure-port", str(self.secure_port), "--authentication-kubeconfig", str(self.kubeconfig),
                 "--authorization-kubeconfig", str(self.kubeconfig), f"--v={self.verbosity}", *self.extra_args],
                stdout=out, stderr=subprocess.STDOUT,
            )

    def healthz(self) -> str:
        try:
            response = httpx.get(f"https://127.0.0.1:{self.secure_port}/healthz", verify=False, timeout=3)
            return response.text if response.status_code == 200 else ""
        except httpx.HTTPError:
            return ""

    def wait_healthy(self, timeout: float = 60) -> None:
        def healthy() -> str:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"kube-scheduler exited with {self.process.returncode}; log {self.log}:\n{self.tail()}")
            return self.healthz()

        wait_for(healthy, timeout, f"kube-scheduler /healthz (log {self.log})")


@contextlib.contextmanager
def local_extender(
    cluster: Cluster,
    release: Release,
    workdir: Path,
    *,
    name: str,
    config_text: str | None = None,
    with_cellfit: Callable[[CellfitProcess], None] | None = None,
    inspect_host: str = "127.0.0.1",
) -> Iterator[CellfitProcess]:
    """``cellfit serve`` (the chart's configuration unless ``config_text``; the chart's cellfit
    RBAC through the extender-only ServiceAccount's token) and a kube-scheduler of the chart's
    profile calling it, both running here; ``with_cellfit(cellfit)`` runs once cellfit is ready,
    before kube-scheduler starts (e.g. to register its webhook). Both stop at the end."""
    cellfit = CellfitProcess(
        config_text if config_text is not None else release.cellfit_config_text,
        cluster.token_kubeconfig(EXTENDER_ONLY_SA, release.namespace, workdir / "cellfit.kubeconfig"),
        workdir,
        name=f"{name}-cellfit",
        inspect_host=inspect_host,
    )
    scheduler: KubeSchedulerProcess | None = None
    try:
        cellfit.start()
        if with_cellfit is not None:
            with_cellfit(cellfit)
        scheduler = KubeSchedulerProcess(
            cluster.env["CELLFIT_E2E_KUBE_SCHEDULER"],
            local_scheduler_config(release, cellfit_port=cellfit.port),
            cluster.token_kubeconfig(release.service_account, release.namespace, workdir / "scheduler.kubeconfig"),
            workdir,
            name=f"{name}-kube-scheduler",
        )
        scheduler.start()
        scheduler.wait_healthy()
        yield cellfit
    finally:
        if scheduler is not None:
            scheduler.stop()
        cellfit.stop()


def placed_pods_registration(release: Release, *, name: str, port: int, ca_pem: bytes, where: Mapping[str, str]) -> dict[str, Any]:
    """The chart's ``placed-pods`` webhook, pointed at a local cellfit's admission listener and
    limited to the pods labelled ``where``."""
    chart = release.find("MutatingWebhookConfiguration")
    webhook = next(w for w in chart["webhooks"] if w["name"].startswith("placed-pods."))
    webhook = {**webhook, "clientConfig": {"url": f"https://127.0.0.1:{port}/v1/admission/pods",
                                           "caBundle": base64.b64encode(ca_pem).decode()}}
    selector = webhook.get("objectSelector") or {}
    webhook["objectSelector"] = {**selector, "matchLabels": {**selector.get("matchLabels", {}), **where}}
    return {"apiVersion": chart["apiVersion"], "kind": chart["kind"], "metadata": {"name": f"e2e-{name}"}, "webhooks": [webhook]}


@contextlib.contextmanager
def placing_extender(
    cluster: Cluster, release: Release, workdir: Path, *, name: str, config_text: str, where: Mapping[str, str],
    inspect_host: str = "127.0.0.1",
) -> Iterator[CellfitProcess]:
    """:func:`local_extender` whose cellfit also places the pods of Jobs AlloX starts (the
    placer's pod-create webhook, needed where the template path is not: Kubernetes without
    KEP-5440). The release's own ``placed-pods`` entry points at a Service no pod serves here
    (KWOK runs no cellfit container) and fails closed: meanwhile it fails open, and a
    registration at this process's listener places the pods labelled ``where``."""
    chart = release.find("MutatingWebhookConfiguration")
    placed_index = next(i for i, w in enumerate(chart["webhooks"]) if w["name"].startswith("placed-pods."))
    failure_policy = f"/webhooks/{placed_index}/failurePolicy"
    registered: list[str] = []

    def register(cellfit: CellfitProcess) -> None:
        assert cellfit.admission_port is not None and cellfit.admission_certificate is not None, "the chart enables the webhook"
        webhook = placed_pods_registration(release, name=name, port=cellfit.admission_port,
                                           ca_pem=cellfit.admission_certificate.ca_pem, where=where)
        cluster.apply(webhook)
        registered.append(webhook["metadata"]["name"])

    try:
        cluster.kubectl("patch", "mutatingwebhookconfiguration", chart["metadata"]["name"], "--type=json",
                        "-p", json.dumps([{"op": "replace", "path": failure_policy, "value": "Ignore"}]))
        with local_extender(cluster, release, workdir, name=name, config_text=config_text, with_cellfit=register,
                            inspect_host=inspect_host) as cellfit:
            yield cellfit
    finally:
        for registration in registered:
            cluster.kubectl("delete", "mutatingwebhookconfiguration", registration, "--ignore-not-found", check=False)
        cluster.kubectl("patch", "mutatingwebhookconfiguration", chart["metadata"]["name"], "--type=json",
                        "-p", json.dumps([{"op": "replace", "path": failure_policy, "value": "Fail"}]), check=False)


@contextlib.contextmanager
def allox_extender(
    cluster: Cluster, release: Release, workdir: Path, *, name: str, where: Mapping[str, str], allox: Mapping[str, Any],
    sections: Mapping[str, Any] | None = None, inspect_host: str = "127.0.0.1",
) -> Iterator[CellfitProcess]:
    """:func:`placing_extender` running the release's cellfit configuration with AlloX limited to
    the nodes labelled ``where`` (``allox``: more keys of its section; ``sections``: whole
    sections replaced, e.g. ``policy`` and ``cells``)."""
    config = yaml.safe_load(release.cellfit_config_text)
    config.update(sections or {})
    config["allox"] = {**config.get("allox", {}), "nodeSelector": dict(where), **allox}
    with placing_extender(cluster, release, workdir, name=name, config_text=yaml.safe_dump(config), where=where,
                          inspect_host=inspect_host) as cellfit:
        yield cellfit


def local_scheduler_config(release: Release, *, cellfit_port: int, lease_seconds: int | None = None) -> dict[str, Any]:
    """The chart's KubeSchedulerConfiguration with the extender on ``cellfit_port``; nothing
    else changes (leader election included: the Lease Role is part of what is tested)."""
    config = release.scheduler_config
    extender = config["extenders"][0]
    prefix = extender["urlPrefix"]
    assert prefix.startswith("http://127.0.0.1:") and prefix.endswith("/v1/extender"), prefix
    extender["urlPrefix"] = f"http://127.0.0.1:{cellfit_port}/v1/extender"
    if lease_seconds is not None:
        config["leaderElection"].update(leaseDuration=f"{lease_seconds}s", renewDeadline=f"{max(lease_seconds - 5, 2)}s")
    return config


@dataclass
class ChartScheduler:
    """The chart's two containers, running here."""

    cellfit: CellfitProcess
    scheduler: KubeSchedulerProcess
    release: Release

    def logs_forbidden(self) -> list[str]:
        lines = []
        for log in (self.cellfit.log, self.scheduler.log):
            for line in log.read_text(errors="replace").splitlines():
                if "forbidden" in line.lower():
                    lines.append(f"{log.name}: {line}")
        return lines


@contextlib.contextmanager
def chart_scheduler(cluster: Cluster, release: Release, workdir: Path, *, name: str = "chart",
                    edit_scheduler_config: Callable[[dict[str, Any]], None] | None = None) -> Iterator[ChartScheduler]:
    """Run the chart's kube-scheduler and cellfit locally with the chart's configs and RBAC
    (``edit_scheduler_config`` may change the KubeSchedulerConfiguration, for experiments)."""
    workdir.mkdir(parents=True, exist_ok=True)
    scheduler_kubeconfig = cluster.token_kubeconfig(release.service_account, release.namespace, workdir / "scheduler.kubeconfig")
    cellfit_kubeconfig = cluster.token_kubeconfig(EXTENDER_ONLY_SA, release.namespace, workdir / "cellfit.kubeconfig")
    cellfit = CellfitProcess(release.cellfit_config_text, cellfit_kubeconfig, workdir, name=f"{name}-cellfit")
    scheduler: KubeSchedulerProcess | None = None
    try:  # whatever fails from here on, neither process outlives the block
        cellfit.start()
        config = local_scheduler_config(release, cellfit_port=cellfit.port)
        if edit_scheduler_config is not None:
            edit_scheduler_config(config)
        scheduler = KubeSchedulerProcess(
            cluster.env["CELLFIT_E2E_KUBE_SCHEDULER"], config, scheduler_kubeconfig, workdir, name=f"{name}-kube-scheduler",
        )
        scheduler.start()
        scheduler.wait_healthy()
        yield ChartScheduler(cellfit=cellfit, scheduler=scheduler, release=release)
    finally:
        if scheduler is not None:
            scheduler.stop()
        cellfit.stop()


class Scenarios:
    """The scenarios of one test module. Each gets fake GPU nodes of its own, labelled
    ``SCENARIO_LABEL=<prefix><scenario>-<run>`` and selected by its pods, so that modules, and
    reruns against a kept cluster, never share nodes."""

    def __init__(self, prefix: str) -> None:
        self.run = uuid.uuid4().hex[:5]
        self._prefix = prefix

    def name(self, scenario: str) -> str:
        return f"{self._prefix}{scenario}-{self.run}"

    def selector(self, scenario: str) -> dict[str, str]:
        return {SCENARIO_LABEL: self.name(scenario)}

    def node(self, scenario: str, index: int = 0) -> str:
        return f"{self.name(scenario)}-gpu-{index}"

    def add_nodes(self, cluster: Cluster, scenario: str, count: int = 1) -> None:
        cluster.add_gpu_nodes(count, f"{self.name(scenario)}-gpu", labels=self.selector(scenario))

    def delete_nodes(self, cluster: Cluster, scenarios: Iterable[str]) -> None:
        for scenario in scenarios:
            cluster.delete_nodes(f"{SCENARIO_LABEL}={self.name(scenario)}")


@contextlib.contextmanager
def scenario_scheduler(control_plane: Any, workdir: Path, scenarios: Scenarios, *, nodes: Mapping[str, int], name: str,
                       added_later: Iterable[str] = ()) -> Iterator[tuple[Cluster, Release, ChartScheduler]]:
    """The release installed and :func:`chart_scheduler` running over the scenarios' ``nodes``
    (scenario -> count), made before cellfit starts because HiveD discovers its cells from the
    Nodes then. At the end every scenario's nodes go, also those of ``added_later`` scenarios
    whose tests add nodes while cellfit runs."""
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    for scenario, count in nodes.items():
        scenarios.add_nodes(cluster, scenario, count)
    try:
        with chart_scheduler(cluster, release, workdir, name=name) as procs:
            yield cluster, release, procs
    finally:
        scenarios.delete_nodes(cluster, [*nodes, *added_later])


def lease_holder(cluster: Cluster, release: Release) -> str:
    config = release.scheduler_config["leaderElection"]
    proc = cluster.kubectl("-n", config["resourceNamespace"], "get", "lease", config["resourceName"],
                           "-o", "jsonpath={.spec.holderIdentity}", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


# ------------------------------------------------------------------------------ workloads


def example_job(example: str, *, name: str, scheduler_name: str, node_selector: dict[str, str], gpus: int,
                run_for: str | None = None, exit_after: str | None = None, grace_seconds: int | None = None,
                parallelism: int | None = None) -> dict[str, Any]:
    """A Job from deploy/examples, made runnable on KWOK nodes: tolerate the kwok taint, pin it
    to the scenario's nodes, drop volumes (no PVCs here), small CPU and memory requests.
    ``run_for``: its pods succeed that long after they start; ``exit_after``: a deleted pod's
    process takes that long to exit (Go durations; e2e/cluster/README.md, "Stages")."""
    (job,) = [d for d in yaml.safe_load_all((EXAMPLES / f"{example}.yaml").read_text()) if d and d["kind"] == "Job"]
    job["metadata"]["name"] = name
    spec = job["spec"]
    if parallelism is not None:
        spec["parallelism"] = parallelism
        spec["completions"] = parallelism
        annotations = spec["template"]["metadata"].get("annotations", {})
        if "cellfit.io/gang-size" in annotations:
            annotations["cellfit.io/gang-size"] = str(parallelism)
    template = spec["template"]
    template["metadata"].setdefault("annotations", {})
    if run_for is not None:
        template["metadata"]["annotations"][RUN_FOR] = run_for
    if exit_after is not None:
        template["metadata"]["annotations"][EXIT_AFTER] = exit_after
    pod = template["spec"]
    pod["schedulerName"] = scheduler_name
    pod["tolerations"] = [KWOK_TOLERATION]
    pod["nodeSelector"] = dict(node_selector)
    pod.pop("volumes", None)
    if grace_seconds is not None:
        pod["terminationGracePeriodSeconds"] = grace_seconds
    for container in pod["containers"]:
        container.pop("volumeMounts", None)
        container["image"] = "trainer:fake"
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}}
    return job


def gpu_pod(name: str, *, scheduler_name: str, node_selector: dict[str, str], gpus: int, priority_class: str | None = None,
            labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "nodeSelector": dict(node_selector),
        "tolerations": [KWOK_TOLERATION],
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "trainer", "image": "trainer:fake",
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}, "spec": spec}


def is_active(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def running_on(cluster: Cluster, ns: str, name: str) -> str | None:
    """The pod's node while it runs; None while it does not, or does not exist."""
    found = cluster.kubectl("-n", ns, "get", "pod", name, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    current = json.loads(found.stdout)
    if current["status"].get("phase") != "Running" or not is_active(current):
        return None
    return str(current["spec"]["nodeName"])


def gang_job(name: str, *, scheduler_name: str, node_selector: dict[str, str], gpus: int, size: int,
             priority_class: str | None = None) -> dict[str, Any]:
    """A Job of ``size`` pods of ``gpus`` GPUs each, one HiveD gang (never retried: restartPolicy
    Never, backoffLimit 0)."""
    template = gpu_pod(name, scheduler_name=scheduler_name, node_selector=node_selector, gpus=gpus, priority_class=priority_class,
                       annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": str(size)})
    template["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": size, "completions": size, "backoffLimit": 0,
                     "template": {"metadata": {"annotations": template["metadata"]["annotations"]}, "spec": template["spec"]}}}


def gpus_of(pod: dict[str, Any]) -> int:
    return sum(int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)) for c in pod["spec"]["containers"])


def gpu_bookings(pods: list[dict[str, Any]]) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
    """node -> [(pod, GPU indices from cellfit.io/gpu-indices)] of the active bound pods."""
    out: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node or not is_active(pod):
            continue
        raw = pod["metadata"].get("annotations", {}).get("cellfit.io/gpu-indices", "")
        indices = tuple(int(i) for i in raw.split(",") if i != "")
        out.setdefault(node, []).append((pod["metadata"]["name"], indices))
    return out


def assert_no_double_booking(pods: list[dict[str, Any]], gpus_per_node: int = 8) -> None:
    """Per node: the GPUs requested fit, and no GPU index is handed to two pods."""
    totals: dict[str, int] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node and is_active(pod):
            totals[node] = totals.get(node, 0) + gpus_of(pod)
    assert all(total <= gpus_per_node for total in totals.values()), totals
    for node, bookings in gpu_bookings(pods).items():
        seen: dict[int, str] = {}
        for pod_name, indices in bookings:
            for index in indices:
                assert index not in seen, f"GPU {index} of {node} given to both {seen[index]} and {pod_name}"
                assert 0 <= index < gpus_per_node, (node, pod_name, indices)
                seen[index] = pod_name
