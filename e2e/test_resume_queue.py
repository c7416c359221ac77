"""A preempted best-effort Job resumes at the head of the best-effort queue (FitGpp §2).

A node is full of two BE Jobs and a third BE Job ("waiter") queues for it. A trial Job arrives
and FitGpp preempts one BE Job; the Job controller recreates its pod, and cellfit's pod-create
webhook, registered with the API server over HTTPS as the chart registers it, gives that pod
the chart's ``cellfit-resumed`` PriorityClass. When the trial Job ends, the resumed pod, not the
waiter that has waited longer, gets its GPUs.

Priority alone decides this only when both pods are in kube-scheduler's active queue at once;
a resumed pod still in backoff lost the GPUs to the waiter in CI. cellfit therefore keeps the
room on the node (scheduler/preemption/holds.py). To test that deterministically, the resumed
pod carries a scheduling gate (the Job's template has one; the test lifts it from the first pod
at once): kube-scheduler cannot place it until the test lifts the gate, so the waiter is retried
on the freed GPUs first, and must be kept off with the hold's reason.

cellfit runs here with the chart's config and RBAC (it reads the PriorityClass with the chart's
ServiceAccount token); chart_support.CellfitProcess moves the webhook's listener to a free
loopback port with a certificate made for it.
"""

from __future__ import annotations

import base64
import time
from typing import Any, Iterator

import pytest

from chart_support import (
    CellfitProcess,
    Cluster,
    Release,
    Scenarios,
    ensure_release,
    example_job,
    is_active,
    local_extender,
    wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("resume-")
SCENARIO = SCENARIOS.name("queue")
WHERE = SCENARIOS.selector("queue")
GATE = "e2e.cellfit.io/hold-until-lifted"


def webhook_registration(release: Release, *, port: int, ca_pem: bytes) -> dict[str, Any]:
    """The chart's MutatingWebhookConfiguration, pointed at the local listener and limited to
    this scenario's pods (other tests' cellfit instances must not be asked)."""
    chart = release.find("MutatingWebhookConfiguration")
    webhook = next(w for w in chart["webhooks"] if w["name"].startswith("resumed-pods."))
    assert webhook["clientConfig"]["service"]["path"] == "/v1/admission/pods"
    webhook = {**webhook, "clientConfig": {"url": f"https://127.0.0.1:{port}/v1/admission/pods",
                                           "caBundle": base64.b64encode(ca_pem).decode()}}
    selector = webhook.get("objectSelector") or {}
    webhook["objectSelector"] = {**selector, "matchLabels": {**selector.get("matchLabels", {}), **WHERE}}
    webhook["failurePolicy"] = "Fail"  # here a failing webhook must fail the test, not be ignored
    return {"apiVersion": chart["apiVersion"], "kind": chart["kind"], "metadata": {"name": f"e2e-{SCENARIO}"}, "webhooks": [webhook]}


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, CellfitProcess, Any]]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    SCENARIOS.add_nodes(cluster, "queue")
    registered: list[str] = []

    def register(cellfit: CellfitProcess) -> None:
        assert cellfit.admission_port is not None and cellfit.admission_certificate is not None, "the chart enables the webhook"
        webhook = webhook_registration(release, port=cellfit.admission_port, ca_pem=cellfit.admission_certificate.ca_pem)
        cluster.apply(webhook)
        registered.append(webhook["metadata"]["name"])

    try:
        with local_extender(cluster, release, tmp_path_factory.mktemp(SCENARIO), name="resume", with_cellfit=register) as cellfit:
            yield cluster, release, cellfit, control_plane
    finally:
        for name in registered:
            cluster.kubectl("delete", "mutatingwebhookconfiguration", name, "--ignore-not-found", check=False)
        SCENARIOS.delete_nodes(cluster, ["queue"])


def job(example: str, name: str, scheduler_name: str, **kwargs: Any) -> dict[str, Any]:
    body = example_job(example, name=name, scheduler_name=scheduler_name, node_selector=WHERE, gpus=4, **kwargs)
    body["spec"]["template"]["metadata"].setdefault("labels", {}).update(WHERE)  # the webhook's selector
    return body


def active_pods(cluster: Cluster, ns: str, job_name: str) -> list[dict[str, Any]]:
    return [p for p in cluster.pods(ns, f"job-name={job_name}") if is_active(p) and not p["metadata"].get("deletionTimestamp")]


def one_pod(cluster: Cluster, ns: str, job_name: str, *, bound: bool) -> dict[str, Any] | None:
    pods = [p for p in active_pods(cluster, ns, job_name) if bool(p["spec"].get("nodeName")) == bound]
    return pods[0] if len(pods) == 1 else None


