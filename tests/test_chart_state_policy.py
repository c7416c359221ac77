"""The chart's ValidatingAdmissionPolicies over cellfit's scheduling state (charts/cellfit/templates/
state-policy.yaml), rendered offline (helm from tests/test_chart_offline.py): they guard exactly the
keys cellfit alone writes, each key of the code is either guarded or the user's, a CronJob's Job
template as the Jobs it makes, only cellfit's ServiceAccount skips them, and a writer needs the
permission the chart grants cellfit's ClusterRole.

What the CEL expressions decide runs only in an API server: e2e/test_annotation_policy.py."""

from __future__ import annotations

import re
from typing import Any

import pytest

import estimator.objects as sampling
from scheduler import constants
from scheduler.extender.validation import ANNOTATION_KEYS, LABEL_KEYS
from tests.test_chart_offline import NONDEFAULT_VALUES, RENDER_NAMESPACE, helm, one, render, render_args

# What users write (DESIGN.md, "The user's contract"): never guarded. cellfit.io/estimate is the
# user's too (known processing times), though cellfit writes it when it samples; gang-size is
# written by users, or by the placer into a template the user's Job already owns.
USER_ANNOTATIONS = frozenset({
    constants.ANNOTATION_CELL_TYPE, constants.ANNOTATION_GANG, constants.ANNOTATION_GANG_SIZE,
    constants.ANNOTATION_CONFIGURATIONS, constants.ANNOTATION_ITERATIONS, constants.ANNOTATION_ESTIMATE,
})
USER_LABELS = frozenset({
    constants.LABEL_VIRTUAL_CLUSTER, constants.LABEL_JOB_CLASS, constants.LABEL_PRIORITY, sampling.LABEL_JOB_FAMILY,
})
# On any pod, whoever creates it: the binding's record, the reclaim's booking of a pending pod,
# FitGpp's record of its preemptor's node, FitGpp's count (read on a pod of no Job),
# the estimator's sampling pods, the nudge's requeue signal.
POD_ANNOTATIONS = frozenset({
    constants.ANNOTATION_BIND_INFO, constants.ANNOTATION_GPU_INDICES, constants.ANNOTATION_RECLAIM_BOOKING,
    constants.ANNOTATION_PREEMPTOR_HOLD, constants.ANNOTATION_PREEMPTIONS,
    sampling.ANNOTATION_SAMPLE_CONFIGURATION, sampling.ANNOTATION_SAMPLE_DIGEST, sampling.ANNOTATION_SAMPLE_PILOT,
    sampling.ANNOTATION_SAMPLE_LENGTH, sampling.ANNOTATION_SAMPLE_ATTEMPT, sampling.ANNOTATION_SAMPLE_ITERATIONS,
    sampling.ANNOTATION_SAMPLE_SPLIT_ITERATIONS,
})
POD_LABELS = frozenset({sampling.LABEL_SAMPLE, sampling.LABEL_SAMPLE_JOB, constants.LABEL_REQUEUE_SIGNAL})
JOB_ANNOTATIONS = frozenset({
    constants.ANNOTATION_PLACEMENT, constants.ANNOTATION_PREEMPTIONS, sampling.ANNOTATION_SAMPLING, constants.ANNOTATION_PODS_BOUND,
    constants.ANNOTATION_RESUME_HOLDS, constants.ANNOTATION_GANG_PREEMPTED,
})
# The placer's label on a placed Job's template, and the containers it configures beside it:
# guarded on the Job, not on its pods, which the Job controller makes from that template.
TEMPLATE_LABELS = POD_LABELS | {constants.LABEL_PLACEMENT}
TEMPLATE_ANNOTATIONS = POD_ANNOTATIONS | {constants.ANNOTATION_CONFIGURED_CONTAINERS}

# "[...].filter(k, ...).map(k, '<what> ' + k)": one guarded list of the `changed` variable.
_GUARDED = re.compile(r"\[([^\]]*)\]\.filter\(k, .*?\)\.map\(k, '([^']+) ' \+ k\)")
_WRITER_CHECK = "authorizer.group('cellfit.io').resource('scheduling-state').check('write').allowed()"


def _state(doc: dict[str, Any], kind: str = "ValidatingAdmissionPolicy") -> bool:
    """One of statePolicy's objects (the chart has other policies: nodeNamePolicy's, the VC access one)."""
    return doc["kind"] == kind and str(doc["metadata"]["name"]).endswith("-state")


def _policies(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if _state(d)}


