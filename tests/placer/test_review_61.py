"""Adversarial review of AlloX admission (helper-61): what a cluster user can write that the API
server refuses, or that admission counts other than the pods it makes."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from estimator.objects import JOB_DECODER
from placer.configuration import parse_configurations
from placer.controller import Guarantees, PlacerController
from placer.rewrite import apply_configuration
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.errors import InvalidAnnotation, KubernetesApiError
from scheduler.matching.capacity import GuaranteeCell
from tests.placer.test_controller import Jobs, RecordingApi
from tests.support import json_patch


@pytest.mark.parametrize(("resources", "field"), [
    # A GPU is indivisible: the API server refuses a pod asking for half of one, and counted as
    # int(0.5) = 0 GPUs AlloX would treat the GPU configuration as needing no GPU.
    ({"nvidia.com/gpu": "0.5", "cpu": "1"}, "cellfit.io/configurations.gpu.resources.nvidia.com/gpu"),
    ({"nvidia.com/gpu": "500m"}, "cellfit.io/configurations.gpu.resources.nvidia.com/gpu"),
    ({"requests": {"nvidia.com/gpu": 1.5}}, "cellfit.io/configurations.gpu.resources.requests.nvidia.com/gpu"),
    # An extended resource's request must equal its limit; a request above its limit is refused.
    ({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}, "cellfit.io/configurations.gpu.resources.requests.nvidia.com/gpu"),
    ({"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}, "cellfit.io/configurations.gpu.resources.requests.cpu"),
    ({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}, "cellfit.io/configurations.gpu.resources.requests.memory"),
])
def test_resources_the_api_server_refuses_are_refused_naming_the_field(resources: dict, field: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_configurations(json.dumps({"gpu": {"resources": resources}}))
    assert caught.value.field == field


@pytest.mark.parametrize("resources", [
    {"nvidia.com/gpu": "2", "cpu": "500m", "memory": "1e3"},
    {"nvidia.com/gpu": 1, "cpu": 0.5, "memory": "1Gi", "hugepages-2Mi": "1Gi"},
    {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1e0"}},
])
def test_every_quantity_form_kubernetes_accepts_still_parses(resources: dict) -> None:
    configuration = parse_configurations(json.dumps({"gpu": {"resources": resources}}))["gpu"]
    assert configuration.device_count("nvidia.com/gpu") in (1, 2)


def cpu_job(name: str, *, cores: str, created: int, containers: int = 1, seconds: float = 100) -> Any:
    """A suspended Job with only a CPU configuration (``cores`` per container) and its estimate."""
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
                         "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": cores, "memory": "1Gi"}}}),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": seconds}})}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": f"c{i}"} for i in range(containers)]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def cpu_only_controller(api: RecordingApi, jobs: list[Any], *, cores: int) -> PlacerController:
    node = Resources(cpu_millis=cores * 1000, memory_bytes=64 * 2**30, gpus=0)
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: 1767225700.0,
    )


def test_one_users_configuration_no_node_holds_leaves_the_others_their_cpu_slots() -> None:
    api = RecordingApi()
    # "1000" cores (a typo for "1") no node holds: sizing every CPU slot for it left no slot at all,
    # and every other Job of the cluster without a CPU configuration it could run on.
    placer = cpu_only_controller(api, [cpu_job("typo", cores="1000", created=0), cpu_job("small", cores="4", created=1)], cores=8)
    decision = placer.admit()
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/small", "cpu")]
    assert [name for name, _ in api.patches] == ["small"]
    assert decision.unplaceable == ("alice/typo",)
    told = {name: condition for name, condition in api.conditions}
    assert told["typo"]["reason"] == "NoMachine"


def test_a_pod_of_two_containers_asks_for_its_configuration_twice() -> None:
    api = RecordingApi()
    # Every container gets the configuration (DESIGN.md): a trainer and its sidecar at 4 cores
    # each are a pod of 8 cores, which the 6-core node never holds; counted as 4 it was started
    # and its pod pended.
    placer = cpu_only_controller(api, [cpu_job("sidecar", cores="4", created=0, containers=2)], cores=6)
    decision = placer.admit()
    assert decision.starts == () and api.patches == []
    assert decision.unplaceable == ("alice/sidecar",)
    placer = cpu_only_controller(RecordingApi(), [cpu_job("sidecar", cores="4", created=0, containers=2)], cores=8)
    (start,) = placer.admit().starts
    assert start.key == "alice/sidecar"


class ServerApi:
    """The Jobs as the API server stores them: a JSON Patch is applied as the API server applies
    it (a failed ``test`` is refused with 422 and changes nothing; a missing Job is 404), and
    every write gives the Job a new resourceVersion."""

    def __init__(self, jobs: list[dict[str, Any]], *, invalid: Callable[[dict[str, Any]], str | None] = lambda body: None) -> None:
        self.jobs = {body["metadata"]["name"]: json.loads(json.dumps(body)) for body in jobs}
        self.invalid = invalid  # the API server's validation: why it refuses a Job as patched
        self.events: list[tuple[str, str, str]] = []
        self.told: dict[str, dict[str, Any]] = {}  # the last condition per Job
        self.versions = 100

    def edit(self, name: str, change: Any) -> None:
        """A user's write."""
        change(self.jobs[name])
        self._bump(name)

    def _bump(self, name: str) -> None:
        self.versions += 1
        self.jobs[name]["metadata"]["resourceVersion"] = str(self.versions)

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        if name not in self.jobs:
            raise KubernetesApiError(f'jobs.batch "{name}" not found', status=404)
        patched = json_patch.patched(self.jobs[name], operations)
        refused = self.invalid(patched)
        if refused is not None:
            raise KubernetesApiError(f'Job.batch "{name}" is invalid: {refused}', status=422)
        self.jobs[name] = patched
        self._bump(name)

    def set_job_condition(self, *, name: str, condition: dict[str, Any], **_: Any) -> None:
        if name in self.jobs:
            self.told[name] = condition
            self._bump(name)

    def create_event(self, *, pod_name: str, reason: str, message: str, **_: Any) -> None:
        self.events.append((pod_name, reason, message))

    def watched(self) -> list[Any]:
        """The Jobs as a watch that has caught up shows them."""
        return [JOB_DECODER.decode(json.dumps(body).encode()) for body in self.jobs.values()]


