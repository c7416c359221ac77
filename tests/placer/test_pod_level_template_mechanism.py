"""The template mechanism (KEP-5440) and pod-level resources (KEP-2837): the API server validates
a Job's pod template as written, but a pod after its defaulting (a container's missing request is
its limit; a missing pod-level request the containers' requests), so a template it takes may make
pods it refuses. Such a Job is refused before it starts, as under the webhook mechanism."""

from __future__ import annotations

import pytest

from tests.placer.test_review_61 import ServerApi
from tests.placer.test_webhook_pods import CPU, TEMPLATE_SPEC, gpu_controller, stored

# The pod may use 2 cores; its container in the configuration asks 4 (no pod-level request: the
# API server defaults the pod's to the containers' 4, above its limit of 2, and refuses the pod).
TWO_CORES_AT_MOST = {**TEMPLATE_SPEC, "resources": {"limits": {"cpu": "2"}}}


@pytest.mark.parametrize("mechanism", ["template", "auto"])
def test_a_template_the_api_server_takes_whose_pods_it_refuses_is_refused_before_it_starts(mechanism: str) -> None:
    # The Job's template in the configuration passes the API server's validation (a template is not
    # defaulted: no pod-level request, no container limit to compare), the Job was unsuspended and
    # told it runs, and every pod was refused: FailedCreate for ever, AlloX's machine held.
    api = ServerApi([stored("capped", CPU, TWO_CORES_AT_MOST)])
    gpu_controller(api, mechanism=mechanism).admit()
    job = api.jobs["capped"]
    assert job["spec"]["suspend"] is True and "cellfit.io/placement" not in (job["spec"]["template"]["metadata"].get("labels") or {})
    told = api.told["capped"]
    assert told["reason"] == "Refused"
    assert "cellfit.io/configurations.cpu.resources.cpu" in told["message"]
    assert "spec.template.spec.resources.limits[cpu] of 2" in told["message"]


def test_a_template_within_its_pod_level_resources_starts_with_the_template_mechanism() -> None:
    api = ServerApi([stored("roomy", CPU, {**TEMPLATE_SPEC, "resources": {"limits": {"cpu": "4", "memory": "8Gi"}}})])
    (start,) = gpu_controller(api, mechanism="template").admit().starts
    assert start.kind == "cpu" and api.jobs["roomy"]["spec"]["suspend"] is False
    assert api.jobs["roomy"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "4"