def _variable(policy: dict[str, Any], name: str) -> str:
    (expression,) = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == name]
    return str(expression)


def guarded(policy: dict[str, Any]) -> dict[str, set[str]]:
    """What the policy's `changed` variable compares, by what it calls each key ("annotation",
    "spec.template label", ...)."""
    found: dict[str, set[str]] = {}
    for keys, what in _GUARDED.findall(_variable(policy, "changed")):
        assert what not in found, f"{what} listed twice"
        found[what] = {key.strip().strip("'") for key in keys.split(",")}
    return found


@pytest.fixture(scope="module")
def policies() -> dict[str, dict[str, Any]]:
    return _policies(render())


def test_every_cellfit_key_is_either_guarded_or_a_users() -> None:
    # A key added to scheduler/constants.py or estimator/objects.py fails here until someone says
    # who writes it.
    assert ANNOTATION_KEYS == USER_ANNOTATIONS | TEMPLATE_ANNOTATIONS | JOB_ANNOTATIONS
    assert LABEL_KEYS == USER_LABELS | TEMPLATE_LABELS
    assert not (USER_ANNOTATIONS & (TEMPLATE_ANNOTATIONS | JOB_ANNOTATIONS)) and not (USER_LABELS & TEMPLATE_LABELS)


def test_pods_guard_the_keys_only_cellfit_puts_on_a_pod(policies: dict[str, dict[str, Any]]) -> None:
    assert guarded(policies["cellfit-pod-state"]) == {"annotation": set(POD_ANNOTATIONS), "label": set(POD_LABELS)}


def test_jobs_guard_their_own_keys_and_those_of_the_pods_their_template_makes(policies: dict[str, dict[str, Any]]) -> None:
    assert guarded(policies["cellfit-job-state"]) == {
        "annotation": set(JOB_ANNOTATIONS),
        "spec.template annotation": set(TEMPLATE_ANNOTATIONS),
        "spec.template label": set(TEMPLATE_LABELS),
    }


def _in_job_template(what: str) -> str:
    """What the Job policy calls a key of a Job ("annotation", "spec.template label"), as the key
    sits in a CronJob's Job template."""
    return f"spec.jobTemplate.{what}" if what.startswith("spec.") else f"spec.jobTemplate {what}"


def test_a_cronjobs_job_template_guards_what_the_jobs_it_makes_guard(policies: dict[str, dict[str, Any]]) -> None:
    # The CronJob controller copies spec.jobTemplate's metadata onto each Job and its spec into it,
    # acting as its own ServiceAccount, which the Job policy refuses: the same keys are refused on
    # the CronJob, named from it, when it is written instead of when its schedule fires.
    cronjob = guarded(policies["cellfit-cronjob-state"])
    assert cronjob == {
        "spec.jobTemplate annotation": set(JOB_ANNOTATIONS),
        "spec.jobTemplate.spec.template annotation": set(TEMPLATE_ANNOTATIONS),
        "spec.jobTemplate.spec.template label": set(TEMPLATE_LABELS),
    }
    job = guarded(policies["cellfit-job-state"])
    assert cronjob == {_in_job_template(what): keys for what, keys in job.items()}


def test_each_map_is_compared_between_the_request_and_the_stored_object(policies: dict[str, dict[str, Any]]) -> None:
    # The old map is empty on CREATE (oldObject null): a key set at creation counts as set.
    job = policies["cellfit-job-state"]
    assert _variable(job, "newTemplateLabels") == "object.spec.template.?metadata.?labels.orValue({})"
    assert _variable(job, "oldTemplateLabels") == "oldObject == null ? {} : oldObject.spec.template.?metadata.?labels.orValue({})"
    pod = policies["cellfit-pod-state"]
    assert _variable(pod, "newAnnotations") == "object.metadata.?annotations.orValue({})"
    assert _variable(pod, "oldAnnotations") == "oldObject == null ? {} : oldObject.metadata.?annotations.orValue({})"
    cronjob = policies["cellfit-cronjob-state"]
    assert _variable(cronjob, "newJobAnnotations") == "object.spec.jobTemplate.?metadata.?annotations.orValue({})"
    assert _variable(cronjob, "oldJobAnnotations") == (
        "oldObject == null ? {} : oldObject.spec.jobTemplate.?metadata.?annotations.orValue({})"
    )
    assert _variable(cronjob, "newTemplateAnnotations") == "object.spec.jobTemplate.spec.template.?metadata.?annotations.orValue({})"
    assert _variable(cronjob, "oldTemplateLabels") == (
        "oldObject == null ? {} : oldObject.spec.jobTemplate.spec.template.?metadata.?labels.orValue({})"
    )


