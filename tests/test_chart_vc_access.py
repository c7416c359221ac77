"""Who may name a virtual cluster (charts/cellfit/templates/vc-access-policy.yaml), rendered offline
(helm from tests/test_chart_offline.py): off by default ("open"), one policy and its binding in
"namespace" mode, the label the code reads, the values refused at render.

What the CEL expressions decide runs only in an API server: e2e/test_vc_access_policy.py."""

from __future__ import annotations

import pytest

from scheduler import constants
from tests.test_chart_offline import helm, one, render, render_args

NAMESPACE_MODE = ("--set", "virtualClusterAccess.mode=namespace")


def test_open_by_default_so_no_existing_install_changes():
    assert not [d for d in render() if d["metadata"]["name"].endswith("-vc-access")]


def test_namespace_mode_renders_a_policy_on_pods_and_jobs_and_its_binding():
    docs = render(*NAMESPACE_MODE)
    policy = one(docs, "ValidatingAdmissionPolicy", "-vc-access")
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "-vc-access")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert sorted((r["apiGroups"][0], r["resources"][0], tuple(r["operations"])) for r in rules) == [
        ("", "pods", ("CREATE", "UPDATE")), ("batch", "jobs", ("CREATE", "UPDATE"))]
    assert policy["spec"]["failurePolicy"] == "Fail"
    expressions = " ".join(v["expression"] for v in policy["spec"]["variables"])
    # The label HiveD reads a pod's VC from (scheduler/cells/request.py), on the pod and on the
    # namespace (the label the cell exchange reads as the namespace's VC).
    assert expressions.count(f"[?'{constants.LABEL_VIRTUAL_CLUSTER}']") == 3
    (validation,) = policy["spec"]["validations"]
    assert validation["reason"] == "Forbidden" and 'in ["default"]' in validation["expression"]


def test_open_virtual_clusters_and_actions_are_rendered():
    docs = render(*NAMESPACE_MODE, "--set-json", 'virtualClusterAccess.openVirtualClusters=["default","shared"]',
                  "--set-json", 'virtualClusterAccess.validationActions=["Warn","Audit"]')
    (validation,) = one(docs, "ValidatingAdmissionPolicy", "-vc-access")["spec"]["validations"]
    assert 'in ["default","shared"]' in validation["expression"]
    assert one(docs, "ValidatingAdmissionPolicyBinding", "-vc-access")["spec"]["validationActions"] == ["Warn", "Audit"]


@pytest.mark.parametrize(
    ("values", "named"),
    [
        (("--set", "virtualClusterAccess.mode=strict"), "virtualClusterAccess"),
        (("--set-json", 'virtualClusterAccess.validationActions=["Deny","Warn"]'), "validationActions"),
        (("--set-json", "virtualClusterAccess.validationActions=[]"), "validationActions"),
        (("--set-json", 'virtualClusterAccess.openVirtualClusters=["a b"]'), "openVirtualClusters"),
    ],
)
def test_values_that_would_not_work_are_refused_at_render(values: tuple[str, ...], named: str):
    proc = helm(*render_args(*values), check=False)
    assert proc.returncode != 0 and named in proc.stderr, proc.stderr
