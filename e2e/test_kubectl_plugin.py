"""``kubectl cellfit`` on the local control plane: the plugin run by kubectl, reaching cellfit's
inspect listener through the real API server's service proxy, as the users the test makes.

cellfit and the chart's kube-scheduler run here (chart_support.local_extender) with the chart's
configuration and RBAC, and a topology of this module's three 8-GPU nodes with three virtual
clusters of one node each. The chart's Service has no cellfit pod behind it here (KWOK runs no
container), so the module makes a Service of the chart's name, ``cellfit``, in a namespace of its
own, whose Endpoints name this machine's address and the inspect listener's port, through a pod
the test plays (see inspect_service): the API server proxies to it exactly as to cellfit's pod. The plugin's users are ServiceAccounts: one bound to the
chart's ClusterRole ``cellfit-viewer`` (and ``view`` in the workload namespace), one bound to
``view`` alone.

(a) quota: a VC's one node cell is held by one pod; the next pod's why names the VC, the level
    and the pod holding it; a user without the viewer role is refused, naming the grant.
(b) vcs: the table and ``-o json`` are /v1/inspect/virtual-clusters.
(c) gang: a two-pod gang whose second pod is gated: the Job waits for its member, one slot booked.
(d) preemption and resume hold: a trial Job preempts a best-effort Job (FitGpp); the preempted
    Job's why names the preemptor, the node and the score; its new pod is gated, so a waiting
    best-effort pod is kept off that node by the resume hold, and its why says so.
(e) AlloX (a second cellfit, once the first has stopped: both schedule the chart's profile): five
    interchangeable Jobs with user-set estimates for one GPU and three CPU slots; the one AlloX
    queues is "queued by AlloX: 1st on <kind>", those it starts on CPU slots say so with the
    Placed condition's reason, and ``queue`` lists the queued one.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from chart_support import (
    Cluster,
    allox_extender,
    Release,
    Scenarios,
    ensure_release,
    example_job,
    gpu_pod,
    is_active,
    local_extender,
    wait_for,
)
from test_allox_admission import interchangeable_job

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("explain-")
SCENARIO = SCENARIOS.name("plugin")
WHERE = SCENARIOS.selector("plugin")
NODES = [SCENARIOS.node("plugin", index) for index in range(3)]
VCS = ("quota", "gang", "fit")
GATE = "e2e.cellfit.io/hold-until-lifted"
ROOT = Path(__file__).resolve().parents[1]


def host_address() -> str:
    """This machine's address the API server can proxy to: the service proxy refuses loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.254.254.254", 9))  # no packet is sent: only the route is looked up
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.fail("no non-loopback IPv4 address here: the API server's service proxy refuses loopback endpoints")
    return address


def cells_config() -> dict[str, Any]:
    return {
        "topology": {
            "cellTypes": {"E2E-NODE": {"childType": "E2E-GPU", "childCount": 8, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "E2E-NODE", "nodeName": node} for node in NODES],
        },
        "virtualClusters": {vc: [{"cellType": "E2E-NODE", "count": 1}] for vc in VCS},
    }


