"""Under HiveD with virtual clusters configured and none the default, an interchangeable Job
whose pod template has no ``cellfit.io/virtual-cluster`` label gets no GPU. Seen live (user29):
"its pod template has no cellfit.io/virtual-cluster label, and no virtual cluster is the default",
which left its user to find the VCs' names; the README says the reason names the VCs HiveD knows,
as it does for a label naming an unknown VC."""

from __future__ import annotations

import json

from estimator.objects import JOB_DECODER
from placer.controller import Guarantees, PlacerController
from placer.guarantee import guarantees
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import CONFIGURATIONS, Jobs, RecordingApi
from tests.placer.test_guarantee import engine, views


def test_a_job_without_a_vc_label_is_told_the_vcs_to_choose_from() -> None:
    cells = engine()  # VCs a and b, no default
    assert cells.default_vc is None
    unlabelled = JOB_DECODER.decode(json.dumps({
        "metadata": {"name": "g", "namespace": "ml", "uid": "uid-g", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                                     "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 10}})}},
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}).encode())
    api = RecordingApi()
    PlacerController(
        api=api, jobs=Jobs([unlabelled]), settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"r0n1": Resources(cpu_millis=64000, memory_bytes=2**38, gpus=8)},
        capacity=lambda: Resources(cpu_millis=128000, memory_bytes=2**39, gpus=16), clock=lambda: 1767225700.0,
        guarantees=lambda running: Guarantees(cells=guarantees(views(cells)), default_vc=None),
    ).admit()
    ((_, condition),) = api.conditions
    assert condition["reason"] == "NoMachine", condition
    assert ("its pod template has no cellfit.io/virtual-cluster label, and no virtual cluster is the default: "
            "label it with one of a, b") in condition["message"], condition["message"]