def stored_job(name: str, *, created: int, cores: str = "2", seconds: float = 100, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    configuration = {"resources": {"cpu": cores, "memory": "1Gi"}, **({"annotations": annotations} if annotations else {})}
    return json.loads(json.dumps({
        "metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                     "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
                     "annotations": {"cellfit.io/configurations": json.dumps({"cpu": configuration}),
                                     "cellfit.io/estimate": json.dumps({"cpu": {"seconds": seconds}})}},
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c", "image": "train:1"}]}}}}))


def server_controller(api: ServerApi, watch: Jobs, *, mechanism: str = "auto") -> PlacerController:
    node = Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=0)
    return PlacerController(
        api=api, jobs=watch, settings=AlloxSettings(alpha=1.0, mechanism=mechanism, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: 1767225700.0,
    )


@pytest.mark.parametrize("mechanism", ["auto", "template", "webhook"])
def test_a_job_its_user_edited_after_the_watch_showed_it_is_not_overwritten_with_what_was_read(mechanism: str) -> None:
    api = ServerApi([stored_job("a", created=0)])
    watch = Jobs(api.watched())  # the watch shows version 1
    # The user moves the suspended Job to her own nodes; the watch has not shown it yet.
    api.edit("a", lambda body: body["spec"]["template"]["spec"].update(nodeSelector={"pool": "mine"}))
    placer = server_controller(api, watch, mechanism=mechanism)
    placer.admit()
    stored = api.jobs["a"]
    assert stored["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "mine"}  # her edit stands
    assert stored["spec"]["suspend"] is True and "cellfit.io/placement" not in stored["metadata"]["annotations"]
    assert [e for e in api.events if e[1] == "Placed"] == []
    # The next pass reads the Job as it is, and starts it with her edit.
    watch.jobs = api.watched()
    (start,) = placer.admit().starts
    assert start.key == "alice/a"
    stored = api.jobs["a"]
    assert stored["spec"]["suspend"] is False and stored["metadata"]["annotations"]["cellfit.io/placement"] == "cpu"
    assert stored["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "mine"}


def test_a_job_deleted_before_its_start_is_patched_leaves_the_other_starts_alone() -> None:
    api = ServerApi([stored_job("gone", created=0), stored_job("kept", created=1)])
    watch = Jobs(api.watched())
    del api.jobs["gone"]
    decision = server_controller(api, watch).admit()
    assert {s.key for s in decision.starts} == {"alice/gone", "alice/kept"}
    assert api.jobs["kept"]["spec"]["suspend"] is False
    assert [name for name, reason, _ in api.events if reason == "Placed"] == ["kept"]


def bad_annotation_key(body: dict[str, Any]) -> str | None:
    keys = (body["spec"]["template"].get("metadata") or {}).get("annotations") or {}
    bad = [key for key in keys if " " in key]
    return f"spec.template.metadata.annotations: Invalid value: {bad[0]!r}: name part must consist of alphanumeric characters" if bad else None


def test_a_job_the_api_server_refuses_to_start_is_told_why_and_leaves_its_machine_to_the_next() -> None:
    # x's configuration carries an annotation key the API server refuses, and x is the shorter:
    # every pass chose x for the one CPU slot, the patch was refused (only logged), and y never ran.
    api = ServerApi([stored_job("x", created=0, cores="6", seconds=50, annotations={"my key": "1"}),
                     stored_job("y", created=1, cores="6", seconds=100)], invalid=bad_annotation_key)
    watch = Jobs(api.watched())
    placer = server_controller(api, watch, mechanism="auto")
    placer.admit()
    assert api.jobs["x"]["spec"]["suspend"] is True and api.jobs["y"]["spec"]["suspend"] is True
    ((name, reason, message),) = [e for e in api.events if e[1] == "PlacementRefused"]
    assert name == "x" and "my key" in message and "cpu" in message
    assert api.told["x"]["reason"] == "Refused" and "my key" in api.told["x"]["message"]
    watch.jobs = api.watched()
    placer.admit()
    assert api.jobs["y"]["spec"]["suspend"] is False  # the slot went to y
    assert api.jobs["x"]["spec"]["suspend"] is True
    placer.admit()
    assert len([e for e in api.events if e[1] == "PlacementRefused"]) == 1  # told once
    # Her fix (a new version of x) is tried again.
    api.edit("x", lambda body: body["metadata"]["annotations"].update(
        {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "2", "memory": "1Gi"}}})}))
    watch.jobs = api.watched()
    placer.admit()
    assert api.jobs["x"]["spec"]["suspend"] is False


def gpu_job(name: str, *, gpus: int, created: int) -> Any:
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
                         "annotations": {"cellfit.io/configurations": json.dumps({"gpu": {"resources": {"nvidia.com/gpu": str(gpus), "cpu": "1"}}}),
                                         "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 100}})}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def gpu_controller(api: RecordingApi, jobs: list[Any], *, hived: bool) -> PlacerController:
    node = Resources(cpu_millis=64000, memory_bytes=256 * 2**30, gpus=8)
    found = Guarantees(cells={"default": [GuaranteeCell(gpus=8, free=8)]}, default_vc="default")
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: 1767225700.0,
        guarantees=(lambda running: found) if hived else None,
    )


@pytest.mark.parametrize("hived", [True, False])
def test_a_gpu_configuration_no_node_holds_starts_nothing_blocks_nobody_and_is_named(hived: bool) -> None:
    api = RecordingApi()
    # 16 GPUs a pod where nodes have 8: under HiveD it sized every GPU machine of the VC (none
    # left: both Jobs "waiting for quota" with 8 GPUs free); without, it started and its pod pended.
    decision = gpu_controller(api, [gpu_job("huge", gpus=16, created=0), gpu_job("small", gpus=1, created=1)], hived=hived).admit()
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/small", "gpu")]
    assert [name for name, _ in api.patches] == ["small"]
    assert decision.unplaceable == ("alice/huge",) and decision.waiting_for_pool == ()
    told = dict(api.conditions)["huge"]
    assert told["reason"] == "NoMachine"
    assert "cellfit.io/configurations.gpu.resources" in told["message"] and "16 GPUs" in told["message"]
    ((name, message),) = [(name, message) for name, reason, message in api.events if reason == "NoMachine"]
    assert name == "huge" and message == told["message"]


def test_a_cpu_configuration_no_node_holds_is_named_in_an_event_and_the_condition() -> None:
    api = RecordingApi()
    cpu_only_controller(api, [cpu_job("typo", cores="1000", created=0)], cores=8).admit()
    told = dict(api.conditions)["typo"]
    assert told["reason"] == "NoMachine" and "cellfit.io/configurations.cpu.resources" in told["message"]
    assert "1000 cores" in told["message"]
    assert [(name, message) for name, reason, message in api.events if reason == "NoMachine"] == [("typo", told["message"])]


def test_a_variable_the_configuration_sets_keeps_its_place_for_the_variables_that_refer_to_it() -> None:
    # Kubernetes expands $(CUDA) only from variables listed before it: moved to the end, CUDA
    # left FLAGS holding the literal "$(CUDA)".
    template = {"spec": {"containers": [{"name": "c", "env": [
        {"name": "CUDA", "value": "0"}, {"name": "FLAGS", "value": "--cuda=$(CUDA)"}, {"name": "CUDA", "value": "0"}]}]}}
    gpu = parse_configurations(json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"}, "env": {"CUDA": "1", "NEW": "x"}}}))["gpu"]
    (container,) = apply_configuration(template, gpu)["spec"]["containers"]
    assert container["env"] == [{"name": "CUDA", "value": "1"}, {"name": "FLAGS", "value": "--cuda=$(CUDA)"}, {"name": "NEW", "value": "x"}]


def test_a_suspended_job_carrying_a_placement_waits_its_turn_like_any_other() -> None:
    api = RecordingApi()
    # The one GPU is busy; a Job copied from a placed one (kubectl get -o yaml, a new name), or a
    # placed Job its user suspended again, carries cellfit.io/placement: it was unsuspended at
    # once on that kind, past AlloX's queue and the busy GPU, estimated or not.
    busy = job_with("busy", suspend=False, placement="gpu", started="2026-01-01T00:01:00Z", estimate={"gpu": 1000})
    copied = job_with("copied", suspend=True, placement="gpu", estimate={"gpu": 10})
    unestimated = job_with("unestimated", suspend=True, placement="gpu", estimate=None)
    node = Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=1)
    placer = PlacerController(
        api=api, jobs=Jobs([busy, copied, unestimated]), settings=AlloxSettings(alpha=1.0, solver_process=False),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: 1767225700.0,
    )
    decision = placer.admit()
    assert api.patches == [] and decision.starts == ()
    assert [(q.key, q.kind) for q in decision.queue] == [("alice/copied", "gpu")]


def job_with(name: str, *, suspend: bool, placement: str, estimate: dict[str, float] | None, started: str | None = None) -> Any:
    annotations = {"cellfit.io/configurations": json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"}}}),
                   "cellfit.io/placement": placement,
                   **({"cellfit.io/estimate": json.dumps({k: {"seconds": v} for k, v in estimate.items()})} if estimate else {})}
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
            "spec": {"suspend": suspend, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"startTime": started} if started else {}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_an_estimate_naming_no_configured_kind_is_told_so_not_that_no_node_offers_it() -> None:
    api = RecordingApi()
    body = {"metadata": {"name": "mixed", "namespace": "alice", "uid": "uid-mixed", "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "2"}}}),
                                         "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 60}})}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    decision = cpu_only_controller(api, [JOB_DECODER.decode(json.dumps(body).encode())], cores=8).admit()
    assert decision.starts == () and decision.unplaceable == ("alice/mixed",)
    told = dict(api.conditions)["mixed"]
    assert told["reason"] == "NoMachine"
    assert "cellfit.io/estimate" in told["message"] and "gpu" in told["message"] and "cpu" in told["message"]
    assert "no node" not in told["message"]


def test_a_trial_job_no_machine_takes_now_is_told_it_waits() -> None:
    api = RecordingApi()
    running = json.loads(json.dumps({"metadata": {"name": "busy", "namespace": "bob", "uid": "uid-busy", "resourceVersion": "1",
                                                  "creationTimestamp": "2026-01-01T00:00:00Z",
                                                  "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "6"}}}),
                                                                  "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 1000}}),
                                                                  "cellfit.io/placement": "cpu"}},
                                     "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "c"}]}}},
                                     "status": {"startTime": "2026-01-01T00:01:00Z"}}))
    trial = json.loads(json.dumps({"metadata": {"name": "try", "namespace": "alice", "uid": "uid-try", "resourceVersion": "1",
                                                      "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"cellfit.io/job-class": "trial"},
                                                      "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "6"}}}),
                                                                      "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
                                     "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}))
    jobs = [JOB_DECODER.decode(json.dumps(body).encode()) for body in (running, trial)]
    # One CPU slot, busy: the trial Job waits for it, and was told nothing at all.
    cpu_only_controller(api, jobs, cores=8).admit()
    assert api.patches == []
    told = dict(api.conditions)["try"]
    assert told["status"] == "False" and told["reason"] == "WaitingForMachine" and "cpu" in told["message"]


@pytest.mark.parametrize(("placement", "reason"), [(None, "Unsuspended"), ("cpu", "Started")])
def test_a_running_job_still_told_it_is_queued_is_told_it_runs(placement: str | None, reason: str) -> None:
    # Told "1st on cpu" while suspended, then unsuspended by its user (or started by a cellfit
    # that stopped before telling it): its condition said it was queued for as long as it ran.
    annotations = {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "2"}}}),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 600}}), **({"cellfit.io/placement": placement} if placement else {})}
    body = {"metadata": {"name": "r", "namespace": "alice", "uid": "uid-r", "resourceVersion": "7",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
            "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}},
            "status": {"startTime": "2026-01-01T00:01:00Z", "conditions": [
                {"type": "Placed", "status": "False", "reason": "Queued", "message": "1st on cpu, expected start in ~60 s (AlloX)"}]}}
    api = RecordingApi()
    placer = cpu_only_controller(api, [JOB_DECODER.decode(json.dumps(body).encode())], cores=8)
    placer.admit()
    ((name, told),) = api.conditions
    assert name == "r" and told["status"] == "True" and told["reason"] == reason and "running on cpu" in told["message"]
    placer.admit()
    assert len(api.conditions) == 1  # told once


@pytest.mark.parametrize(("labels", "named"), [
    ({"cellfit.io/virtual-cluster": "visoin"}, "cellfit.io/virtual-cluster 'visoin'"),
    ({"cellfit.io/priority": "opportunistic"}, "cellfit.io/priority: opportunistic"),
])
def test_a_gpu_job_of_no_vc_allox_counts_is_told_which_label_keeps_it_off_the_gpus(labels: dict[str, str], named: str) -> None:
    # Told "no node of the cluster offers a kind this Job has an estimate for" with 8 GPUs free:
    # a VC name mistyped, or opportunistic pods, were not to be guessed from that.
    body = {"metadata": {"name": "v", "namespace": "alice", "uid": "uid-v", "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"}}}),
                                         "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 100}})}},
            "spec": {"suspend": True, "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c"}]}}}}
    api = RecordingApi()
    decision = gpu_controller(api, [JOB_DECODER.decode(json.dumps(body).encode())], hived=True).admit()
    assert decision.starts == ()
    told = dict(api.conditions)["v"]
    assert told["reason"] == "NoMachine" and named in told["message"], told["message"]