def _rule(*, group: str, operations: list[str], resources: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "apiVersions": ["v1"], "operations": operations, "resources": resources}


@pytest.mark.parametrize(("name", "rules"), [
    # A pod's Bindings too: the API server copies their annotations and labels onto the pod.
    ("cellfit-pod-state", [_rule(group="", operations=["CREATE", "UPDATE"], resources=["pods", "pods/status"]),
                           _rule(group="", operations=["CREATE"], resources=["bindings", "pods/binding"])]),
    ("cellfit-job-state", [_rule(group="batch", operations=["CREATE", "UPDATE"], resources=["jobs", "jobs/status"])]),
    # Not cronjobs/status: a status update keeps the stored spec, and with it the Job template.
    ("cellfit-cronjob-state", [_rule(group="batch", operations=["CREATE", "UPDATE"], resources=["cronjobs"])]),
])
def test_creates_and_updates_are_refused_and_an_error_refuses_too(
    policies: dict[str, dict[str, Any]], name: str, rules: list[dict[str, Any]]
) -> None:
    spec = policies[name]["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == rules
    (validation,) = spec["validations"]
    assert validation["expression"] == f"size(variables.changed) == 0 || {_WRITER_CHECK}"
    assert validation["reason"] == "Forbidden"
    # The message names each key the request touches.
    assert "variables.changed.join(', ')" in validation["messageExpression"]


def test_a_writer_needs_the_permission_cellfits_cluster_role_grants(policies: dict[str, dict[str, Any]]) -> None:
    # Checked without a namespace: only a ClusterRoleBinding grants it, never a tenant's
    # RoleBinding of a wide role in their own namespace.
    assert ".namespace(" not in _WRITER_CHECK
    role = one(render(), "ClusterRole", "-extender")
    assert {"apiGroups": ["cellfit.io"], "resources": ["scheduling-state"], "verbs": ["write"]} in role["rules"]
    for docs in (render(), render("-f", str(NONDEFAULT_VALUES))):
        trader = one(docs, "ClusterRole", "-cell-trader")
        assert all("*" not in rule["resources"] and "scheduling-state" not in rule["resources"] for rule in trader["rules"])


@pytest.mark.parametrize(("values", "account"), [
    ((), f"system:serviceaccount:{RENDER_NAMESPACE}:cellfit"),
    (("-f", str(NONDEFAULT_VALUES)), f"system:serviceaccount:{RENDER_NAMESPACE}:gpu-sched-sa"),
    (("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=existing"),
     f"system:serviceaccount:{RENDER_NAMESPACE}:existing"),
])
def test_only_cellfits_own_service_account_skips_the_policies(values: tuple[str, ...], account: str) -> None:
    found = _policies(render(*values))
    assert sorted(name.split("-")[-2] for name in found) == ["cronjob", "job", "pod"]
    for policy in found.values():
        assert policy["spec"]["matchConditions"] == [
            {"name": "not-cellfit-itself", "expression": f"request.userInfo.username != '{account}'"}
        ]


def test_each_policy_is_bound_to_deny_by_default(policies: dict[str, dict[str, Any]]) -> None:
    bindings = {d["metadata"]["name"]: d for d in render() if _state(d, "ValidatingAdmissionPolicyBinding")}
    assert {name: b["spec"] for name, b in bindings.items()} == {
        name: {"policyName": name, "validationActions": ["Deny"]} for name in policies
    }


def test_the_policies_can_only_report_or_be_turned_off() -> None:
    docs = render("--set", "statePolicy.validationActions={Warn,Audit}")
    assert {tuple(d["spec"]["validationActions"]) for d in docs if _state(d, "ValidatingAdmissionPolicyBinding")} == {("Warn", "Audit")}
    off = render("--set", "statePolicy.enabled=false")
    assert not [d for d in off if _state(d) or _state(d, "ValidatingAdmissionPolicyBinding")]


@pytest.mark.parametrize("actions", ["{Deny,Warn}", "{}", "{Refuse}", "{Deny,Deny}"])
def test_validation_actions_the_api_server_would_refuse_are_refused_at_render(actions: str) -> None:
    proc = helm(*render_args("--set", f"statePolicy.validationActions={actions}"), check=False)
    assert proc.returncode != 0
    assert "statePolicy.validationActions" in proc.stderr, proc.stderr
