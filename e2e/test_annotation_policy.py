"""Tenants cannot edit the scheduling state cellfit writes on their Pods and Jobs, against a real
kube-apiserver: the chart's ValidatingAdmissionPolicies (statePolicy, installed by ``helm
install`` with the chart's defaults) refuse a tenant who may edit the namespace's Pods, Jobs and
CronJobs (the ``edit`` ClusterRole, impersonated with ``kubectl --as``) when the request sets,
changes or removes ``cellfit.io/bind-info`` (HiveD's record of the cells and GPUs a pod holds, read
back after every restart) or a Job's ``cellfit.io/preemptions``, on the object or in the Job
template of a CronJob, and the message names the key. The user's own keys (``cellfit.io/gang``,
``cellfit.io/estimate``) and every other edit pass.

The Job controller, acting as its own ServiceAccount, makes no pod from a template carrying
bind-info, nor the CronJob controller a Job from a Job template carrying any of it (so a CronJob is
refused when it is written, not when its schedule fires); cellfit's own ServiceAccount, and an account granted ``write`` on
``scheduling-state.cellfit.io`` by a ClusterRoleBinding (the chart's cellfit ClusterRole, as the
suite's extender-only account has it), may write the state; the same grant through a RoleBinding
in the tenant's namespace does not count.

The objects here are never scheduled (``schedulerName`` of no scheduler, Jobs suspended): only
admission is under test.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Iterator

import pytest

from chart_support import EXTENDER_ONLY_SA, KWOK_TOLERATION, Cluster, Release, ensure_release, wait_for

pytestmark = pytest.mark.e2e

TENANT = "tenant-state"
NOBODY = "e2e-no-scheduler"  # no scheduler serves it: pods stay Pending, unbound
BIND_INFO = "cellfit.io/bind-info"
GPU_INDICES = "cellfit.io/gpu-indices"
PREEMPTIONS = "cellfit.io/preemptions"
# A bind-info as cellfit writes it (scheduler/cells/bindinfo.py): guaranteed cells of VC "vision".
VISION_BIND_INFO = json.dumps({
    "version": 1, "node": "gpu-node-0", "gpuIndices": [0, 1], "vcCell": "gpu-node-0/0", "vc": "vision",
    "priority": "guaranteed", "cellType": "node", "cell": "gpu-node-0/0", "cells": ["gpu-node-0/0/0", "gpu-node-0/0/1"],
}, sort_keys=True, separators=(",", ":"))
REFUSED = "only cellfit writes"
# The users kube-controller-manager's Job controller creates pods as, and its CronJob controller
# Jobs as, with --use-service-account-credentials.
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
CRONJOB_CONTROLLER = "system:serviceaccount:kube-system:cronjob-controller"


def pod(name: str, *, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
        "spec": {"schedulerName": NOBODY, "tolerations": [KWOK_TOLERATION],
                 "containers": [{"name": "c", "image": "busybox"}]},
    }


def job(name: str, *, annotations: dict[str, str] | None = None, template_annotations: dict[str, str] | None = None,
        template_labels: dict[str, str] | None = None, suspend: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "suspend": suspend, "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": template_annotations or {}, "labels": template_labels or {}},
                "spec": {"schedulerName": NOBODY, "restartPolicy": "Never", "tolerations": [KWOK_TOLERATION],
                         "containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }


def cronjob(name: str, *, job_annotations: dict[str, str] | None = None,
            template_annotations: dict[str, str] | None = None,
            template_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A suspended CronJob whose Jobs would be ``job(...)`` with these annotations."""
    made = job(name, annotations=job_annotations, template_annotations=template_annotations,
               template_labels=template_labels, suspend=True)
    return {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "0 0 1 1 *", "suspend": True,
                 "jobTemplate": {"metadata": {"annotations": made["metadata"]["annotations"]}, "spec": made["spec"]}},
    }


