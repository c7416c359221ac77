"""Who may name a virtual cluster, against a real kube-apiserver: the chart's policy
(charts/cellfit/templates/vc-access-policy.yaml, ``virtualClusterAccess.mode: namespace``, rendered
by ``helm template`` and applied here, removed after) admits a Pod or a Job's pod template naming a
VC (label ``cellfit.io/virtual-cluster``) only in a namespace labelled with that VC, or naming an
open VC (``default``); a pod naming none is admitted as before; relabelling a pod to another VC is
refused, any other update of it is not. The policy exempts nobody, so the cluster admin kubectl
runs as is refused too.

The objects here are never scheduled (``schedulerName`` of no scheduler, Jobs suspended): only
admission is under test.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from chart_support import CHART, KWOK_TOLERATION, Cluster, wait_for

pytestmark = pytest.mark.e2e

VC = "cellfit.io/virtual-cluster"
NOBODY = "e2e-no-scheduler"


def pod(name: str, *, vc: str | None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {VC: vc} if vc else {}},
            "spec": {"schedulerName": NOBODY, "tolerations": [KWOK_TOLERATION], "containers": [{"name": "c", "image": "busybox"}]}}


def job(name: str, *, vc: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"suspend": True, "backoffLimit": 0,
                     "template": {"metadata": {"labels": {VC: vc}},
                                  "spec": {"schedulerName": NOBODY, "restartPolicy": "Never", "tolerations": [KWOK_TOLERATION],
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}


class Env:
    def __init__(self, cluster: Cluster, *, owned: str, plain: str) -> None:
        self.cluster, self.owned, self.plain = cluster, owned, plain

    def create(self, namespace: str, body: dict[str, Any], *, dry_run: bool = True) -> Any:
        return self.cluster.kubectl("-n", namespace, "create", *(["--dry-run=server"] if dry_run else []), "-f", "-",
                                    input=json.dumps(body), check=False)


def admitted(proc: Any) -> None:
    assert proc.returncode == 0, proc.stderr


def refused(proc: Any, *words: str) -> None:
    assert proc.returncode != 0, f"admitted:\n{proc.stdout}"
    assert "ValidatingAdmissionPolicy" in proc.stderr and "Forbidden" in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def env(control_plane: Any) -> Iterator[Env]:
    cluster = Cluster.from_control_plane(control_plane)
    rendered = cluster.helm("template", "cellfit", str(CHART), "-n", "cellfit-system", "--set", "virtualClusterAccess.mode=namespace",
                            "--show-only", "templates/vc-access-policy.yaml").stdout
    owned, plain = control_plane.create_namespace("vc-a"), control_plane.create_namespace("vc-none")
    cluster.kubectl("label", "namespace", owned, f"{VC}=a")
    cluster.kubectl("apply", "-f", "-", input=rendered)
    here = Env(cluster, owned=owned, plain=plain)
    try:
        # A policy acts once the API server has compiled it, about a second after it is created.
        wait_for(lambda: here.create(owned, pod("probe", vc="b")).returncode != 0, 60, "the policy to refuse another VC")
        yield here
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", input=rendered, check=False)


def test_a_pod_may_name_its_namespaces_vc_and_an_open_one_only(env: Env) -> None:
    admitted(env.create(env.owned, pod("mine", vc="a")))
    refused(env.create(env.owned, pod("theirs", vc="b")), "names virtual cluster b", "the namespace is virtual cluster a's")
    refused(env.create(env.plain, pod("claimed", vc="a")), "names virtual cluster a", "the namespace names no virtual cluster")
    admitted(env.create(env.plain, pod("shared", vc="default")))
    admitted(env.create(env.plain, pod("unnamed", vc=None)))


def test_a_jobs_template_is_held_to_the_same(env: Env) -> None:
    admitted(env.create(env.owned, job("mine", vc="a")))
    refused(env.create(env.owned, job("theirs", vc="b")), "Job names virtual cluster b")


def test_a_pod_cannot_be_relabelled_to_another_vc_and_other_updates_pass(env: Env) -> None:
    admitted(env.create(env.owned, pod("running", vc="a"), dry_run=False))
    relabel = env.cluster.kubectl("-n", env.owned, "label", "--overwrite", "pod", "running", f"{VC}=b", check=False)
    refused(relabel, "names virtual cluster b")
    admitted(env.cluster.kubectl("-n", env.owned, "annotate", "pod", "running", "note=kept", check=False))
    assert env.cluster.kubectl_json("-n", env.owned, "get", "pod", "running")["metadata"]["labels"][VC] == "a"