def test_a_cpu_quantity_beyond_int64_millicores_is_refused_naming_the_field() -> None:
    # "1e18" cores is a quantity, but not in millicores: reading the Job's demand raised, and every
    # admission pass of the cluster ended there, no Job started.
    with pytest.raises(InvalidAnnotation) as caught:
        parse_configurations(json.dumps({"cpu": {"resources": {"cpu": "1e18"}}}))
    assert caught.value.field == "cellfit.io/configurations.cpu.resources.cpu"



def test_a_job_of_1e18_cores_leaves_the_other_jobs_admitted() -> None:
    api = RecordingApi()
    decision = cpu_only_controller(api, [cpu_job("huge", cores="1e18", created=0), cpu_job("ok", cores="2", created=1)], cores=8).admit()
    assert [s.key for s in decision.starts] == ["alice/ok"]


class ForbiddenApi(ServerApi):
    """cellfit's own RBAC lacks ``patch jobs`` until an operator grants it."""

    granted = False

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        if not self.granted:
            raise KubernetesApiError(f'patch job {namespace}/{name}: jobs.batch "{name}" is forbidden: User '
                                     '"system:serviceaccount:cellfit:cellfit" cannot patch resource "jobs" (HTTP 403)', status=403)
        super().patch_job(namespace=namespace, name=name, operations=operations)


