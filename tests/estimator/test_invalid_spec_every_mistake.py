"""user26 #6: the estimator's InvalidSpec condition (and its InvalidInterchangeableJob Event)
named only the first mistake of a Job: its configuration's ``cpu: "-4"``, not its
``cellfit.io/iterations: many`` nor the configuration's other mistakes, so its user met them one
resubmission at a time. It names every one at once, as the validating webhook warns of them."""

from __future__ import annotations

import json

from estimator.objects import JOB_DECODER
from tests.estimator.test_controller import RecordingApi, controller


def told(annotations: dict[str, str]) -> str:
    api = RecordingApi()
    estimator = controller(api)
    body = {"metadata": {"name": "bad", "namespace": "ml", "uid": "uid-bad", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": annotations},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    estimator._replace_jobs([JOB_DECODER.decode(json.dumps(body).encode())])
    estimator.reconcile()
    assert api.created == []
    (condition,) = [c for c in api.conditions if c["reason"] == "InvalidSpec"]
    assert [message for reason, message in api.events if reason == "InvalidInterchangeableJob"] == [condition["message"]]
    return str(condition["message"])


def test_every_mistake_of_the_configurations_and_the_iterations_is_named() -> None:
    configurations = {"cpu": {"resources": {"cpu": "-4"}, "envv": {}}, "gpu": {"resources": {"nvidia.com/gpu": "1.5"}}}
    message = told({"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/iterations": "many"})
    for said in ("cellfit.io/configurations.cpu: unknown key 'envv'", "cellfit.io/configurations.cpu.resources.cpu",
                 "cellfit.io/configurations.gpu.resources.nvidia.com/gpu", "cellfit.io/iterations: 'many' is not an integer"):
        assert said in message, (said, message)


def test_readable_configurations_and_bad_iterations_name_the_iterations() -> None:
    configurations = {"cpu": {"resources": {"cpu": "4"}}}
    message = told({"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/iterations": "many"})
    assert message == "nothing is sampled or started: cellfit.io/iterations: 'many' is not an integer"
