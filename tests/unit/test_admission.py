"""The pod-create webhook: a preempted best-effort Job's new pod gets the resumed PriorityClass."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo
from scheduler.errors import InvalidRequest
from scheduler.extender.admission import PodAdmission
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.preemption import FitGppSettings, ResumedPriorityClass
from scheduler.preemption.engine import FitGppEngine
from tests.support import kube_objects as k

RESUMED = ResumedPriorityClass(name="cellfit-resumed", value=750)


class FixedClass:
    """The lookup's interface with the class already read (the lookup has tests of its own)."""

    name = RESUMED.name

    def __init__(self, value: ResumedPriorityClass | None = RESUMED) -> None:
        self.value = value

    def get(self) -> ResumedPriorityClass | None:
        return self.value


def admission(engine=None, resumed=FixedClass()) -> tuple[PodAdmission, FitGppEngine | ResourceFitEngine, ExtenderMetrics]:
    engine = engine if engine is not None else FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    metrics = ExtenderMetrics()
    # What the composition hands the webhook: FitGpp's preemption, or none under resource fit alone.
    preemption = engine if isinstance(engine, FitGppEngine) else None
    return PodAdmission(preemption=preemption, lock=threading.RLock(), metrics=metrics, resumed_class=resumed), engine, metrics


def preempted_once(engine: FitGppEngine) -> None:
    engine.apply_job(JobInfo(uid=k.JOB_UID, namespace="ml", name="train", annotations={"cellfit.io/preemptions": "1"}))


def review(service: PodAdmission, body: dict) -> dict:
    answer = service.review(k.dumps(body))
    assert answer.status == 200
    return json.loads(answer.body)


def test_new_pod_of_a_preempted_job_is_patched_onto_the_resumed_class():
    service, engine, metrics = admission()
    preempted_once(engine)
    body = k.admission_review(k.pod("train-x7k2q", gpus=4, priority=500, labels={"cellfit.io/job-class": "best-effort"}))
    result = review(service, body)
    assert result["apiVersion"] == "admission.k8s.io/v1" and result["kind"] == "AdmissionReview"
    response = result["response"]
    assert response["uid"] == body["request"]["uid"] and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {op["path"]: op["value"] for op in patch} == {
        "/spec/priorityClassName": "cellfit-resumed", "/spec/priority": 750, "/spec/preemptionPolicy": "PreemptLowerPriority",
    }
    assert metrics.admission_reviews.labels(result="resumed")._value.get() == 1


@pytest.mark.parametrize("case", ["never-preempted", "trial", "update", "no-class", "placement-only"])
def test_everything_else_is_allowed_unchanged(case):
    engine = ResourceFitEngine() if case == "placement-only" else None
    service, engine, metrics = admission(engine, FixedClass(None) if case == "no-class" else FixedClass())
    if case != "never-preempted" and isinstance(engine, FitGppEngine):
        preempted_once(engine)
    labels = {"cellfit.io/job-class": "trial" if case == "trial" else "best-effort"}
    body = k.admission_review(k.pod("train-x7k2q", priority=500, labels=labels), operation="UPDATE" if case == "update" else "CREATE")
    response = review(service, body)["response"]
    assert response == {"uid": body["request"]["uid"], "allowed": True}
    assert metrics.admission_reviews.labels(result="unchanged")._value.get() == 1


def test_pods_without_a_job_are_left_alone():
    service, engine, _ = admission()
    preempted_once(engine)
    pod = k.pod("notebook-0", priority=0)
    pod["metadata"]["ownerReferences"] = []
    body = k.admission_review(pod)
    assert review(service, body)["response"] == {"uid": body["request"]["uid"], "allowed": True}


@pytest.mark.parametrize(
    ("body", "field"),
    [(b"{", "malformed JSON"), (b'{"kind": "AdmissionReview"}', "request"), (b'{"request": {"uid": ""}}', "request.uid"),
     (b'{"request": {"uid": "u", "object": {"spec": {"priority": "high"}}}}', "request.object.spec.priority")],
)
def test_a_body_that_is_not_an_admission_review_is_refused_naming_the_field(body, field):
    service, _, _ = admission()
    with pytest.raises(InvalidRequest, match=field.replace(".", r"\.")):
        service.review(body)


