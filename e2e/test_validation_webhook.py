"""cellfit's labels and annotations validated where the user is (issue 18 item 4), on a live API
server: the chart's ValidatingWebhookConfiguration (its rules and matchConditions as rendered,
pointed at cellfit's webhook listener here, see chart_support.CellfitProcess) answers
``kubectl apply`` of a Pod or a Job with a mistake with a warning naming the field, or, with
``admission.rejectInvalid``, the API server refuses it with that message. A pod with no cellfit
key and another scheduler is never sent (the matchConditions, evaluated by the API server).

A CronJob is checked when it is applied, as the Jobs it will create (its spec.jobTemplate), not
when its schedule fires; one of another scheduler only hears its cellfit.io/ keys are unread; one
with neither a cellfit.io/ key nor cellfit's scheduler, whose Job template has no metadata, is
never sent (and the matchCondition does not err on the absent metadata: registered here with
failurePolicy Fail, an error would refuse it).

And on a full node, where kube-scheduler's own resource check turns the node away before
cellfit's filter is asked, a trial pod with a mistake preempts nobody, and an Event on the pod
says why (before, FitGpp preempted a best-effort pod for it all the same).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Iterator

import pytest
import yaml

from chart_support import (
    CellfitProcess,
    Cluster,
    Release,
    Scenarios,
    ensure_release,
    gpu_pod,
    is_active,
    local_extender,
    wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("validation-")
ABC = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"}
# Each registration sees only objects labelled for it: the warning and the refusing cellfit must
# never both answer one request, and other modules' cellfits never see these.
WARN = {"e2e.cellfit.io/validation": f"warn-{SCENARIOS.run}"}
REJECT = {"e2e.cellfit.io/validation": f"reject-{SCENARIOS.run}"}


def registration(release: Release, *, name: str, port: int, ca_pem: bytes, only: dict[str, str]) -> dict[str, Any]:
    """The chart's ValidatingWebhookConfiguration, rules and matchConditions unchanged, pointed
    at the local listener and narrowed to objects labelled ``only``."""
    chart = release.find("ValidatingWebhookConfiguration")
    webhooks = []
    for webhook in chart["webhooks"]:
        path = webhook["clientConfig"]["service"]["path"]
        selector = webhook.get("objectSelector") or {}
        webhooks.append({
            **webhook,
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca_pem).decode()},
            "objectSelector": {**selector, "matchLabels": {**selector.get("matchLabels", {}), **only}},
            "failurePolicy": "Fail",  # here a webhook that cannot be reached must fail the test, not be ignored
        })
    return {"apiVersion": chart["apiVersion"], "kind": chart["kind"], "metadata": {"name": name}, "webhooks": webhooks}


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, CellfitProcess, CellfitProcess]]:
    """(cluster, release, warning cellfit with the chart's kube-scheduler, refusing cellfit):
    both cellfits run the chart's configuration, the second with rejectInvalid."""
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    SCENARIOS.add_nodes(cluster, "full")  # discovered by HiveD when cellfit starts
    workdir = tmp_path_factory.mktemp(f"validation-{SCENARIOS.run}")
    registered: list[str] = []

    def register(cellfit: CellfitProcess, *, name: str, only: dict[str, str]) -> None:
        assert cellfit.admission_port is not None and cellfit.admission_certificate is not None, "the chart enables the webhook"
        body = registration(release, name=name, port=cellfit.admission_port, ca_pem=cellfit.admission_certificate.ca_pem, only=only)
        cluster.apply(body)
        registered.append(name)

    config = yaml.safe_load(release.cellfit_config_text)
    config["admission"] = {**config["admission"], "rejectInvalid": True}
    refusing = CellfitProcess(
        yaml.safe_dump(config),
        cluster.token_kubeconfig("cellfit-extender-only", release.namespace, workdir / "refusing.kubeconfig"),
        workdir,
        name="validation-refusing",
    )
    try:
        refusing.start()
        register(refusing, name=f"e2e-validation-reject-{SCENARIOS.run}", only=REJECT)
        with local_extender(cluster, release, workdir, name="validation",
                            with_cellfit=lambda c: register(c, name=f"e2e-validation-warn-{SCENARIOS.run}", only=WARN)) as warning:
            yield cluster, release, warning, refusing
    finally:
        for name in registered:
            cluster.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False)
        refusing.stop()
        SCENARIOS.delete_nodes(cluster, ["full"])


