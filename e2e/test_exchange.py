"""HiveD cell exchange on a real control plane (issue 17): two tenants exchange an idle node cell
for a short window; the borrower's pod runs on it as guaranteed (a third tenant's opportunistic
pod cannot take it); at the end the cell returns, the borrower's pod
still on it is preempted after the grace period, and the lender's pod gets the cell. RBAC decides
who may trade a VC's cells: each tenant trades in its own namespace only (impersonated users bound
to the chart's ``cellfit-cell-trader`` ClusterRole), and cellfit itself runs with the chart's
RBAC (the extender-only ServiceAccount).

Three fake nodes of 2 GPUs; cellfit runs the hived policy with a written topology (one node-level
cell per node) and three VCs of one node each, ``a`` (the lender), ``b`` (the borrower) and
``c`` (the third tenant); ``exchange.returnGraceSeconds`` is 5 s so that the test is short. Each
VC's namespace is labelled ``cellfit.io/virtual-cluster``. KWOK runs the pods (they run until
deleted).
"""

from __future__ import annotations

import json
import math
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from chart_support import (Cluster, CellfitProcess, PodVersion, Release, Scenarios, ensure_release, gpu_pod, is_active,
                           local_extender, wait_for)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
SCENARIOS = Scenarios("exchange-")
SCENARIO = SCENARIOS.name("swap")
WHERE = SCENARIOS.selector("swap")
NODES = [SCENARIOS.node("swap", index) for index in range(3)]
VC_LABEL = "cellfit.io/virtual-cluster"
GRACE = 5
RELOAD_SECONDS = 1
OPPORTUNISTIC = "opportunistic"


def cells_config() -> dict[str, Any]:
    return {
        "topology": {
            "cellTypes": {"X-NODE": {"childType": "X-GPU", "childCount": 2, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "X-NODE", "nodeName": node} for node in NODES],
        },
        "virtualClusters": {vc: [{"cellType": "X-NODE", "count": 1}] for vc in ("a", "b", "c")},
    }


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, CellfitProcess, Any]]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    cluster.add_gpu_nodes(3, f"{SCENARIO}-gpu", labels=WHERE, gpus=2)  # before cellfit: the topology names them
    config = yaml.safe_load(release.cellfit_config_text)
    config["policy"] = {**config.get("policy", {}), "name": "hived"}
    config["cells"] = {**config.get("cells", {}), **cells_config()}
    config["exchange"] = {**config.get("exchange", {}), "returnGraceSeconds": GRACE, "resyncSeconds": 2}
    # The reload test rewrites the file three times, each waited for, all inside one 62 s window.
    # At the default 10 s each reload waits for the next period and a parse: the three took 33 s
    # in a run whose restored file applied 22 s before the window ended, a margin that a loaded
    # machine's slower parses, restart and kubectl calls eat. At 1 s they take seconds.
    config["server"] = {**config.get("server", {}), "configReloadSeconds": RELOAD_SECONDS}
    try:
        with local_extender(cluster, release, tmp_path_factory.mktemp(SCENARIO), name=SCENARIO,
                            config_text=yaml.safe_dump(config)) as cellfit:
            yield cluster, release, cellfit, control_plane
    finally:
        SCENARIOS.delete_nodes(cluster, ["swap"])


@pytest.fixture
def tidy(env: Any) -> Iterator[list[str]]:
    """Namespaces whose pods are deleted after the test, passed or not: the next test starts
    with idle cells."""
    namespaces: list[str] = []
    yield namespaces
    for ns in namespaces:
        env[0].kubectl("-n", ns, "delete", "pods", "--all", "--wait=true", check=False)


def rewrite(path: Path, text: str) -> None:
    """Replace the file in one rename, as the kubelet updates a mounted ConfigMap: a reload that
    reads it while it is written would see a truncated file, refuse it and report that."""
    staged = path.with_name(f".{path.name}.new")
    staged.write_text(text)
    os.replace(staged, path)


