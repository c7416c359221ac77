"""The validating webhook tells an interchangeable Job whose pods would select nodes outside
AlloX's pool (``allox.nodeSelector``) at submission: the placer refuses to start it there
(``PlacementRefused``, placer/controller.py) and the estimator never samples it there, but its
user learned it only when AlloX first chose the Job. The rule is the placer's own
(``placer.rewrite.pool_conflict``): a template's or a configuration's ``nodeSelector`` giving a
pool label another value, or a required node affinity whose every term excludes the pool. One
warning per field, naming the kinds it holds in, each kept whole within the API server's 256
characters; refused under ``admission.rejectInvalid`` only where no kind is left to start."""

from __future__ import annotations

import copy
import json
from typing import Any

from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.validating import MAX_WARNING_CHARS, ObjectValidation
from tests.extender.test_validating_cronjobs import cronjob, cronjob_review
from tests.support import kube_objects as k
from tests.support.admission_reviews import job
from tests.unit.test_validation import answer

POOL = {"pool": "allox"}
CONFIGURATIONS = {"cpu": {"resources": {"cpu": "4", "memory": "8Gi"}},
                  "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
EXPRESSION = ("spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
              ".nodeSelectorTerms[0].matchExpressions[0]")


def service(*, pool: dict[str, str] | None = POOL, reject: bool = False) -> ObjectValidation:
    return ObjectValidation(cells=None, metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu", reject_invalid=reject,
                            scheduler_name="cellfit", pool=pool)


def interchangeable(spec: dict[str, Any] | None = None, configurations: dict[str, Any] = CONFIGURATIONS, *,
                    suspend: bool = True, placed: str | None = None) -> dict[str, Any]:
    body = job("train", annotations={"cellfit.io/iterations": "1000", "cellfit.io/configurations": json.dumps(configurations)},
               gpus=0, suspend=suspend, template_labels={"cellfit.io/placement": placed} if placed else None)
    body["spec"]["template"]["spec"].update(copy.deepcopy(spec or {}))
    return body


def told(body: dict[str, Any], *, pool: dict[str, str] | None = POOL, **review: Any) -> list[str]:
    return [w for w in answer(service(pool=pool), body, **review).get("warnings") or [] if "allox.nodeSelector" in w]


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions} for expressions in terms]}}}}


def whole(warning: str) -> bool:
    """Kept as written by the API server (it cuts a warning past 256 characters)."""
    return len(warning) <= MAX_WARNING_CHARS and not warning.endswith("…")


def test_a_templates_selector_outside_the_pool_is_told_once_for_every_kind() -> None:
    (warning,) = told(interchangeable({"nodeSelector": {"pool": "batch", "disk": "ssd"}}))
    assert warning == ("cellfit: spec.template.spec.nodeSelector[pool]: 'batch' is not 'allox' (allox.nodeSelector: "
                       "pool=allox; leave pool out or set it to 'allox'): never sampled nor started in cpu or gpu")
    assert whole(warning)


def test_a_configurations_selector_is_named_in_the_configuration_and_only_its_kind() -> None:
    configurations = {**CONFIGURATIONS, "gpu": {**CONFIGURATIONS["gpu"], "nodeSelector": {"pool": "gpus"}}}
    (warning,) = told(interchangeable(configurations=configurations))
    assert warning.startswith("cellfit: metadata.annotations[cellfit.io/configurations].gpu.nodeSelector[pool]: "
                              "'gpus' is not 'allox'")
    assert warning.endswith(": never sampled nor started in gpu") and whole(warning)


def test_a_required_affinity_excluding_the_pool_is_named_by_its_expression_within_256_characters() -> None:
    (warning,) = told(interchangeable(affinity([{"key": "pool", "operator": "NotIn", "values": ["allox"]}])))
    assert warning == (f"cellfit: {EXPRESSION}: excludes allox.nodeSelector's nodes (pool=allox): "
                       "never sampled nor started in cpu or gpu")
    assert whole(warning)