def lift_gate(cluster: Cluster, ns: str, pod: dict[str, Any]) -> None:
    cluster.kubectl("-n", ns, "patch", "pod", pod["metadata"]["name"], "--type=json",
                    "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')


def explain_unbound(cluster: Cluster, ns: str, resumed: dict[str, Any], error: AssertionError, cellfit: CellfitProcess) -> str:
    """Why the resumed pod is still pending: whether the waiter took the GPUs, what the resumed
    pod's events say, and the end of cellfit's log (which a later run's temp dirs replace)."""
    waiter = one_pod(cluster, ns, "be-waiter", bound=True)
    events = [f"{e['reason']}: {e.get('message', '')}" for e in cluster.events(ns, resumed["metadata"]["name"])][-5:]
    return (
        f"{error}\nthe waiter {'was bound to ' + waiter['spec']['nodeName'] if waiter else 'is not bound either'}; "
        f"the resumed pod's last events: {events}\ncellfit's log ({cellfit.log}):\n{cellfit.tail(30)}"
    )


def test_resumed_job_goes_before_best_effort_jobs_that_waited_longer(env: Any) -> None:
    cluster, release, cellfit, cp = env
    ns = cp.create_namespace("resume")
    name = release.scheduler_name
    resumed_class = cluster.kubectl_json("get", "priorityclass", "cellfit-resumed", "-o", "json")
    best_effort = cluster.kubectl_json("get", "priorityclass", "cellfit-best-effort", "-o", "json")
    trial = cluster.kubectl_json("get", "priorityclass", "cellfit-trial", "-o", "json")
    assert best_effort["value"] < resumed_class["value"] < trial["value"]

    # The node fills with two BE Jobs; FitGpp's victim is the one with the shorter grace period.
    victim = job("be-job", "be-victim", name, grace_seconds=20, exit_after="2s")
    victim["spec"]["template"]["spec"]["schedulingGates"] = [{"name": GATE}]
    cluster.apply(victim, namespace=ns)
    lift_gate(cluster, ns, wait_for(lambda: one_pod(cluster, ns, "be-victim", bound=False), 60, "be-victim's pod"))
    wait_for(lambda: one_pod(cluster, ns, "be-victim", bound=True), 60, "be-victim bound")
    cluster.apply(job("be-job", "be-other", name, grace_seconds=300), namespace=ns)
    wait_for(lambda: one_pod(cluster, ns, "be-other", bound=True), 60, "be-other bound")
    # The waiter queues first: kube-scheduler alone would give it the next free GPUs.
    cluster.apply(job("be-job", "be-waiter", name), namespace=ns)
    waiter = wait_for(lambda: one_pod(cluster, ns, "be-waiter", bound=False), 60, "be-waiter pending")
    wait_for(lambda: "FailedScheduling" in {e["reason"] for e in cluster.events(ns, waiter["metadata"]["name"])}, 60,
             "be-waiter tried and refused")
    assert waiter["spec"]["priority"] == best_effort["value"]

    cluster.apply(job("te-job", "te-probe", name, run_for="20s"), namespace=ns)
    resumed = wait_for(lambda: one_pod(cluster, ns, "be-victim", bound=False), 120, "be-victim's new pod")
    # The webhook moved it up, with the class's own value and policy (the API server checks both).
    assert resumed["spec"]["priorityClassName"] == "cellfit-resumed"
    assert resumed["spec"]["priority"] == resumed_class["value"]
    assert resumed["spec"]["preemptionPolicy"] == resumed_class.get("preemptionPolicy", "PreemptLowerPriority")
    assert resumed["metadata"]["labels"]["cellfit.io/job-class"] == "best-effort"  # still BE to FitGpp
    victim_job = cluster.kubectl_json("-n", ns, "get", "job", "be-victim", "-o", "json")
    assert victim_job["metadata"]["annotations"]["cellfit.io/preemptions"] == "1"
    assert cellfit.metric('cellfit_admission_reviews_total{result="resumed"}') >= 1

    # The trial Job ends. The resumed pod is gated, so kube-scheduler retries the waiter on the
    # freed GPUs first: cellfit keeps them, and says so in the waiter's FailedScheduling event.
    wait_for(lambda: not active_pods(cluster, ns, "te-probe"), 120, "the trial Job ended")
    kept = f"its free resources are kept for {ns}/{resumed['metadata']['name']}"
    try:
        wait_for(lambda: any(kept in e.get("message", "") for e in cluster.events(ns, waiter["metadata"]["name"])), 60,
                 "the waiter kept off the held GPUs")
    except AssertionError as error:
        raise AssertionError(explain_unbound(cluster, ns, resumed, error, cellfit)) from None
    assert one_pod(cluster, ns, "be-waiter", bound=False) is not None
    assert cellfit.metric("cellfit_resume_hold_kept_off_total") >= 1

    # The gate lifted, the resumed pod, not the waiter, gets the GPUs.
    lift_gate(cluster, ns, resumed)
    try:
        bound = wait_for(lambda: one_pod(cluster, ns, "be-victim", bound=True), 120, "resumed be-victim bound")
    except AssertionError as error:  # say which way it went: the waiter first, or nobody
        raise AssertionError(explain_unbound(cluster, ns, resumed, error, cellfit)) from None
    assert bound["metadata"]["uid"] == resumed["metadata"]["uid"]
    time.sleep(3)  # kube-scheduler has retried the waiter by now: the node is full again
    assert one_pod(cluster, ns, "be-waiter", bound=False) is not None, "the waiter took the resumed Job's place"
    assert one_pod(cluster, ns, "be-waiter", bound=True) is None