def apply(cluster: Cluster, body: dict[str, Any], namespace: str, *, check: bool = True) -> tuple[int, str]:
    """``kubectl apply`` as a user runs it: (exit status, what it printed on stderr)."""
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body), check=False)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc.returncode, proc.stderr


def suspended_job(name: str, *, labels: dict[str, str], template_annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
        "spec": {"suspend": True, "template": {
            "metadata": {"labels": labels, "annotations": template_annotations},
            "spec": {"restartPolicy": "Never", "schedulerName": "cellfit",
                     "containers": [{"name": "trainer", "image": "trainer:fake",
                                     "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1", "memory": "1Gi"}}}]},
        }},
    }


def owned_pod(name: str, job: dict[str, Any], *, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    """A pod of ``job`` (created here rather than by the suspended Job's controller, as a
    user's ``kubectl apply`` would), 2 GPUs, on no node."""
    body = gpu_pod(name, scheduler_name="cellfit", node_selector={"e2e.cellfit.io/nowhere": "true"}, gpus=2,
                   labels=labels, annotations=annotations)
    body["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
                                            "uid": job["metadata"]["uid"], "controller": True}]
    return body


def validations(cellfit: CellfitProcess, kind: str, result: str) -> float:
    return cellfit.metric(f'cellfit_admission_validations_total{{kind="{kind}",result="{result}"}}')


def test_kubectl_apply_prints_a_warning_naming_the_field(env: Any, control_plane: Any) -> None:
    cluster, _, warning, _ = env
    ns = control_plane.create_namespace("validation")
    _, printed = apply(cluster, suspended_job("train", labels=WARN, template_annotations=ABC), ns)
    assert "Warning: cellfit: spec.template.metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer" in printed, printed
    job = cluster.kubectl_json("-n", ns, "get", "job", "train")  # admitted: a warning, not a refusal
    _, printed = apply(cluster, owned_pod("train-x7k2q", job, labels=WARN, annotations=ABC), ns)
    assert "Warning: cellfit: metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer" in printed, printed
    assert cluster.kubectl_json("-n", ns, "get", "pod", "train-x7k2q")["metadata"]["annotations"]["cellfit.io/gang-size"] == "abc"
    assert validations(warning, "job", "warned") == 1 and validations(warning, "pod", "warned") == 1
    # Neither a cellfit.io/ key nor cellfit's scheduler: the API server does not call cellfit.
    plain = gpu_pod("plain", scheduler_name="default-scheduler", node_selector={"e2e.cellfit.io/nowhere": "true"}, gpus=1, labels=WARN)
    _, printed = apply(cluster, plain, ns)
    assert "cellfit" not in printed
    assert validations(warning, "pod", "valid") == 0 and validations(warning, "pod", "warned") == 1


def test_with_reject_invalid_the_api_server_refuses_naming_the_field(env: Any, control_plane: Any) -> None:
    cluster, _, _, refusing = env
    ns = control_plane.create_namespace("validation")
    apply(cluster, suspended_job("urgent", labels=REJECT, template_annotations={}), ns)  # nothing wrong with this one
    job = cluster.kubectl_json("-n", ns, "get", "job", "urgent")
    code, printed = apply(cluster, owned_pod("urgent-x7k2q", job, labels=REJECT, annotations=ABC), ns, check=False)
    assert code != 0
    assert ('admission webhook "validated-pods.admission.cellfit.io" denied the request: cellfit refuses this pod '
            "(admission.rejectInvalid): metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer") in printed, printed
    assert cluster.kubectl("-n", ns, "get", "pod", "urgent-x7k2q", check=False).returncode != 0
    bad_job = suspended_job("worse", labels={**REJECT, "cellfit.io/priority": "urgent"}, template_annotations={})
    code, printed = apply(cluster, bad_job, ns, check=False)
    assert code != 0
    assert ('admission webhook "validated-jobs.admission.cellfit.io" denied the request: cellfit refuses this job '
            "(admission.rejectInvalid): spec.template.metadata.labels[cellfit.io/priority]: 'urgent' is not 'guaranteed' or "
            "'opportunistic'") in printed, printed
    assert validations(refusing, "pod", "rejected") == 1 and validations(refusing, "job", "rejected") == 1