class Plugin:
    """``kubectl cellfit ...`` as a user: kubectl finds ``kubectl-cellfit`` on PATH."""

    def __init__(self, cluster: Cluster, bin_dir: Path, *, service_namespace: str) -> None:
        self.cluster = cluster
        self.bin_dir = bin_dir
        self.service_namespace = service_namespace

    def run(self, kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        # PYTHONPATH: the plugin runs this checkout's code even when the package's editable
        # install points at another checkout of it.
        env = {**self.cluster.process_env(), "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(ROOT)}
        done = subprocess.run([self.cluster.env["CELLFIT_E2E_KUBECTL"], "cellfit", *args,
                               "--cellfit-namespace", self.service_namespace],
                              capture_output=True, text=True, env=env, timeout=60, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl cellfit {' '.join(args)} failed ({done.returncode}): {done.stderr}{done.stdout}")
        return done

    def why(self, kubeconfig: Path, target: str, namespace: str) -> dict[str, Any]:
        return dict(json.loads(self.run(kubeconfig, "why", target, "-n", namespace, "-o", "json").stdout))


def plugin_bin(directory: Path) -> Path:
    """The installed console script when the package's install made one; else a wrapper running
    the same entry point (an editable install made before the script was added has none)."""
    directory.mkdir(parents=True, exist_ok=True)
    installed = shutil.which("kubectl-cellfit")
    target = directory / "kubectl-cellfit"
    if installed is not None:
        target.symlink_to(installed)
    else:
        target.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; from scheduler.kubectl.cli import main; "
                          f"sys.exit(main())' \"$@\"\n")
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def inspect_service(cluster: Cluster, namespace: str, *, address: str, port: int) -> None:
    """A Service of the chart's name with the chart's ``inspect`` port, backed by cellfit here.

    The API server's service proxy goes only to endpoints that are pods (its ``isValidAddress``:
    the endpoint's targetRef must be a pod of the namespace holding that IP). KWOK runs no
    container, so the test plays the chart's cellfit pod: a pod no scheduler takes, whose status
    the test sets to this machine's address, named by the Endpoints (which the EndpointSlice
    mirroring controller copies into the slice the proxy reads)."""
    pod = "cellfit-inspect"
    cluster.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": namespace},
                   "spec": {"schedulerName": "e2e-nobody", "containers": [{"name": "cellfit", "image": "cellfit:e2e"}]}})
    cluster.kubectl("-n", namespace, "patch", "pod", pod, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"podIP": address, "podIPs": [{"ip": address}]}}))
    cluster.apply(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "cellfit", "namespace": namespace},
         "spec": {"ports": [{"name": "inspect", "port": port, "targetPort": port, "protocol": "TCP"}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "cellfit", "namespace": namespace},
         "subsets": [{"addresses": [{"ip": address, "targetRef": {"kind": "Pod", "name": pod, "namespace": namespace}}],
                      "ports": [{"name": "inspect", "port": port, "protocol": "TCP"}]}]},
    )


def service_account(cluster: Cluster, namespace: str, name: str, *, roles: list[tuple[str, str]], workdir: Path) -> Path:
    """A ServiceAccount bound to each (namespace, ClusterRole) of ``roles``; its kubeconfig."""
    cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}})
    for where, role in roles:
        cluster.apply({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"{name}-{role}", "namespace": where},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        })
    return cluster.token_kubeconfig(name, namespace, workdir / f"{name}.kubeconfig")