def test_every_term_excluding_the_pool_is_told_and_one_term_admitting_it_is_not() -> None:
    out = [{"key": "pool", "operator": "In", "values": ["batch"]}]
    (warning,) = told(interchangeable(affinity(out, [{"key": "pool", "operator": "DoesNotExist"}])))
    assert warning.startswith("cellfit: spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                              ".nodeSelectorTerms: each of its 2 terms excludes allox.nodeSelector's nodes (pool=allox)")
    assert told(interchangeable(affinity(out, [{"key": "pool", "operator": "In", "values": ["allox"]}]))) == []


def test_a_cronjobs_template_is_told_under_its_job_template_within_256_characters() -> None:
    body = cronjob(job_annotations={"cellfit.io/iterations": "1000", "cellfit.io/configurations": json.dumps(CONFIGURATIONS)},
                   gpus=0, suspend=True)
    body["spec"]["jobTemplate"]["spec"]["template"]["spec"].update(
        affinity([{"key": "pool", "operator": "In", "values": ["batch"]}]))
    result = service().review_job(k.dumps(cronjob_review(body)))
    warnings = [w for w in json.loads(result.body)["response"].get("warnings") or [] if "allox.nodeSelector" in w]
    assert warnings == [f"cellfit: spec.jobTemplate.{EXPRESSION}: excludes allox.nodeSelector's nodes (pool=allox): "
                        "never sampled nor started in cpu or gpu"]
    assert whole(warnings[0])


def test_a_job_inside_the_pool_or_without_one_is_not_told() -> None:
    assert told(interchangeable({"nodeSelector": {"pool": "allox", "disk": "ssd"}})) == []
    assert told(interchangeable({"nodeSelector": {"pool": "batch"}}), pool={}) == []
    assert told(interchangeable({"nodeSelector": {"pool": "batch"}}), pool=None) == []
    # Labels the pool does not name narrow it: the Job's to choose.
    assert told(interchangeable(affinity([{"key": "zone", "operator": "In", "values": ["a"]}]))) == []


def test_an_unsuspended_job_is_not_told_what_allox_would_do() -> None:
    # Placed already (cellfit's own unsuspend: its template carries the pool), or never AlloX's.
    placed = interchangeable({"nodeSelector": {"pool": "batch"}}, suspend=False, placed="cpu")
    assert told(placed, operation="UPDATE", old=interchangeable({"nodeSelector": {"pool": "batch"}})) == []
    assert told(interchangeable({"nodeSelector": {"pool": "batch"}}, suspend=False)) == []


def test_an_update_that_moves_the_template_outside_the_pool_is_told() -> None:
    before = interchangeable()
    after = interchangeable({"nodeSelector": {"pool": "batch"}})
    (warning,) = told(after, operation="UPDATE", old=before)
    assert warning.startswith("cellfit: spec.template.spec.nodeSelector[pool]: 'batch' is not 'allox'")


def test_under_reject_invalid_a_job_no_kind_of_which_could_start_is_refused_and_one_with_a_kind_left_is_not() -> None:
    refused = answer(service(reject=True), interchangeable({"nodeSelector": {"pool": "batch"}}))
    assert refused["allowed"] is False
    assert "spec.template.spec.nodeSelector[pool]: 'batch' is not 'allox'" in refused["status"]["message"]
    configurations = {**CONFIGURATIONS, "gpu": {**CONFIGURATIONS["gpu"], "nodeSelector": {"pool": "gpus"}}}
    assert answer(service(reject=True), interchangeable(configurations=configurations))["allowed"] is True
    # Each kind outside by its own configuration: none left either.
    both = {kind: {**spec, "nodeSelector": {"pool": kind}} for kind, spec in CONFIGURATIONS.items()}
    assert answer(service(reject=True), interchangeable(configurations=both))["allowed"] is False