# ---------------------------------------------------------------------- the placer's webhook mechanism

PLACED_CONFIGURATIONS = json.dumps({"cpu": {"resources": {"cpu": "8", "memory": "16Gi"}, "env": {"OMP_NUM_THREADS": "8"}},
                                    "gpu": {"resources": {"nvidia.com/gpu": "1"}}})


def placed_pod(kind: str, configurations: str = PLACED_CONFIGURATIONS) -> dict:
    pod = k.pod("train-p4x2z", gpus=1, labels={"cellfit.io/placement": kind, "batch.kubernetes.io/job-name": "train"})
    names = ",".join(container["name"] for container in pod["spec"]["containers"])
    pod["metadata"]["annotations"] = {"cellfit.io/configurations": configurations, "cellfit.io/configured-containers": names}
    return pod


def test_a_placed_jobs_pod_is_rewritten_into_the_chosen_configuration():
    from placer.configuration import parse_configurations
    from placer.rewrite import apply_configuration
    from tests.support.json_patch import patched as apply_patch

    service, _, metrics = admission()
    pod = placed_pod("cpu")
    response = review(service, k.admission_review(pod))["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    operations = json.loads(base64.b64decode(response["patch"]))
    # Applied as the API server applies it, the pod is exactly the cpu configuration: no GPU left.
    patched = apply_patch(pod, operations)
    assert patched == apply_configuration(pod, parse_configurations(PLACED_CONFIGURATIONS)["cpu"])
    assert patched["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "8", "memory": "16Gi"}}
    assert metrics.admission_reviews.labels(result="placed")._value.get() == 1


@pytest.mark.parametrize("configurations", ["{broken", json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"}}})])
def test_a_placed_pod_whose_configuration_is_unusable_is_admitted_unchanged(configurations, caplog):
    service, _, metrics = admission()
    response = review(service, k.admission_review(placed_pod("cpu", configurations)))["response"]
    assert response["allowed"] is True and "patch" not in response
    assert "placed pod left as created" in caplog.text
    assert metrics.admission_reviews.labels(result="unchanged")._value.get() == 1


# The AdmissionReview kube-apiserver POSTs for a pod the Job controller creates from the template
# of a Job AlloX placed on gpu, after Istio's injector (its webhook ran first) added its proxy and
# init container: the text as it goes over the wire, not built by a helper.
ISTIO_INJECTED_REVIEW = b"""{
  "kind": "AdmissionReview",
  "apiVersion": "admission.k8s.io/v1",
  "request": {
    "uid": "5b1b3c2e-7c1e-4a55-9d0f-2f6a1c9e8b41",
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "resource": {"group": "", "version": "v1", "resource": "pods"},
    "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
    "requestResource": {"group": "", "version": "v1", "resource": "pods"},
    "namespace": "ml",
    "operation": "CREATE",
    "userInfo": {"username": "system:serviceaccount:kube-system:job-controller",
                 "uid": "0e5c7b7e-1f4c-4a3f-9d2a-6b1b7f0c2d11",
                 "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
    "object": {
      "kind": "Pod",
      "apiVersion": "v1",
      "metadata": {
        "generateName": "train-",
        "namespace": "ml",
        "labels": {
          "batch.kubernetes.io/controller-uid": "8d0b8f4e-3f5e-4c1a-9b7e-1c2d3e4f5a6b",
          "batch.kubernetes.io/job-name": "train",
          "controller-uid": "8d0b8f4e-3f5e-4c1a-9b7e-1c2d3e4f5a6b",
          "job-name": "train",
          "cellfit.io/placement": "gpu",
          "security.istio.io/tlsMode": "istio",
          "service.istio.io/canonical-name": "train"
        },
        "annotations": {
          "cellfit.io/configurations": "{\\"cpu\\": {\\"resources\\": {\\"cpu\\": \\"8\\", \\"memory\\": \\"16Gi\\"}}, \\"gpu\\": {\\"resources\\": {\\"nvidia.com/gpu\\": \\"1\\", \\"cpu\\": \\"4\\"}}}",
          "cellfit.io/configured-containers": "trainer",
          "sidecar.istio.io/status": "{\\"initContainers\\":[\\"istio-init\\"],\\"containers\\":[\\"istio-proxy\\"],\\"volumes\\":[\\"istio-envoy\\"]}"
        },
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                             "uid": "8d0b8f4e-3f5e-4c1a-9b7e-1c2d3e4f5a6b", "controller": true, "blockOwnerDeletion": true}]
      },
      "spec": {
        "volumes": [{"name": "istio-envoy", "emptyDir": {"medium": "Memory"}}],
        "initContainers": [{
          "name": "istio-init", "image": "docker.io/istio/proxyv2:1.24.0", "args": ["istio-iptables", "-p", "15001"],
          "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "10m", "memory": "40Mi"}},
          "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
        }],
        "containers": [{
          "name": "trainer", "image": "registry.example.com/train:1",
          "resources": {"requests": {"cpu": "1"}},
          "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
        }, {
          "name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.0", "args": ["proxy", "sidecar"],
          "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
          "volumeMounts": [{"name": "istio-envoy", "mountPath": "/etc/istio/proxy"}],
          "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
        }],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "securityContext": {},
        "schedulerName": "cellfit",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        "priority": 0,
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority"
      },
      "status": {}
    },
    "oldObject": null,
    "dryRun": false,
    "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
  }
}"""


def test_a_sidecar_injected_before_the_webhook_keeps_its_resources_and_only_the_templates_container_gets_the_gpu():
    # The proxy got the configuration too: a GPU (the pod asked 2 where AlloX booked 1) and 4 cores.
    from tests.support.json_patch import patched as apply_patch

    service, _, metrics = admission()
    answer = service.review(ISTIO_INJECTED_REVIEW)
    assert answer.status == 200
    result = json.loads(answer.body)
    assert result["apiVersion"] == "admission.k8s.io/v1" and result["kind"] == "AdmissionReview"
    response = result["response"]
    assert response["uid"] == "5b1b3c2e-7c1e-4a55-9d0f-2f6a1c9e8b41" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    operations = json.loads(base64.b64decode(response["patch"]))
    assert {op["path"] for op in operations} == {"/spec/containers/0/resources"}
    pod = json.loads(ISTIO_INJECTED_REVIEW)["request"]["object"]
    trainer, proxy = apply_patch(pod, operations)["spec"]["containers"]
    assert trainer["resources"] == {"requests": {"nvidia.com/gpu": "1", "cpu": "4"}, "limits": {"nvidia.com/gpu": "1"}}
    assert proxy == pod["spec"]["containers"][1]
    assert metrics.admission_reviews.labels(result="placed")._value.get() == 1


def test_a_pod_placed_before_the_containers_were_recorded_has_each_container_rewritten():
    # A Job placed by a cellfit that did not record its template's containers: the webhook cannot
    # tell the proxy from the template's, and rewrites both, as that cellfit did.
    body = json.loads(ISTIO_INJECTED_REVIEW)
    del body["request"]["object"]["metadata"]["annotations"]["cellfit.io/configured-containers"]
    service, _, _ = admission()
    response = review(service, body)["response"]
    operations = json.loads(base64.b64decode(response["patch"]))
    assert {op["path"] for op in operations} == {"/spec/containers/0/resources", "/spec/containers/1/resources", "/metadata/annotations"}
    # The pod records the containers it gave the configuration: called again after another
    # webhook added one (reinvocationPolicy IfNeeded), the webhook leaves that one as it came.
    (annotations,) = [op["value"] for op in operations if op["path"] == "/metadata/annotations"]
    assert annotations["cellfit.io/configured-containers"] == "trainer,istio-proxy"