def viewer_role(release: Release) -> str:
    """The chart's viewer ClusterRole; a release installed before the chart had one (a cluster
    kept with CELLFIT_E2E_KEEP) must be upgraded first."""
    found = [o for o in release.objects if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-viewer")]
    if not found:
        pytest.fail(f"release {release.name} in {release.namespace} has no viewer ClusterRole: it predates the chart's "
                    "inspect listener; helm upgrade it, or start a fresh cluster", pytrace=False)
    return str(found[0]["metadata"]["name"])


@pytest.fixture(scope="class")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    viewer = viewer_role(release)
    workdir = tmp_path_factory.mktemp(SCENARIO)
    SCENARIOS.add_nodes(cluster, "plugin", count=len(NODES))  # before cellfit: the topology names them
    config = yaml.safe_load(release.cellfit_config_text)
    assert config["server"].get("inspectPort"), "the chart serves the inspect listener"
    config["policy"] = {**config.get("policy", {}), "name": "hived"}
    config["cells"] = {**config.get("cells", {}), **cells_config()}
    config["estimator"] = {**config.get("estimator", {}), "enabled": False}  # no interchangeable Jobs here
    address = host_address()
    ns = control_plane.create_namespace("explain")
    services = control_plane.create_namespace("explain-svc")
    try:
        with local_extender(cluster, release, workdir, name=SCENARIO, config_text=yaml.safe_dump(config),
                            inspect_host=address) as cellfit:
            assert cellfit.inspect_port is not None
            inspect_service(cluster, services, address=address, port=cellfit.inspect_port)
            # The EndpointSlice mirroring controller copies the Endpoints for the proxy within seconds.
            proxy = f"/api/v1/namespaces/{services}/services/http:cellfit:inspect/proxy/healthz"
            wait_for(lambda: cluster.kubectl("get", "--raw", proxy, check=False).returncode == 0, 60,
                     f"the service proxy reaching cellfit's inspect listener at {address}:{cellfit.inspect_port}")
            users = {
                "viewer": service_account(cluster, ns, "viewer", roles=[(services, viewer), (ns, "view")], workdir=workdir),
                "outsider": service_account(cluster, ns, "outsider", roles=[(ns, "view")], workdir=workdir),
            }
            yield {"cluster": cluster, "release": release, "cellfit": cellfit, "ns": ns, "services": services,
                   "plugin": Plugin(cluster, plugin_bin(workdir / "bin"), service_namespace=services), "users": users,
                   "scheduler": release.scheduler_name, "viewer_role": viewer}
    finally:
        SCENARIOS.delete_nodes(cluster, ["plugin"])


def vc_labels(vc: str, job_class: str = "best-effort") -> dict[str, str]:
    return {**WHERE, "cellfit.io/virtual-cluster": vc, "cellfit.io/job-class": job_class}


def pending_with(cluster: Cluster, ns: str, pod: str, needle: str) -> bool:
    return any(e["reason"] == "FailedScheduling" and needle in e.get("message", "") for e in cluster.events(ns, pod))


def bound_node(cluster: Cluster, ns: str, pod: str) -> str | None:
    found = cluster.kubectl("-n", ns, "get", "pod", pod, "-o", "json", check=False)
    return json.loads(found.stdout)["spec"].get("nodeName") if found.returncode == 0 else None


def job_pods(cluster: Cluster, ns: str, job: str) -> list[dict[str, Any]]:
    return [p for p in cluster.pods(ns, f"batch.kubernetes.io/job-name={job}") if is_active(p)]


def lift_gate(cluster: Cluster, ns: str, pod: dict[str, Any]) -> None:
    cluster.kubectl("-n", ns, "patch", "pod", pod["metadata"]["name"], "--type=json",
                    "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')


class TestHivedDecisions:
    """Quota, RBAC, vcs, gang, preemption and resume hold, under one HiveD cellfit."""

    # -------------------------------------------------------------------------- (a) quota, RBAC

    def test_quota_blocked_pod_and_a_user_without_the_viewer_role(self, env: dict[str, Any]) -> None:
        cluster, ns, plugin, users = env["cluster"], env["ns"], env["plugin"], env["users"]
        holder = gpu_pod("quota-holder", scheduler_name=env["scheduler"], node_selector=WHERE, gpus=8,
                         priority_class="cellfit-best-effort", labels=vc_labels("quota"))
        cluster.apply(holder, namespace=ns)
        node = wait_for(lambda: bound_node(cluster, ns, "quota-holder"), 60, f"quota-holder bound (cellfit log {env['cellfit'].log})")
        cluster.apply(gpu_pod("quota-waiter", scheduler_name=env["scheduler"], node_selector=WHERE, gpus=8,
                              priority_class="cellfit-best-effort", labels=vc_labels("quota")), namespace=ns)
        wait_for(lambda: pending_with(cluster, ns, "quota-waiter", "quota exhausted"), 60, "quota-waiter's FailedScheduling")

        answer = plugin.why(users["viewer"], "pod/quota-waiter", ns)
        assert answer["reason"] == "quota", answer
        assert answer["summary"] == (f"pending: virtual cluster 'quota' has used its quota at level 'E2E-NODE' "
                                     f"(1 of 1 'E2E-NODE' cells bound, held by {ns}/quota-holder)"), answer
        assert f"{node}: {ns}/quota-holder" in answer["details"], answer
        table = plugin.run(users["viewer"], "why", "pod/quota-waiter", "-n", ns).stdout.splitlines()
        assert table[0] == f"pod/quota-waiter: {answer['summary']}"
        print("\n".join(["$ kubectl cellfit why pod/quota-waiter", *table]))  # what a user sees (pytest -s)

        refused = plugin.run(users["outsider"], "vcs", check=False)
        assert refused.returncode == 5, refused
        assert refused.stdout == ""
        assert refused.stderr.startswith("error: you may not read cellfit's inspect API: RBAC does not grant you get on "
                                         f"services/proxy 'http:cellfit:inspect' in namespace {env['services']}"), refused.stderr
        assert f"--clusterrole={env['viewer_role']}" in refused.stderr
        refused_why = plugin.run(users["outsider"], "why", "pod/quota-waiter", "-n", ns, check=False)
        assert refused_why.returncode == 5 and "services/proxy" in refused_why.stderr, refused_why


    def test_not_installed_where_the_plugin_looks(self, env: dict[str, Any]) -> None:
        done = env["plugin"].run(env["users"]["viewer"], "vcs", "--cellfit-service", "cellfit-nowhere", check=False)
        # The viewer role names only the chart's Service: RBAC refuses before the API server looks.
        assert done.returncode == 5 and "'http:cellfit-nowhere:inspect'" in done.stderr, done
        admin = Path(env["cluster"].env["KUBECONFIG"])
        done = env["plugin"].run(admin, "vcs", "--cellfit-service", "cellfit-nowhere", check=False)
        assert done.returncode == 3, done
        assert f"cellfit is not installed here: no Service cellfit-nowhere in namespace {env['services']}" in done.stderr


    # -------------------------------------------------------------------------- (b) vcs

    def test_vcs_is_the_inspect_view(self, env: dict[str, Any]) -> None:
        plugin, viewer, cellfit = env["plugin"], env["users"]["viewer"], env["cellfit"]

        def agree() -> tuple[Any, Any] | None:
            direct = cellfit.get("/v1/inspect/virtual-clusters")
            through = json.loads(plugin.run(viewer, "vcs", "-o", "json").stdout)
            return (direct, through) if direct == through else None

        direct, _ = wait_for(agree, 30, "kubectl cellfit vcs -o json equal to /v1/inspect/virtual-clusters")
        assert {vc["name"] for vc in direct["virtualClusters"]} == set(VCS)
        table = plugin.run(viewer, "vcs").stdout
        print(f"$ kubectl cellfit vcs\n{table}")
        rows = [line.split() for line in table.splitlines()]
        assert rows[0] == ["VC", "CELL-TYPE", "GPUS/CELL", "QUOTA", "BOUND", "UNBOUND", "DRAINING", "PINNED",
                           "GUARANTEED-PODS", "GUARANTEED-GPUS", "OPPORTUNISTIC-PODS", "OPPORTUNISTIC-GPUS"]
        for vc in direct["virtualClusters"]:
            (row,) = [r for r in rows[1:] if r[0] == vc["name"]]
            (cell,) = vc["cells"]
            assert row[1:6] == ["E2E-NODE", "8", str(cell["quota"]), str(cell["bound"]), str(cell["quota"] - cell["bound"])]
            assert row[8:] == [str(vc["pods"]["guaranteed"]), str(vc["gpus"]["guaranteed"]),
                               str(vc["pods"]["opportunistic"]), str(vc["gpus"]["opportunistic"])]
        cells = plugin.run(viewer, "cells", "--node", NODES[0], "-o", "json").stdout
        assert json.loads(cells) == cellfit.get("/v1/inspect/cells", node=NODES[0])


    # -------------------------------------------------------------------------- (c) gang

    def test_gang_waiting_for_its_member(self, env: dict[str, Any]) -> None:
        cluster, ns, plugin = env["cluster"], env["ns"], env["plugin"]
        job = example_job("gang-job", name="gang", scheduler_name=env["scheduler"], node_selector=WHERE, gpus=4, parallelism=2)
        job["spec"]["template"]["metadata"]["labels"].update(vc_labels("gang"))
        job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": GATE}]
        cluster.apply(job, namespace=ns)
        pods = wait_for(lambda: (lambda ps: ps if len(ps) == 2 else None)(job_pods(cluster, ns, "gang")), 60, "the gang's two pods")
        first = sorted(pods, key=lambda p: p["metadata"]["name"])[0]
        lift_gate(cluster, ns, first)
        wait_for(lambda: bound_node(cluster, ns, first["metadata"]["name"]), 60, f"the gang's first pod bound (cellfit log {env['cellfit'].log})")
        waiting = next(p["metadata"]["name"] for p in pods if p["metadata"]["uid"] != first["metadata"]["uid"])

        answer = plugin.why(env["users"]["viewer"], "job/gang", ns)
        print(f"$ kubectl cellfit why job/gang\njob/gang: {answer['summary']}")
        assert answer["reason"] == "gang", answer
        assert answer["summary"] == (f"waiting for its gang {ns}/gang: 1 of 2 pods placed, its other slots are booked; waiting for "
                                     f"{waiting}: waiting for its scheduling gates to be removed: {GATE} "
                                     "(kube-scheduler does not try it before)"), answer


    # -------------------------------------------------------------------------- (d) preemption, resume hold

    def test_preempted_job_and_a_pod_kept_off_by_its_resume_hold(self, env: dict[str, Any]) -> None:
        cluster, ns, plugin, viewer = env["cluster"], env["ns"], env["plugin"], env["users"]["viewer"]
        name = env["scheduler"]

        def be_job(job_name: str, **kwargs: Any) -> dict[str, Any]:
            body = example_job("be-job", name=job_name, scheduler_name=name, node_selector=WHERE, gpus=4, **kwargs)
            body["spec"]["template"]["metadata"]["labels"].update(vc_labels("fit"))
            return body

        # The VC's node fills with two best-effort Jobs; FitGpp's victim is the shorter grace period.
        # Its Job's pods are gated: the first is let through, the one it resumes in stays pending.
        victim = be_job("be-victim", grace_seconds=10, exit_after="2s")
        victim["spec"]["template"]["spec"]["schedulingGates"] = [{"name": GATE}]
        cluster.apply(victim, namespace=ns)
        lift_gate(cluster, ns, wait_for(lambda: (job_pods(cluster, ns, "be-victim") or [None])[0], 60, "be-victim's pod"))
        wait_for(lambda: any(p["spec"].get("nodeName") for p in job_pods(cluster, ns, "be-victim")), 60, "be-victim bound")
        cluster.apply(be_job("be-other", grace_seconds=300), namespace=ns)
        wait_for(lambda: any(p["spec"].get("nodeName") for p in job_pods(cluster, ns, "be-other")), 60, "be-other bound")
        cluster.apply(be_job("be-waiter"), namespace=ns)

        trial = example_job("te-job", name="te-probe", scheduler_name=name, node_selector=WHERE, gpus=4, run_for="15s")
        trial["spec"]["template"]["metadata"]["labels"].update(vc_labels("fit", "trial"))
        cluster.apply(trial, namespace=ns)
        wait_for(lambda: cluster.kubectl_json("-n", ns, "get", "job", "be-victim")["metadata"].get("annotations", {})
                 .get("cellfit.io/preemptions") == "1", 120, f"be-victim preempted (cellfit log {env['cellfit'].log})")
        resumed = wait_for(lambda: next((p for p in job_pods(cluster, ns, "be-victim") if not p["spec"].get("nodeName")), None),
                           120, "be-victim's new pod")

        answer = plugin.why(viewer, "job/be-victim", ns)
        print("$ kubectl cellfit why job/be-victim\n" + plugin.run(viewer, "why", "job/be-victim", "-n", ns).stdout)
        assert answer["reason"] == "preempted", answer
        assert answer["summary"].startswith(f"preempted 1 time, last by {ns}/te-probe-"), answer
        assert " on node " in answer["summary"] and "(score " in answer["summary"] and " x grace " in answer["summary"], answer
        assert "of the largest best-effort pod's" in answer["summary"] and "of the longest" in answer["summary"], answer
        assert answer["summary"].endswith(f"now pod {resumed['metadata']['name']}: waiting for its scheduling gates to be removed: "
                                          f"{GATE} (kube-scheduler does not try it before)"), answer

        # The trial Job ends: the waiter is tried on the freed GPUs and kept off them for the resumed pod.
        waiter = wait_for(lambda: (job_pods(cluster, ns, "be-waiter") or [None])[0], 60, "be-waiter's pod")
        kept = f"its free resources are kept for {ns}/{resumed['metadata']['name']}"
        wait_for(lambda: pending_with(cluster, ns, waiter["metadata"]["name"], kept), 120,
                 f"be-waiter kept off the held GPUs (cellfit log {env['cellfit'].log})")
        holds = env["cellfit"].get("/v1/inspect/resume-holds")["holds"]
        (hold,) = [h for h in holds if f"{ns}/{resumed['metadata']['name']}" in h["pods"]]
        answer = plugin.why(viewer, f"pod/{waiter['metadata']['name']}", ns)
        print(f"$ kubectl cellfit why pod/{waiter['metadata']['name']}\n{answer['summary']}")
        assert answer["reason"] == "resume-hold", answer
        assert answer["summary"] == (f"kept off node {hold['node']} by a resume hold: {kept} of Job {hold['job']}, a preempted "
                                     "best-effort Job resuming (until that pod is bound, at most preemption.resumeHoldSeconds)"), answer
        lift_gate(cluster, ns, resumed)
        wait_for(lambda: bound_node(cluster, ns, resumed["metadata"]["name"]), 120, "the resumed pod bound")
        answer = plugin.why(viewer, "job/be-victim", ns)
        assert answer["reason"] == "preempted" and answer["summary"].endswith(f"now running: 1 pod on {hold['node']}"), answer


# ------------------------------------------------------------------------------ (e) AlloX

ALLOX = SCENARIOS.name("allox")
ALLOX_WHERE = SCENARIOS.selector("allox")
# (job, cpu seconds, gpu seconds): five Jobs for one GPU and three CPU slots (20 of the node's 64
# cores each, one kept beside the GPU), long enough to be asked about while they run or wait.
ALLOX_JOBS = [("ij-a", 150, 120), ("ij-b", 150, 120), ("ij-c", 150, 120), ("ij-d", 150, 120), ("ij-e", 150, 120)]


@pytest.fixture(scope="class")
def allox_env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A cellfit with the estimator and AlloX admission limited to one node of its own, placing
    pods through its webhook (chart_support.allox_extender), its inspect listener behind a Service
    of its own for the plugin. It starts after TestHivedDecisions' cellfit and kube-scheduler
    stopped: both schedule the chart's profile."""
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    viewer = viewer_role(release)
    workdir = tmp_path_factory.mktemp(ALLOX)
    cluster.add_gpu_nodes(1, f"{ALLOX}-gpu", labels=ALLOX_WHERE, gpus=1)
    address = host_address()
    ns = control_plane.create_namespace("explain-allox")
    services = control_plane.create_namespace("explain-allox-svc")
    allox = {"alpha": 1.0, "debounceSeconds": 1.0, "resyncSeconds": 2}
    try:
        with allox_extender(cluster, release, workdir, name=ALLOX, where=ALLOX_WHERE, allox=allox, inspect_host=address) as cellfit:
            assert cellfit.inspect_port is not None
            inspect_service(cluster, services, address=address, port=cellfit.inspect_port)
            proxy = f"/api/v1/namespaces/{services}/services/http:cellfit:inspect/proxy/healthz"
            wait_for(lambda: cluster.kubectl("get", "--raw", proxy, check=False).returncode == 0, 60, "the service proxy")
            user = service_account(cluster, ns, "viewer", roles=[(services, viewer), (ns, "view")], workdir=workdir)
            yield {"cluster": cluster, "cellfit": cellfit, "ns": ns, "user": user, "scheduler": release.scheduler_name,
                   "plugin": Plugin(cluster, plugin_bin(workdir / "bin"), service_namespace=services)}
    finally:
        # Its interchangeable Jobs (some suspended for good: never placeable) would join the
        # queue of the next AlloX this session starts (e2e/test_allox_admission.py run after
        # this module found them beside its own): the namespace goes only at the session's end.
        cluster.kubectl("-n", ns, "delete", "jobs", "--all", "--cascade=foreground", "--wait=true", timeout=120, check=False)
        SCENARIOS.delete_nodes(cluster, ["allox"])


def allox_job(name: str, scheduler_name: str, cpu_seconds: int, gpu_seconds: int) -> dict[str, Any]:
    body = interchangeable_job(name, scheduler_name, cpu_seconds, gpu_seconds)
    body["spec"]["template"]["metadata"]["labels"] = dict(ALLOX_WHERE)
    body["spec"]["template"]["spec"]["nodeSelector"] = dict(ALLOX_WHERE)
    return body


class TestAlloxDecisions:
    def test_queued_by_allox_and_on_cpu_instead_of_gpu(self, allox_env: dict[str, Any]) -> None:
        cluster, ns, cellfit, plugin, user = (allox_env[k] for k in ("cluster", "ns", "cellfit", "plugin", "user"))
        cluster.apply(*(allox_job(name, allox_env["scheduler"], cpu, gpu) for name, cpu, gpu in ALLOX_JOBS), namespace=ns)

        def decided() -> dict[str, Any] | None:
            view = cellfit.get("/v1/inspect/allox")
            queued = [row for rows in view["queue"].values() for row in rows if row["job"].startswith(f"{ns}/")]
            placed = {name: cluster.kubectl_json("-n", ns, "get", "job", name)["metadata"].get("annotations", {})
                      .get("cellfit.io/placement") for name, *_ in ALLOX_JOBS}
            return {"queued": queued, "placed": placed} if len(queued) == 1 and sum(1 for k in placed.values() if k) == 4 else None

        state = wait_for(decided, 90, f"four Jobs started and one queued (cellfit log {cellfit.log})")
        (queued,) = state["queued"]
        name = queued["job"].split("/", 1)[1]
        answer = plugin.why(user, f"job/{name}", ns)
        print(f"$ kubectl cellfit why job/{name}\njob/{name}: {answer['summary']}")
        assert answer["reason"] == "allox-queue", answer
        assert answer["summary"].startswith(f"queued by AlloX: 1st on {queued['kind']}, expected start in ~"), answer
        assert answer["details"][:2] == ["estimate cpu: 2 min", "estimate gpu: 2 min"], answer  # the user's 150 s and 120 s

        on_cpu = [job for job, kind in state["placed"].items() if kind == "cpu"]
        assert on_cpu, state  # one GPU for four started Jobs: three run on CPU slots
        for job in on_cpu:
            placed = next(c for c in cluster.kubectl_json("-n", ns, "get", "job", job)["status"]["conditions"] if c["type"] == "Placed")
            answer = plugin.why(user, f"job/{job}", ns)
            assert answer["reason"] == "cpu-instead-of-gpu", answer
            assert answer["summary"] == f"on CPU instead of GPU: {placed['message'].removeprefix('running on cpu: ')}", answer
        print(f"$ kubectl cellfit why job/{on_cpu[0]}\n" + plugin.run(user, "why", f"job/{on_cpu[0]}", "-n", ns).stdout)
        table = plugin.run(user, "queue").stdout.splitlines()
        print("$ kubectl cellfit queue\n" + "\n".join(table))
        # WAITING too where AlloX holds a Job outside the queue (no machine, its VC's quota)
        assert table[0].split()[:5] == ["JOB", "KIND", "POSITION", "EXPECTED-START", "VC"]
        assert any(line.split()[:3] == [queued["job"], queued["kind"], "1"] for line in table[1:]), table
