"""The pod-create webhook gives the resumed PriorityClass only to the new pod of a batch/v1 Job
FitGpp preempted: a pod of Volcano's Job (batch.volcano.sh, kind "Job") FitGpp preempted is
another controller's, and its next pod is admitted unchanged, as a ReplicaSet's is."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from scheduler.extender.admission import PodAdmission
from scheduler.extender.metrics import ExtenderMetrics
from tests.cluster.test_review29_only_batch_jobs_told_of_preemption import BATCH, VOLCANO
from tests.cluster.test_vol29_non_batch_owner import preempted
from tests.support import kube_objects as k
from tests.unit.test_admission import FixedClass


@pytest.mark.parametrize(("api_version", "resumed"), [(VOLCANO, False), (BATCH, True)])
def test_only_a_preempted_batch_jobs_next_pod_gets_the_resumed_class(api_version: str, resumed: bool) -> None:
    _, engine = preempted(api_version)  # be-0 of owner uid-be, preempted by FitGpp
    assert engine.preemptions_of_job("uid-be") == 1
    service = PodAdmission(preemption=engine, lock=threading.RLock(), metrics=ExtenderMetrics(), resumed_class=FixedClass())
    pod = k.pod("be-1", gpus=8, priority=500, labels={"cellfit.io/job-class": "best-effort"}, job_uid="uid-be")
    (reference,) = pod["metadata"]["ownerReferences"]
    reference.update(apiVersion=api_version, name="be")
    body = k.admission_review(pod)
    answer = service.review(k.dumps(body))
    assert answer.status == 200
    response = json.loads(answer.body)["response"]
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    assert ({op["path"]: op["value"] for op in patch}.get("/spec/priorityClassName") == "cellfit-resumed") is resumed