def seconds(stamp: str) -> float:
    """An object's RFC 3339 time (whole seconds) -> seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def window(opens_in: float, ends_in: float) -> tuple[float, float]:
    """A window in whole seconds from now (objects carry whole seconds: what cellfit reads)."""
    now = math.floor(time.time())
    return now + opens_in, now + ends_in


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(round(seconds), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cell_object(kind: str, name: str, start: float, end: float) -> dict[str, Any]:
    return {"apiVersion": "cellfit.io/v1alpha1", "kind": kind, "metadata": {"name": name},
            "spec": {"cells": [{"cellType": "X-NODE", "count": 1}], "window": {"start": rfc3339(start), "end": rfc3339(end)}}}


def vc_pod(name: str, scheduler: str, vc: str, *, opportunistic: bool = False) -> dict[str, Any]:
    labels = {VC_LABEL: vc, **({"cellfit.io/priority": OPPORTUNISTIC} if opportunistic else {})}
    return gpu_pod(name, scheduler_name=scheduler, node_selector=WHERE, gpus=2, labels=labels,
                   priority_class="cellfit-opportunistic" if opportunistic else "cellfit-best-effort")


def get(cluster: Cluster, ns: str, kind: str, name: str) -> dict[str, Any]:
    return dict(cluster.kubectl_json("-n", ns, "get", kind, name))


def phase(cluster: Cluster, ns: str, kind: str, name: str) -> str | None:
    return get(cluster, ns, kind, name).get("status", {}).get("phase")


def running(cluster: Cluster, ns: str, name: str) -> dict[str, Any] | None:
    found = cluster.kubectl("-n", ns, "get", "pod", name, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    pod = json.loads(found.stdout)
    return pod if pod["status"].get("phase") == "Running" and is_active(pod) else None


def bind_info(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(pod["metadata"].get("annotations", {}).get("cellfit.io/bind-info", "{}")))


def as_user(cluster: Cluster, user: str, ns: str, *args: str, body: dict[str, Any] | None = None, check: bool = True) -> Any:
    return cluster.kubectl("--as", user, "-n", ns, *args, input=json.dumps(body) if body is not None else None, check=check)


def diagnosis(cluster: Cluster, namespaces: dict[str, str], cellfit: CellfitProcess) -> str:
    lines = []
    for vc, ns in namespaces.items():
        for kind in ("celloffers", "cellrequests"):
            for obj in cluster.kubectl_json("-n", ns, "get", kind)["items"]:
                lines.append(f"{vc} {kind} {obj['metadata']['name']}: {json.dumps(obj.get('status', {}))[:600]}")
        for pod in cluster.pods(ns):
            lines.append(f"  pod {pod['metadata']['name']}: {pod['status'].get('phase')} on {pod['spec'].get('nodeName')} {bind_info(pod)}")
    inspect = json.dumps(cellfit.get("/v1/inspect/exchanges"))[:2500]
    return "\n".join(lines) + f"\n/v1/inspect/exchanges: {inspect}\ncellfit's log:\n{cellfit.tail(30)}"


def test_two_tenants_exchange_a_node_cell_for_a_window(env: Any, tidy: list[str]) -> None:
    cluster, release, cellfit, cp = env
    scheduler = release.scheduler_name
    trader_role = release.find("ClusterRole", "-cell-trader")["metadata"]["name"]
    namespaces = {vc: cp.create_namespace(f"team-{vc}") for vc in ("a", "b", "c")}
    tidy.extend(namespaces.values())
    unlabelled = cp.create_namespace("team-none")
    for vc, ns in namespaces.items():
        cluster.kubectl("label", "namespace", ns, f"{VC_LABEL}={vc}")
        # Tenant vc's people may trade in their own namespace, nowhere else.
        cluster.kubectl("-n", ns, "create", "rolebinding", "traders", f"--clusterrole={trader_role}", f"--user=tenant-{vc}")
    cluster.kubectl("-n", unlabelled, "create", "rolebinding", "traders", f"--clusterrole={trader_role}", "--user=tenant-a")
    ns_a, ns_b, ns_c = namespaces["a"], namespaces["b"], namespaces["c"]

    def wait(predicate: Any, timeout: float, what: str) -> Any:
        try:
            return wait_for(predicate, timeout, what)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{diagnosis(cluster, namespaces, cellfit)}") from None

    # RBAC decides who may offer a VC's cells: b may not offer a's, nor write any status.
    now = time.time()
    refused = as_user(cluster, "tenant-b", ns_a, "create", "-f", "-", body=cell_object("CellOffer", "not-yours", now + 60, now + 120),
                      check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr
    assert as_user(cluster, "tenant-b", ns_a, "auth", "can-i", "create", "celloffers.cellfit.io", check=False).stdout.strip() == "no"
    assert as_user(cluster, "tenant-a", ns_a, "auth", "can-i", "create", "celloffers.cellfit.io").stdout.strip() == "yes"
    assert as_user(cluster, "tenant-a", ns_a, "auth", "can-i", "patch", "celloffers.cellfit.io", "--subresource=status",
                   check=False).stdout.strip() == "no"

    # An offer from a namespace mapped to no VC is refused, naming the field; nothing changes.
    as_user(cluster, "tenant-a", unlabelled, "create", "-f", "-", body=cell_object("CellOffer", "nowhere", now + 60, now + 120))
    wait(lambda: phase(cluster, unlabelled, "celloffer", "nowhere") == "Invalid", 30, "the unlabelled offer Invalid")
    status = get(cluster, unlabelled, "celloffer", "nowhere")["status"]
    assert status["message"].startswith("metadata.namespace:") and VC_LABEL in status["message"], status
    (event,) = wait_for(lambda: [e for e in cluster.events(unlabelled, "nowhere", kind="CellOffer") if e["reason"] == "Invalid"], 20,
                        "an Invalid Event on the offer")
    assert event["type"] == "Warning" and event["message"].startswith("metadata.namespace:"), event

    # b's own cell is busy, c's too; a's is idle.
    cluster.apply(vc_pod("b-0", scheduler, "b"), namespace=ns_b)
    cluster.apply(vc_pod("c-hold", scheduler, "c"), namespace=ns_c)
    held = set()
    for ns, name in ((ns_b, "b-0"), (ns_c, "c-hold")):
        held.add(wait(lambda ns=ns, name=name: running(cluster, ns, name), 90, f"{name} running")["spec"]["nodeName"])
    (a_node,) = set(NODES) - held

    # a offers its idle node cell, b asks for one, for a short window.
    start, end = window(20, 75)
    as_user(cluster, "tenant-a", ns_a, "create", "-f", "-", body=cell_object("CellOffer", "idle-node", start, end))
    as_user(cluster, "tenant-b", ns_b, "create", "-f", "-", body=cell_object("CellRequest", "burst", start, end))
    wait(lambda: phase(cluster, ns_a, "celloffer", "idle-node") == "Matched" and phase(cluster, ns_b, "cellrequest", "burst") == "Matched",
         30, "offer and request Matched")
    offer, request = get(cluster, ns_a, "celloffer", "idle-node"), get(cluster, ns_b, "cellrequest", "burst")
    assert offer["status"]["match"]["request"] == {"namespace": ns_b, "name": "burst"} and offer["status"]["match"]["virtualCluster"] == "b"
    assert request["status"]["match"]["offer"] == {"namespace": ns_a, "name": "idle-node"} and request["status"]["virtualCluster"] == "b"
    assert request["status"]["match"]["gpuHours"] > 0 and "took offer" in request["status"]["match"]["explanation"]
    assert any(e["reason"] == "Matched" for e in cluster.events(ns_b, "burst", kind="CellRequest"))

    # The window opens: the quota moves (a 0, b 2), the objects say Active.
    wait(lambda: phase(cluster, ns_b, "cellrequest", "burst") == "Active", 60, "the request Active")
    quotas = wait(lambda: (lambda q: q if q.get("b", {}).get("X-NODE") == 2 else None)(cellfit.get("/v1/inspect/exchanges")["virtualClusters"]),
                  10, "b's quota at 2")
    assert quotas.get("a", {}).get("X-NODE", 0) == 0, quotas
    assert phase(cluster, ns_a, "celloffer", "idle-node") == "Active"

    # b's second pod runs on the borrowed cell, guaranteed.
    cluster.apply(vc_pod("b-1", scheduler, "b"), namespace=ns_b)
    b_1 = wait(lambda: running(cluster, ns_b, "b-1"), 90, "b-1 running")
    info = bind_info(b_1)
    assert (b_1["spec"]["nodeName"], info["vc"], info["priority"]) == (a_node, "b", "guaranteed"), info
    # A third tenant's opportunistic pod cannot take it: it waits, b-1 runs on.
    cluster.apply(vc_pod("c-opp", scheduler, "c", opportunistic=True), namespace=ns_c)
    wait(lambda: any(e["reason"] == "FailedScheduling" for e in cluster.events(ns_c, "c-opp")), 60, "c-opp unschedulable")
    time.sleep(3)
    assert (running(cluster, ns_b, "b-1") or {}).get("metadata", {}).get("uid") == b_1["metadata"]["uid"]
    assert running(cluster, ns_c, "c-opp") is None
    cluster.kubectl("-n", ns_c, "delete", "pod", "c-opp", "--wait=true")

    # The lender wants its cell back before the end: its pod waits for the window to end.
    cluster.apply(vc_pod("a-1", scheduler, "a"), namespace=ns_a)
    wait_for(lambda: any(e["reason"] == "FailedScheduling" for e in cluster.events(ns_a, "a-1")), 60, "a-1 waiting")
    assert time.time() < end, "the window ended before the lender's pod was seen waiting: the machine is too slow for this window"

    # The window ends: the cells go back; b's pod left on the returned cell is preempted after
    # the grace period, and a's pod gets the cell.
    wait(lambda: phase(cluster, ns_b, "cellrequest", "burst") == "Returned", max(end - time.time(), 0) + 30, "the request Returned")
    assert phase(cluster, ns_a, "celloffer", "idle-node") == "Returned"
    a_1 = wait(lambda: running(cluster, ns_a, "a-1"), 90, "a-1 running")
    # The pods' own times, not the test's clock (which passes end + GRACE whatever cellfit does):
    # a-1 was placed only at the end plus the grace, when b's pod left on the cell was preempted.
    scheduled = next(c["lastTransitionTime"] for c in a_1["status"]["conditions"] if c["type"] == "PodScheduled")
    assert seconds(scheduled) >= end + GRACE, (scheduled, end)
    info = bind_info(a_1)
    assert (info["vc"], info["priority"]) == ("a", "guaranteed"), info
    survivors = [name for name in ("b-0", "b-1") if running(cluster, ns_b, name)]
    assert len(survivors) == 1, survivors  # b has one cell again: one of its pods was preempted
    (preempted,) = {"b-0", "b-1"} - set(survivors)
    assert a_1["spec"]["nodeName"] != running(cluster, ns_b, survivors[0])["spec"]["nodeName"]  # type: ignore[index]
    events = [e for e in cluster.events(ns_b, preempted) if e["reason"] == "Preempted"]
    assert events and "cell exchange" in events[0]["message"] and "window ended" in events[0]["message"], events
    assert seconds(events[0]["firstTimestamp"]) >= end + GRACE, (events[0]["firstTimestamp"], end)  # written after the deletion

    # Inspect and metrics say what happened.
    view = cellfit.get("/v1/inspect/exchanges")
    (exchange,) = [x for x in view["exchanges"] if x["offer"] == f"{ns_a}/idle-node"]
    assert (exchange["lender"], exchange["borrower"], exchange["state"]) == ("a", "b", "returned"), exchange
    assert view["surplus"]["a"] > 0 > view["surplus"]["b"] and view["controller"]["leading"] is True
    # The ledger's whole history (a kept cluster's earlier runs included): at least this exchange.
    assert cellfit.metric('cellfit_exchange_gpu_hours{role="lent",vc="a"}') >= exchange["gpuHours"] - 1e-6 > 0  # inspect rounds to 1e-6
    assert cellfit.metric('cellfit_exchange_surplus_gpu_hours{vc="a"}') == pytest.approx(view["surplus"]["a"], abs=1e-6)
    assert cellfit.metric('cellfit_exchange_preemptions_total{vc="b"}') == 1
    ledger = cluster.kubectl_json("-n", release.namespace, "get", "configmap", "cellfit-exchange-ledger")
    assert len([k for k in ledger["data"] if k.startswith("match-")]) >= 1


def ledger_keys(cluster: Cluster, release: Release) -> list[str]:
    found = cluster.kubectl_json("-n", release.namespace, "get", "configmap", "cellfit-exchange-ledger")
    return sorted(k for k in found.get("data") or {} if k.startswith("match-"))


def quotas_now(cellfit: CellfitProcess) -> dict[str, int]:
    return {vc: cells.get("X-NODE", 0) for vc, cells in cellfit.get("/v1/inspect/exchanges")["virtualClusters"].items()}


def test_a_restart_and_a_config_reload_keep_the_exchange_under_way(env: Any) -> None:
    """cellfit restarted during a window reads the match back from the ledger (the quota moves
    again, nothing is matched or counted twice); a reload of the configuration file applies the
    exchange on top of the new VCs, and a file that would leave it impossible is refused."""
    cluster, release, cellfit, cp = env
    namespaces = {vc: cp.create_namespace(f"again-{vc}") for vc in ("a", "b")}
    for vc, ns in namespaces.items():
        cluster.kubectl("label", "namespace", ns, f"{VC_LABEL}={vc}")
    start, end = window(8, 70)
    cluster.apply(cell_object("CellOffer", "spare", start, end), namespace=namespaces["a"])
    cluster.apply(cell_object("CellRequest", "more", start, end), namespace=namespaces["b"])

    def wait(predicate: Any, timeout: float, what: str) -> Any:
        try:
            return wait_for(predicate, timeout, what)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{diagnosis(cluster, namespaces, cellfit)}") from None

    wait(lambda: phase(cluster, namespaces["b"], "cellrequest", "more") == "Active", 40, "the request Active")
    wait(lambda: quotas_now(cellfit) == {"a": 0, "b": 2, "c": 1}, 10, "the quotas moved")
    keys, surplus = ledger_keys(cluster, release), cellfit.get("/v1/inspect/exchanges")["surplus"]

    cellfit.stop()
    cellfit.start()
    # Back up: the exchange under way is applied again from the ledger, nothing is added to it.
    wait(lambda: quotas_now(cellfit) == {"a": 0, "b": 2, "c": 1}, 30, "the quotas moved again after the restart")
    wait(lambda: cellfit.get("/v1/inspect/exchanges")["controller"].get("synced"), 30, "the controller synced")
    time.sleep(3)  # a few rounds
    assert ledger_keys(cluster, release) == keys
    assert cellfit.get("/v1/inspect/exchanges")["surplus"] == surplus
    assert phase(cluster, namespaces["b"], "cellrequest", "more") == "Active"

    # A reload (c's quota to 0): the exchange stays applied on top of the new VCs.
    original = cellfit.config.read_text()
    config = yaml.safe_load(original)
    config["cells"]["virtualClusters"]["c"] = [{"cellType": "X-NODE", "count": 0}]
    rewrite(cellfit.config, yaml.safe_dump(config))
    try:
        wait(lambda: quotas_now(cellfit) == {"a": 0, "b": 2, "c": 0}, 40, "the reload applied with the exchange on top")
        assert cellfit.metric("cellfit_config_in_effect") == 1
        # a's quota to 0: the exchange under way would need a cell a no longer has: refused.
        config["cells"]["virtualClusters"]["a"] = [{"cellType": "X-NODE", "count": 0}]
        rewrite(cellfit.config, yaml.safe_dump(config))
        wait(lambda: cellfit.metric("cellfit_config_in_effect") == 0, 40, "the breaking reload refused")
        assert quotas_now(cellfit) == {"a": 0, "b": 2, "c": 0}
        refused = [line for line in cellfit.log.read_text().splitlines() if "new configuration not applied" in line]
        assert refused and "cell exchanges matched do not fit" in refused[-1] and f"{namespaces['a']}/spare" in refused[-1], refused[-1:]
    finally:
        rewrite(cellfit.config, original)
    wait(lambda: quotas_now(cellfit) == {"a": 0, "b": 2, "c": 1}, 40, "the original file back, the exchange on top")
    # The window ends: every quota is the file's again.
    wait(lambda: quotas_now(cellfit) == {"a": 1, "b": 1, "c": 1}, max(end - time.time(), 0) + 20, "the quotas back at the end")
    wait(lambda: phase(cluster, namespaces["b"], "cellrequest", "more") == "Returned", 20, "the request Returned")


def test_a_lender_busy_when_the_window_opens_is_preempted_after_the_grace(env: Any, tidy: list[str]) -> None:
    """The lender's own pod still holds its only cell when the window opens: its cell drains (no
    eviction), the offer says whose pods the borrower waits for and when they go, the borrower's
    pod waits; at the start plus the grace period cellfit preempts the lender's pod and the
    borrower's pod gets the cell."""
    cluster, release, cellfit, cp = env
    scheduler = release.scheduler_name
    namespaces = {vc: cp.create_namespace(f"busy-{vc}") for vc in ("a", "b", "c")}
    tidy.extend(namespaces.values())
    for vc, ns in namespaces.items():
        cluster.kubectl("label", "namespace", ns, f"{VC_LABEL}={vc}")
    ns_a, ns_b = namespaces["a"], namespaces["b"]

    def wait(predicate: Any, timeout: float, what: str) -> Any:
        try:
            return wait_for(predicate, timeout, what)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{diagnosis(cluster, namespaces, cellfit)}") from None

    # Every node busy, each VC on its own cell.
    for vc, name in (("a", "a-busy"), ("b", "b-0"), ("c", "c-hold")):
        cluster.apply(vc_pod(name, scheduler, vc), namespace=namespaces[vc])
    for vc, name in (("a", "a-busy"), ("b", "b-0"), ("c", "c-hold")):
        wait(lambda vc=vc, name=name: running(cluster, namespaces[vc], name), 90, f"{name} running")
    a_busy = running(cluster, ns_a, "a-busy")
    assert a_busy is not None
    start, end = window(12, 90)
    cluster.apply(cell_object("CellOffer", "busy-node", start, end), namespace=ns_a)
    cluster.apply(cell_object("CellRequest", "now", start, end), namespace=ns_b)
    wait(lambda: phase(cluster, ns_b, "cellrequest", "now") == "Matched", 30, "the request Matched")

    def saying(versions: list[PodVersion], words: str) -> dict[str, Any] | None:
        return next((v.pod for v in list(versions) if words in v.pod.get("status", {}).get("message", "")), None)

    # The window opens on a busy lender: its pod keeps running, the offer says what follows. The
    # objects say so only until the lender's pod is preempted, GRACE s after the start (in a run:
    # from 0.1 s to 6.6 s after the start): watched, not polled, so that a test a few seconds late on a
    # loaded machine still sees what they said.
    with cluster.watch("celloffers", ns_a, "busy-node") as offers, cluster.watch("cellrequests", ns_b, "now") as requests:
        wait(lambda: phase(cluster, ns_a, "celloffer", "busy-node") == "Active", 40, "the offer Active")
        cluster.apply(vc_pod("b-1", scheduler, "b"), namespace=ns_b)
        offer = wait(lambda: saying(offers, "still hold"), 20, "the offer naming the lender's pods")
        wait(lambda: saying(requests, "this VC's pods wait"), 20, "the request saying its pods wait")
    assert f"preempted at {offer['status']['preemptAt']}" in offer["status"]["message"], offer["status"]
    assert offer["status"]["preemptAt"] == rfc3339(start + GRACE)
    if time.time() < start + GRACE - 1:
        assert running(cluster, ns_b, "b-1") is None and running(cluster, ns_a, "a-busy") is not None

    # At the start plus the grace the lender's pod is preempted, and the borrower's pod runs there.
    b_1 = wait(lambda: running(cluster, ns_b, "b-1"), 60, "b-1 running")
    scheduled = next(c["lastTransitionTime"] for c in b_1["status"]["conditions"] if c["type"] == "PodScheduled")
    assert seconds(scheduled) >= start + GRACE, (scheduled, start)  # the pod's time, not the test's clock
    assert b_1["spec"]["nodeName"] == a_busy["spec"]["nodeName"] and bind_info(b_1)["vc"] == "b"
    assert running(cluster, ns_a, "a-busy") is None
    events = [e for e in cluster.events(ns_a, "a-busy") if e["reason"] == "Preempted"]
    assert events and "lent" in events[0]["message"] and f"{ns_a}/busy-node" in events[0]["message"], events
    assert seconds(events[0]["firstTimestamp"]) >= start + GRACE, (events[0]["firstTimestamp"], start)
    assert cellfit.metric('cellfit_exchange_preemptions_total{vc="a"}') == 1