def test_a_start_cellfits_own_rbac_forbids_is_tried_again_once_granted_and_the_job_not_told_it_is_refused() -> None:
    api = ForbiddenApi([stored_job("a", created=0)])
    watch = Jobs(api.watched())
    placer = server_controller(api, watch)
    placer.admit()
    assert api.jobs["a"]["spec"]["suspend"] is True
    assert all(condition["reason"] != "Refused" for condition in api.told.values())
    api.granted = True
    placer.admit()
    assert api.jobs["a"]["spec"]["suspend"] is False


class DenyingApi(ServerApi):
    """An admission policy of the cluster denies the Job as patched."""

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        raise KubernetesApiError(f'patch job {namespace}/{name}: admission webhook "policy.example.com" denied the request: '
                                 "GPU Jobs need a team label (HTTP 403)", status=403)


def test_a_start_an_admission_policy_denies_is_refused_and_told() -> None:
    api = DenyingApi([stored_job("a", created=0)])
    server_controller(api, Jobs(api.watched())).admit()
    assert api.told["a"]["reason"] == "Refused" and "team label" in api.told["a"]["message"]


def test_a_job_placed_again_on_the_other_kind_sheds_what_the_first_configuration_added() -> None:
    # Started on gpu, suspended again by its user, now started on cpu: its template still held
    # the GPU configuration's env, node selector, toleration and annotation, and the CPU pods
    # were pinned to the GPU nodes.
    configurations = {"cpu": {"resources": {"cpu": "2"}, "env": {"OMP": "2"}},
                      "gpu": {"resources": {"nvidia.com/gpu": "1"}, "env": {"CUDA": "1"}, "nodeSelector": {"accelerator": "a100"},
                              "tolerations": [{"key": "gpu", "operator": "Exists"}], "annotations": {"profile": "gpu"}}}
    first = parse_configurations(json.dumps(configurations))["gpu"]
    original = {"metadata": {"annotations": {"team": "vision"}},
                "spec": {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "spot", "operator": "Exists"}],
                         "containers": [{"name": "c", "env": [{"name": "KEEP", "value": "1"}]}]}}
    placed_on_gpu = apply_configuration(original, first)
    body = {"metadata": {"name": "again", "namespace": "alice", "uid": "uid-again", "resourceVersion": "9",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/placement": "gpu",
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
            "spec": {"suspend": True, "template": placed_on_gpu}}
    api = RecordingApi()
    cpu_only_controller(api, [JOB_DECODER.decode(json.dumps(body).encode())], cores=8).admit()
    ((_, operations),) = api.patches
    template = next(op["value"] for op in operations if op["path"] == "/spec/template")
    assert template["spec"]["nodeSelector"] == {"zone": "a"}
    assert template["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert template["spec"]["containers"][0]["env"] == [{"name": "KEEP", "value": "1"}, {"name": "OMP", "value": "2"}]
    assert template["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2"}}
    assert "profile" not in template["metadata"]["annotations"] and template["metadata"]["annotations"]["team"] == "vision"
