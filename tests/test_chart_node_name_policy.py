"""The chart's nodeNamePolicy (charts/cellfit/templates/node-name-policy.yaml; helm from
tests/test_chart_offline.py): a pod asking for GPUs with spec.nodeName set never meets a scheduler
and takes a node's GPUs outside cellfit's accounting, so the API server refuses it (the CEL's
verdicts are checked against a real kube-apiserver in e2e/test_node_name_policy.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_chart_offline import helm, render, render_args

POLICY = "cellfit-node-name"


def policy_and_binding(docs: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    def named(kind: str) -> dict[str, Any] | None:
        return next((d for d in docs if d.get("kind") == kind and d["metadata"]["name"] == POLICY), None)

    return named("ValidatingAdmissionPolicy"), named("ValidatingAdmissionPolicyBinding")


def test_the_policy_is_on_by_default_and_refuses() -> None:
    policy, binding = policy_and_binding(render())
    assert policy is not None and binding is not None
    assert binding["spec"] == {"policyName": POLICY, "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    conditions = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}
    assert "nodeName" in conditions["placed-without-a-scheduler"]
    assert "system:node:" in conditions["not-a-kubelets-mirror-pod"]
    assert conditions["not-cellfit-itself"] == "request.userInfo.username != 'system:serviceaccount:cellfit-system:cellfit'"
    (validation,) = policy["spec"]["validations"]
    assert validation["expression"] == "authorizer.group('cellfit.io').resource('scheduling-state').check('write').allowed()"


def test_the_gpu_resource_is_the_one_cellfit_is_configured_with() -> None:
    policy, _ = policy_and_binding(render("--set", "policy.gpuResourceName=amd.com/gpu"))
    assert policy is not None
    gpus = next(c["expression"] for c in policy["spec"]["matchConditions"] if c["name"] == "asks-for-gpus")
    assert '"amd.com/gpu" in' in gpus and "nvidia.com/gpu" not in gpus
    assert "amd.com/gpu" in policy["spec"]["validations"][0]["messageExpression"]


def test_it_may_be_switched_off_or_only_warn() -> None:
    assert policy_and_binding(render("--set", "nodeNamePolicy.enabled=false")) == (None, None)
    _, binding = policy_and_binding(render("--set-json", 'nodeNamePolicy.validationActions=["Warn","Audit"]'))
    assert binding is not None and binding["spec"]["validationActions"] == ["Warn", "Audit"]


@pytest.mark.parametrize("actions", ['["Deny","Warn"]', '[]', '["Refuse"]'])
def test_validation_actions_the_api_server_refuses_are_refused_at_render(actions: str) -> None:
    proc = helm(*render_args("--set-json", f"nodeNamePolicy.validationActions={actions}"), check=False)
    assert proc.returncode != 0 and "nodeNamePolicy" in proc.stderr, proc.stderr
