"""The validating webhook tells every mistake of a pod template at once where each can be judged
alone (user24 F3): a gang annotation that does not read ("yes") no longer hides a gang-size that
does not read either ("two"), which the user met only once the first was fixed; and a GPU
configuration that no cell holds says what that means, as one no node holds does (": it is never
sampled nor started in gpu")."""

from __future__ import annotations

import json
import threading
from typing import Any

from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.validating import ObjectValidation
from scheduler.extender.validation import LiveCells, unplaceable_reason
from scheduler.kube import translate, wire
from tests.support.admission_reviews import job
from tests.unit.test_validation import VISION, answer, hived, validation


def test_a_gang_that_does_not_read_leaves_its_size_judged_and_every_mistake_told_at_once() -> None:
    service, _ = validation()
    body = job("train", template_labels=VISION, gpus=2, parallelism=2, template_annotations={
        "cellfit.io/gang": "yes", "cellfit.io/gang-size": "two", "cellfit.io/cell-type": "H100-NODE"})
    warnings = answer(service, body)["warnings"]
    assert "cellfit: spec.template.metadata.annotations[cellfit.io/gang]: 'yes' is not 'true' or 'false'" in warnings
    assert "cellfit: spec.template.metadata.annotations[cellfit.io/gang-size]: 'two' is not an integer" in warnings
    assert any(w.startswith("cellfit: spec.template.metadata.annotations[cellfit.io/cell-type]: unknown cell type 'H100-NODE'")
               for w in warnings), warnings
    assert len(warnings) == 3, warnings


def test_a_gang_that_does_not_read_with_a_size_that_does_says_nothing_of_the_size() -> None:
    service, _ = validation()
    body = job("train", template_labels=VISION, gpus=2, parallelism=2,
               template_annotations={"cellfit.io/gang": "yes", "cellfit.io/gang-size": "2"})
    assert answer(service, body)["warnings"] == [
        "cellfit: spec.template.metadata.annotations[cellfit.io/gang]: 'yes' is not 'true' or 'false'"]


def test_the_preempt_verbs_refusal_names_both_gang_mistakes() -> None:
    body = job("train", template_labels=VISION, gpus=2, template_annotations={"cellfit.io/gang": "yes", "cellfit.io/gang-size": "two"})
    template = body["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {**template["metadata"], "name": "train-abc", "namespace": "ml", "uid": "u1",
                        "ownerReferences": [{"kind": "Job", "name": "train", "uid": body["metadata"]["uid"], "controller": True}]},
           "spec": template["spec"]}
    info = translate.pod_info(wire.POD_DECODER.decode(json.dumps(pod).encode()), gpu_resource="nvidia.com/gpu", field="spec")
    reason = unplaceable_reason(info, cells=LiveCells(hived(), lock=threading.RLock()))
    assert reason == ("annotation cellfit.io/gang: 'yes' is not 'true' or 'false'; "
                      "annotation cellfit.io/gang-size: 'two' is not an integer"), reason


def test_a_gpu_configuration_no_cell_holds_says_it_is_never_sampled_nor_started() -> None:
    service = ObjectValidation(cells=LiveCells(hived(), lock=threading.RLock()), metrics=ExtenderMetrics(),
                               gpu_resource="nvidia.com/gpu", reject_invalid=False)
    configurations = {"cpu": {"resources": {"cpu": "8"}}, "gpu": {"resources": {"nvidia.com/gpu": "16"}}}
    body: dict[str, Any] = job("train", annotations={"cellfit.io/iterations": "1000", "cellfit.io/configurations": json.dumps(configurations)},
                               gpus=0, suspend=True, template_labels=VISION)
    told = [w for w in answer(service, body).get("warnings") or [] if "16 GPUs" in w]
    assert len(told) == 1 and told[0].startswith("cellfit: metadata.annotations[cellfit.io/configurations].gpu.resources: "
                                                 "the pod requests 16 GPUs"), told
    assert told[0].endswith(": it is never sampled nor started in gpu"), told