def job_of(cronjob: dict[str, Any]) -> dict[str, Any]:
    """The Job the CronJob controller makes from ``cronjob``'s Job template: its metadata and spec,
    owned by the CronJob."""
    template = cronjob["spec"]["jobTemplate"]
    owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": cronjob["metadata"]["name"],
             "uid": cronjob["metadata"]["uid"], "controller": True}
    metadata = {**template["metadata"], "name": f"{cronjob['metadata']['name']}-1", "ownerReferences": [owner]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": template["spec"]}


def template_patch(*, job_annotations: dict[str, str | None] | None = None,
                   template_annotations: dict[str, str | None] | None = None) -> str:
    """A merge patch of a CronJob's Job template (``None`` removes a key)."""
    job_template: dict[str, Any] = {"metadata": {"annotations": job_annotations or {}},
                                    "spec": {"template": {"metadata": {"annotations": template_annotations or {}}}}}
    return json.dumps({"spec": {"jobTemplate": job_template}})


class Namespace:
    """One namespace of the test: kubectl as the cluster admin, as the tenant, as any user."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster = cluster
        self.name = name

    def run(self, *args: str, user: str | None = None, body: dict[str, Any] | None = None) -> Any:
        who = ("--as", user) if user else ()
        return self.cluster.kubectl(*who, "-n", self.name, *args, input=json.dumps(body) if body else None, check=False)

    def create(self, body: dict[str, Any], *, user: str | None = None, dry_run: bool = False) -> Any:
        return self.run("create", *(["--dry-run=server"] if dry_run else []), "-f", "-", user=user, body=body)

    def annotations(self, kind: str, name: str) -> dict[str, str]:
        found = self.cluster.kubectl_json("-n", self.name, "get", kind, name)
        return dict(found["metadata"].get("annotations") or {})


def pod_of(job: dict[str, Any]) -> dict[str, Any]:
    """The pod the Job controller makes from ``job``'s template: its labels and annotations, owned
    by the Job."""
    template = job["spec"]["template"]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
             "uid": job["metadata"]["uid"], "controller": True}
    metadata = {**template["metadata"], "generateName": f"{job['metadata']['name']}-", "ownerReferences": [owner]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def may_write_state(cluster: Cluster, *, user: str, namespace: str = "") -> bool:
    """Whether RBAC grants ``user`` the permission the policies ask for: a SubjectAccessReview of
    what their CEL authorizer call checks, verb ``write`` on ``scheduling-state`` of group
    cellfit.io, cluster-wide unless ``namespace`` is given. Not ``kubectl auth can-i``: it finds no
    API serving the resource and asks about ``scheduling-state.cellfit.io`` of the core group."""
    attributes = {"group": "cellfit.io", "resource": "scheduling-state", "verb": "write", "namespace": namespace}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": user, "groups": ["system:authenticated"], "resourceAttributes": attributes}}
    answer = json.loads(cluster.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(review)).stdout)
    return bool(answer["status"].get("allowed"))


def assert_refused(proc: Any, *keys: str) -> None:
    assert proc.returncode != 0, f"admitted:\n{proc.stdout}"
    assert "Forbidden" in proc.stderr and REFUSED in proc.stderr, proc.stderr
    for key in keys:
        assert key in proc.stderr, proc.stderr


def assert_admitted(proc: Any) -> None:
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def env(control_plane: Any) -> Iterator[tuple[Release, Namespace]]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    policies = [o for o in release.objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-state")]
    assert len(policies) == 3, (
        "the installed release has no statePolicy: it was installed from an older chart; "
        "`helm uninstall cellfit -n cellfit-system` and run again"
    )
    ns = Namespace(cluster, control_plane.create_namespace("state"))
    cluster.kubectl("-n", ns.name, "create", "rolebinding", "tenant-edit", "--clusterrole=edit", f"--user={TENANT}")
    # A policy takes effect once the API server has compiled it (about a second after the install),
    # and the tenant's RoleBinding once RBAC has seen it: wait for the policy's own refusal.
    wait_for(
        lambda: REFUSED in ns.create(pod("probe", annotations={BIND_INFO: VISION_BIND_INFO}), user=TENANT, dry_run=True).stderr,
        60, "the chart's policies to refuse a tenant's bind-info",
    )
    yield release, ns


def test_a_tenant_cannot_create_a_pod_claiming_cells_nor_a_sampling_pod(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    assert_refused(ns.create(pod("claims", annotations={BIND_INFO: VISION_BIND_INFO}), user=TENANT), BIND_INFO)
    assert_refused(ns.create(pod("count", annotations={PREEMPTIONS: "1"}), user=TENANT), PREEMPTIONS)
    assert_refused(ns.create(pod("sampler", labels={"cellfit.io/sample": "true"}), user=TENANT), "label cellfit.io/sample")
    # The user's own keys, and the placement label the Job controller copies into placed pods, pass.
    own = pod("own", annotations={"cellfit.io/gang": "true", "cellfit.io/estimate": '{"gpu":{"seconds":60}}'},
              labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/placement": "gpu"})
    assert_admitted(ns.create(own, user=TENANT))


def test_a_tenant_cannot_rewrite_nor_erase_what_cellfit_wrote_on_a_pod(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    # Written as cellfit's binding writes them; the cluster admin may (cluster-admin holds every verb).
    written = {BIND_INFO: VISION_BIND_INFO, GPU_INDICES: "0,1"}
    assert_admitted(ns.create(pod("bound", annotations=written)))
    other_vc = VISION_BIND_INFO.replace('"vision"', '"speech"')
    assert_refused(ns.run("annotate", "--overwrite", "pod", "bound", f"{BIND_INFO}={other_vc}", user=TENANT), BIND_INFO)
    assert_refused(ns.run("annotate", "pod", "bound", f"{BIND_INFO}-", f"{GPU_INDICES}-", user=TENANT), BIND_INFO, GPU_INDICES)
    assert_refused(ns.run("label", "pod", "bound", "cellfit.io/requeue-signal=true", user=TENANT), "cellfit.io/requeue-signal")
    # Any other edit of the pod passes, the state unchanged in it.
    assert_admitted(ns.run("annotate", "pod", "bound", "team=vision", "cellfit.io/gang-size=2", user=TENANT))
    assert {k: v for k, v in ns.annotations("pod", "bound").items() if k in written} == written


def test_the_status_subresource_is_no_way_around(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    ns.cluster.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "status-writer"},
        "rules": [{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
                  {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["patch"]}],
    }, namespace=ns.name)
    ns.cluster.kubectl("-n", ns.name, "create", "rolebinding", "tenant-status", "--role=status-writer", f"--user={TENANT}")
    assert_admitted(ns.create(pod("status", annotations={BIND_INFO: VISION_BIND_INFO})))
    assert_admitted(ns.create(job("status-job", annotations={PREEMPTIONS: "1"})))
    for kind, name, key in (("pod", "status", BIND_INFO), ("job", "status-job", PREEMPTIONS)):
        patch = json.dumps({"metadata": {"annotations": {key: None}}})
        assert_refused(ns.run("patch", kind, name, "--subresource=status", "--type=merge", "-p", patch, user=TENANT), key)
    assert ns.annotations("pod", "status")[BIND_INFO] == VISION_BIND_INFO
    assert ns.annotations("job", "status-job")[PREEMPTIONS] == "1"


def test_a_binding_cannot_carry_cellfits_state_onto_its_pod(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    # The API server copies a Binding's annotations onto its pod, without admitting the pod again:
    # a tenant who may bind pods (both endpoints) still may not write bind-info that way.
    ns.cluster.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "binder"},
        "rules": [{"apiGroups": [""], "resources": ["bindings", "pods/binding"], "verbs": ["create"]}],
    }, namespace=ns.name)
    ns.cluster.kubectl("-n", ns.name, "create", "rolebinding", "tenant-binder", "--role=binder", f"--user={TENANT}")
    assert_admitted(ns.create(pod("unbound")))

    def binding(annotations: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "unbound", "annotations": annotations},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-0"}}

    claim = binding({BIND_INFO: VISION_BIND_INFO})
    # kubectl finds no schema of a Binding to check it against: the API server checks it.
    assert_refused(ns.run("create", "--validate=false", "-f", "-", user=TENANT, body=claim), BIND_INFO)
    subresource = f"/api/v1/namespaces/{ns.name}/pods/unbound/binding"
    assert_refused(ns.run("create", "--raw", subresource, "-f", "-", user=TENANT, body=claim), BIND_INFO)
    # A Binding carrying none of it, as kube-scheduler's, passes.
    assert_admitted(ns.run("create", "--raw", subresource, "-f", "-", user=TENANT, body=binding({"team": "vision"})))
    assert BIND_INFO not in ns.annotations("pod", "unbound")


def test_a_tenant_cannot_set_nor_erase_a_jobs_preemption_count(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    # A best-effort Job created as preempted P times would be one FitGpp never preempts.
    assert_refused(ns.create(job("immune", annotations={PREEMPTIONS: "1"}), user=TENANT), f"annotation {PREEMPTIONS}")
    assert_refused(ns.create(job("placed", annotations={"cellfit.io/placement": "gpu"}), user=TENANT), "cellfit.io/placement")
    # The count as FitGpp wrote it.
    assert_admitted(ns.create(job("victim", annotations={PREEMPTIONS: "1"})))
    assert_refused(ns.run("annotate", "job", "victim", f"{PREEMPTIONS}-", user=TENANT), PREEMPTIONS)
    assert_refused(ns.run("annotate", "--overwrite", "job", "victim", f"{PREEMPTIONS}=0", user=TENANT), PREEMPTIONS)
    # The user's estimate is the user's to set and change (DESIGN.md's contract).
    assert_admitted(ns.run("annotate", "job", "victim", 'cellfit.io/estimate={"cpu":{"seconds":600}}', "note=x", user=TENANT))
    assert ns.annotations("job", "victim")[PREEMPTIONS] == "1"
    assert_admitted(ns.create(job("estimated", annotations={"cellfit.io/estimate": '{"gpu":{"seconds":60}}'}), user=TENANT))


def test_a_jobs_template_cannot_carry_cellfits_state_to_its_pods(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    assert_refused(ns.create(job("template", template_annotations={BIND_INFO: VISION_BIND_INFO}), user=TENANT),
                   f"spec.template annotation {BIND_INFO}")
    assert_refused(ns.create(job("template-placed", template_labels={"cellfit.io/placement": "gpu"}), user=TENANT),
                   "spec.template label cellfit.io/placement")


def test_the_job_controller_makes_no_pod_from_a_template_carrying_bind_info(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    # Admitted as the cluster admin (say, a Job restored from a backup). The pod is created here as
    # the Job controller's ServiceAccount, which is how kube-controller-manager sends it with
    # --use-service-account-credentials (kubeadm's and managed clusters' setting). The local control
    # plane's kube-controller-manager runs every controller as kwokctl's admin (system:masters,
    # which holds every permission, the write one included), so its own pod would be admitted.
    assert_admitted(ns.create(job("restored", template_annotations={BIND_INFO: VISION_BIND_INFO})))
    restored = ns.cluster.kubectl_json("-n", ns.name, "get", "job", "restored")
    assert_refused(ns.create(pod_of(restored), user=JOB_CONTROLLER), BIND_INFO)
    assert ns.cluster.pods(ns.name, "batch.kubernetes.io/job-name=restored") == []


def test_cellfit_and_accounts_granted_the_write_permission_cluster_wide_may_write(env: tuple[Release, Namespace]) -> None:
    release, ns = env
    assert_admitted(ns.create(job("count", annotations={PREEMPTIONS: "1"})))
    chart_account = f"system:serviceaccount:{release.namespace}:{release.service_account}"
    extender_only = f"system:serviceaccount:{release.namespace}:{EXTENDER_ONLY_SA}"
    # cellfit's own ServiceAccount skips the policy; the suite's extender-only account has only
    # the chart's cellfit ClusterRole, bound cluster-wide, which grants the write permission.
    assert_admitted(ns.run("annotate", "--overwrite", "job", "count", f"{PREEMPTIONS}=2", user=chart_account))
    assert may_write_state(ns.cluster, user=extender_only)
    assert_admitted(ns.run("annotate", "--overwrite", "job", "count", f"{PREEMPTIONS}=3", user=extender_only))
    assert ns.annotations("job", "count")[PREEMPTIONS] == "3"
    # The same permission through a RoleBinding in the tenant's own namespace is not enough.
    writer = f"e2e-state-writer-{uuid.uuid4().hex[:6]}"
    ns.cluster.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": writer},
        "rules": [{"apiGroups": ["cellfit.io"], "resources": ["scheduling-state"], "verbs": ["write"]}],
    })
    try:
        ns.cluster.kubectl("-n", ns.name, "create", "rolebinding", "tenant-writer", f"--clusterrole={writer}", f"--user={TENANT}")
        wait_for(lambda: may_write_state(ns.cluster, user=TENANT, namespace=ns.name),
                 30, "RBAC to see the tenant's namespaced grant of the write permission")
        assert not may_write_state(ns.cluster, user=TENANT)
        assert_refused(ns.run("annotate", "--overwrite", "job", "count", f"{PREEMPTIONS}=0", user=TENANT), PREEMPTIONS)
        assert ns.annotations("job", "count")[PREEMPTIONS] == "3"
    finally:
        ns.cluster.kubectl("delete", "clusterrole", writer, "--ignore-not-found", check=False)


def test_a_cronjobs_job_template_cannot_carry_cellfits_state_to_its_jobs(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    # Refused when the CronJob is written, each key named with the template it sits in, rather than
    # each time the schedule fires.
    assert_refused(ns.create(cronjob("cron-immune", job_annotations={PREEMPTIONS: "1"}), user=TENANT),
                   f"spec.jobTemplate annotation {PREEMPTIONS}")
    assert_refused(ns.create(cronjob("cron-claims", template_annotations={BIND_INFO: VISION_BIND_INFO}), user=TENANT),
                   f"spec.jobTemplate.spec.template annotation {BIND_INFO}")
    booking = "cellfit.io/reclaim-booking"
    assert_refused(ns.create(cronjob("cron-booked", template_annotations={booking: VISION_BIND_INFO}), user=TENANT),
                   f"spec.jobTemplate.spec.template annotation {booking}")
    assert_refused(ns.create(cronjob("cron-placed", template_labels={"cellfit.io/placement": "gpu"}), user=TENANT),
                   "spec.jobTemplate.spec.template label cellfit.io/placement")
    # The user's own keys pass, in either template.
    own = cronjob("cron-own", job_annotations={"cellfit.io/estimate": '{"gpu":{"seconds":60}}'},
                  template_annotations={"cellfit.io/gang": "true"}, template_labels={"cellfit.io/virtual-cluster": "vision"})
    assert_admitted(ns.create(own, user=TENANT))
    assert_admitted(ns.run("patch", "cronjob", "cron-own", "--type=merge", "-p", '{"spec":{"schedule":"0 0 2 1 *"}}', user=TENANT))


def test_a_tenant_cannot_rewrite_nor_erase_what_a_cronjobs_template_carries(env: tuple[Release, Namespace]) -> None:
    _, ns = env
    # Written by the cluster admin (say, restored from a backup).
    assert_admitted(ns.create(cronjob("cron-restored", job_annotations={PREEMPTIONS: "1"},
                                      template_annotations={BIND_INFO: VISION_BIND_INFO})))
    erase = template_patch(job_annotations={PREEMPTIONS: None}, template_annotations={BIND_INFO: None})
    assert_refused(ns.run("patch", "cronjob", "cron-restored", "--type=merge", "-p", erase, user=TENANT),
                   f"spec.jobTemplate annotation {PREEMPTIONS}", f"spec.jobTemplate.spec.template annotation {BIND_INFO}")
    rewrite = template_patch(template_annotations={BIND_INFO: VISION_BIND_INFO.replace('"vision"', '"speech"')})
    assert_refused(ns.run("patch", "cronjob", "cron-restored", "--type=merge", "-p", rewrite, user=TENANT), BIND_INFO)
    # Any other edit passes, the template's state unchanged.
    assert_admitted(ns.run("patch", "cronjob", "cron-restored", "--type=merge", "-p", '{"spec":{"schedule":"0 0 3 1 *"}}',
                           user=TENANT))
    stored = ns.cluster.kubectl_json("-n", ns.name, "get", "cronjob", "cron-restored")["spec"]["jobTemplate"]
    assert stored["metadata"]["annotations"][PREEMPTIONS] == "1"
    assert stored["spec"]["template"]["metadata"]["annotations"][BIND_INFO] == VISION_BIND_INFO
    # Why the CronJob is refused when it is written: the CronJob controller, acting as its own
    # ServiceAccount, could make none of its Jobs (the local control plane's acts as system:masters).
    restored = ns.cluster.kubectl_json("-n", ns.name, "get", "cronjob", "cron-restored")
    assert_refused(ns.create(job_of(restored), user=CRONJOB_CONTROLLER), f"annotation {PREEMPTIONS}", BIND_INFO)


def test_cellfit_and_accounts_granted_the_write_permission_may_write_a_cronjobs_template(
    env: tuple[Release, Namespace],
) -> None:
    release, ns = env
    chart_account = f"system:serviceaccount:{release.namespace}:{release.service_account}"
    extender_only = f"system:serviceaccount:{release.namespace}:{EXTENDER_ONLY_SA}"
    # Neither account may write CronJobs otherwise (cellfit never does): the namespace's edit role
    # lets them, and the policy alone decides.
    for name, account in (("cron-cellfit", release.service_account), ("cron-granted", EXTENDER_ONLY_SA)):
        ns.cluster.kubectl("-n", ns.name, "create", "rolebinding", f"{name}-edit", "--clusterrole=edit",
                           f"--serviceaccount={release.namespace}:{account}")
    wait_for(lambda: all(ns.run("auth", "can-i", "patch", "cronjobs", user=account).returncode == 0
                         for account in (chart_account, extender_only)),
             30, "RBAC to see the accounts' edit grants")
    assert may_write_state(ns.cluster, user=extender_only)
    for name, account in (("cron-cellfit", chart_account), ("cron-granted", extender_only)):
        written = cronjob(name, job_annotations={PREEMPTIONS: "1"}, template_annotations={BIND_INFO: VISION_BIND_INFO})
        assert_admitted(ns.create(written, user=account))
        assert_admitted(ns.run("patch", "cronjob", name, "--type=merge", "-p",
                               template_patch(job_annotations={PREEMPTIONS: "2"}), user=account))
        stored = ns.cluster.kubectl_json("-n", ns.name, "get", "cronjob", name)["spec"]["jobTemplate"]
        assert stored["metadata"]["annotations"][PREEMPTIONS] == "2"