def cronjob(name: str, *, labels: dict[str, str], template_annotations: dict[str, str], scheduler_name: str = "cellfit",
            job_metadata: bool = True) -> dict[str, Any]:
    """A suspended CronJob (it never fires here) whose Jobs are :func:`suspended_job`'s."""
    job = suspended_job(name, labels=labels, template_annotations=template_annotations)
    job["spec"]["template"]["spec"]["schedulerName"] = scheduler_name
    template: dict[str, Any] = {"spec": job["spec"]}
    if job_metadata:
        template["metadata"] = {"labels": labels}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "labels": labels},
            "spec": {"schedule": "0 3 * * *", "suspend": True, "jobTemplate": template}}


def test_a_cronjob_is_checked_when_applied_as_the_jobs_it_will_create(env: Any, control_plane: Any) -> None:
    cluster, _, warning, refusing = env
    ns = control_plane.create_namespace("validation")
    gang = "spec.jobTemplate.spec.template.metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer"
    _, printed = apply(cluster, cronjob("nightly", labels=WARN, template_annotations=ABC), ns)
    assert f"Warning: cellfit: {gang}" in printed, printed
    code, printed = apply(cluster, cronjob("refused", labels=REJECT, template_annotations=ABC), ns, check=False)
    assert code != 0
    assert ('admission webhook "validated-cronjobs.admission.cellfit.io" denied the request: cellfit refuses this cronjob '
            f"(admission.rejectInvalid): {gang}") in printed, printed
    assert cluster.kubectl("-n", ns, "get", "cronjob", "refused", check=False).returncode != 0
    theirs = cronjob("theirs", labels=REJECT, template_annotations=ABC, scheduler_name="default-scheduler")
    _, printed = apply(cluster, theirs, ns)
    assert ("Warning: cellfit: spec.jobTemplate.spec.template.spec.schedulerName: 'default-scheduler' schedules this pod, "
            "not cellfit ('cellfit'): its cellfit.io/ labels and annotations are not read") in printed, printed
    plain = cronjob("plain", labels=WARN, template_annotations={}, scheduler_name="default-scheduler", job_metadata=False)
    _, printed = apply(cluster, plain, ns)
    assert "cellfit" not in printed
    assert validations(warning, "cronjob", "warned") == 1 and validations(warning, "cronjob", "valid") == 0
    assert validations(refusing, "cronjob", "rejected") == 1 and validations(refusing, "cronjob", "warned") == 1


def test_on_a_full_node_a_trial_pod_with_a_mistake_preempts_nobody_and_is_told_why(env: Any, control_plane: Any) -> None:
    cluster, release, _, _ = env
    ns = control_plane.create_namespace("validation")
    where = SCENARIOS.selector("full")
    scheduler = release.scheduler_name
    filler = gpu_pod("be-filler", scheduler_name=scheduler, node_selector=where, gpus=8, priority_class="cellfit-best-effort",
                     labels={"cellfit.io/job-class": "best-effort"})
    cluster.apply(filler, namespace=ns)
    wait_for(lambda: cluster.kubectl_json("-n", ns, "get", "pod", "be-filler")["spec"].get("nodeName"), 60, "the filler bound")
    filler_uid = cluster.kubectl_json("-n", ns, "get", "pod", "be-filler")["metadata"]["uid"]
    urgent = gpu_pod("te-urgent", scheduler_name=scheduler, node_selector=where, gpus=8, priority_class="cellfit-trial",
                     labels={"cellfit.io/job-class": "trial", "cellfit.io/priority": "urgent"})
    cluster.apply(urgent, namespace=ns)

    def refused() -> list[str]:
        return [e["message"] for e in cluster.events(ns, "te-urgent") if e["reason"] == "PreemptionRefused"]

    (message,) = wait_for(refused, 90, "cellfit's PreemptionRefused event on te-urgent")
    assert message == ("cellfit cannot place this pod as written, so it preempts no one for it: "
                       "label cellfit.io/priority: 'urgent' is not 'guaranteed' or 'opportunistic'")
    events = cluster.events(ns, "te-urgent")
    assert any(e["reason"] == "FailedScheduling" and "Insufficient nvidia.com/gpu" in e.get("message", "") for e in events), events
    # Nobody was preempted for a pod that could not have used the GPUs.
    filler_now = cluster.kubectl_json("-n", ns, "get", "pod", "be-filler")
    assert is_active(filler_now) and filler_now["metadata"]["uid"] == filler_uid
