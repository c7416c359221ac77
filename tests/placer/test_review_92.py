"""Adversarial review of AlloX admission (helper-92), as a cluster user or an operator breaks it:
Jobs changed by hand between a start and the watch showing it, the solver process hanging, the
rewrite against what a user's pod template already carries, and what waiting Jobs are told."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from typing import Any

import msgspec

import pytest

from estimator.objects import JOB_DECODER
from estimator.planner import CreateSample, SampleKey
from estimator.sample_pod import build_sample_pod, configuration_digest
from placer.configuration import parse_configurations
from placer.controller import PlacerController
from placer.patch import placement_patch
from placer.rewrite import apply_configuration
from placer.solver_wire import ChildInputs, DecideAnswer, decide_encoded
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources, cpu_millis
from scheduler.errors import InvalidAnnotation, KubernetesApiError
from tests.placer.test_controller import Jobs, RecordingApi, controller, job
from tests.support import json_patch
from tests.placer.test_review_61 import ServerApi, gpu_job, server_controller, stored_job


def test_a_job_suspended_again_before_the_watch_showed_its_start_waits_and_starts_again() -> None:
    api = ServerApi([stored_job("a", created=0)])
    watch = Jobs(api.watched())
    placer = server_controller(api, watch)
    (start,) = placer.admit().starts
    assert start.key == "alice/a" and api.jobs["a"]["spec"]["suspend"] is False
    # Its user (or a tool that suspends Jobs) suspends it again at once: the watch never shows it
    # unsuspended, only suspended at a later version. It was taken for AlloX's own start not
    # shown yet, pass after pass: never started again, and told it runs.
    api.edit("a", lambda body: body["spec"].update(suspend=True))
    watch.jobs = api.watched()
    (again,) = placer.admit().starts
    assert again.key == "alice/a" and api.jobs["a"]["spec"]["suspend"] is False


def busy_gpu_controller(api: RecordingApi, jobs: list[Any], *, free_gpus: list[int], gpus: int = 8) -> PlacerController:
    """One node of ``gpus`` GPUs (AlloX's), of which ``free_gpus[0]`` are free now: pods AlloX did
    not start hold the others. Set ``free_gpus[0]`` between passes."""
    node = Resources(cpu_millis=64000, memory_bytes=256 * 2**30, gpus=gpus)
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=64000, memory_bytes=256 * 2**30, gpus=free_gpus[0])},
        capacity=lambda: node, clock=lambda: 1767225700.0,
    )


def test_a_gpu_job_while_other_pods_hold_every_gpu_is_told_it_waits_not_that_no_node_offers_one() -> None:
    # Every GPU of AlloX's node is held by pods AlloX did not start (a HiveD or FitGpp Job): no
    # GPU is free, and no Job of AlloX's ends to queue behind. It was told, with a warning
    # Event, "no node of the cluster offers a kind this Job has an estimate for".
    api = RecordingApi()
    busy_gpu_controller(api, [gpu_job("g", gpus=1, created=0)], free_gpus=[0]).admit()
    told = dict(api.conditions)["g"]
    assert told["status"] == "False" and told["reason"] == "WaitingForMachine", told
    assert "in use" in told["message"] and "no node" not in told["message"]
    assert api.events == []
    # A cluster whose AlloX nodes have no GPU at all is still told so, with its Event.
    none = RecordingApi()
    busy_gpu_controller(none, [gpu_job("g", gpus=1, created=0)], free_gpus=[0], gpus=0).admit()
    assert dict(none.conditions)["g"]["reason"] == "NoMachine"
    assert [(name, reason) for name, reason, _ in none.events] == [("g", "NoMachine")]


def test_a_job_told_no_machine_again_and_again_gets_one_event_per_reason() -> None:
    # A Job of 4 GPUs a pod: while some node has a GPU free (but not 4) it is told NoMachine with
    # a warning Event; when other pods take that GPU again, it waits. A busy cluster frees and
    # takes a GPU every few seconds: one Event each time, per such Job.
    api = RecordingApi()
    free = [1]
    placer = busy_gpu_controller(api, [gpu_job("wide", gpus=4, created=0)], free_gpus=free)
    for step in range(6):
        free[0] = 1 - step % 2
        placer.admit()
    told = [condition["reason"] for name, condition in api.conditions]
    assert told == ["NoMachine", "WaitingForMachine"] * 3
    assert [(name, reason) for name, reason, _ in api.events] == [("wide", "NoMachine")]


def test_a_solver_process_that_hangs_is_killed_the_pass_starts_nothing_and_the_next_starts_in_a_new_one() -> None:
    # A child stopped (SIGSTOP: a node under memory pressure, a debugger, a matching that never
    # ends) answered nothing, and the admission thread waited for it for ever: no Job started
    # again until cellfit restarted.
    api = RecordingApi()
    watch = Jobs([job("a", created=0)])
    placer = PlacerController(
        api=api, jobs=watch, settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=True), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=6000, memory_bytes=64 * 2**30, gpus=2)},
        capacity=lambda: Resources(cpu_millis=6000, memory_bytes=64 * 2**30, gpus=2), clock=lambda: 1767225700.0,
    )
    try:
        (first,) = placer.admit().starts
        assert first.key == "alice/a"
        assert placer._solver is not None
        (child,) = placer._solver._processes.values()  # type: ignore[attr-defined]
        os.kill(child.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        watch.jobs = [job("a", created=0, suspend=False, placement="gpu", started="2026-01-01T00:01:40Z"), job("b", created=1)]
        outcome: list[BaseException | None] = []

        def hung_pass() -> None:
            try:
                placer.admit()
                outcome.append(None)
            except BaseException as error:  # what the admission loop logs
                outcome.append(error)

        # Short for the stopped child alone: a child starting on a loaded machine may take
        # seconds to answer its first request.
        placer._solver_timeout_seconds = 1.0
        passing = threading.Thread(target=hung_pass, daemon=True)
        passing.start()
        passing.join(60)  # sixty times the timeout: a pass that returns at all
        placer._solver_timeout_seconds = AlloxSettings().solver_timeout_seconds
        if passing.is_alive():
            os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
            passing.join()
        assert outcome and outcome[0] is not None and "solver process" in str(outcome[0])
        assert [name for name, _ in api.patches] == ["a"]  # nothing started without a decision
        assert exit_code_of(child, within_seconds=30) is not None  # killed, not left stopped
        (second,) = placer.admit().starts  # a new child decides
        assert second.key == "alice/b" and [name for name, _ in api.patches] == ["a", "b"]
    finally:
        placer.stop()


def exit_code_of(child: Any, *, within_seconds: float) -> int | None:
    """The child's exit code once it has one. Not ``child.join()`` then ``child.exitcode``: the
    executor's own thread joins its killed worker too, and when it reaps the process between the
    join's wait and its poll, that join returns with no exit code although the child is gone
    (multiprocessing's poll takes ECHILD for "not yet"); the code appears once that thread has
    recorded it."""
    deadline = time.monotonic() + within_seconds
    while child.exitcode is None and time.monotonic() < deadline:
        child.join(0.1)
    return child.exitcode  # type: ignore[no-any-return]


def estimated_for(name: str, *, sampled: dict[str, Any], now: dict[str, Any], seconds: dict[str, float]) -> Any:
    """A suspended Job whose cellfit estimate was sampled on the configurations ``sampled`` (each
    entry records its configuration's digest), and whose configurations are ``now``."""
    return JOB_DECODER.decode(json.dumps(estimated_body(name, sampled=sampled, now=now, seconds=seconds)).encode())


def estimated_body(name: str, *, sampled: dict[str, Any], now: dict[str, Any], seconds: dict[str, float]) -> dict[str, Any]:
    """:func:`estimated_for`'s Job as the API server stores it."""
    parsed = parse_configurations(json.dumps(sampled))
    estimate = {kind: {"seconds": value, "method": "sampled", "configurationDigest": configuration_digest(parsed[kind])}
                for kind, value in seconds.items()}
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "7",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(now), "cellfit.io/estimate": json.dumps(estimate)}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    return body


def test_a_job_whose_configuration_was_edited_since_its_estimate_is_not_started_on_that_estimate() -> None:
    # Its user makes the GPU configuration 4 GPUs after cellfit sampled it on 1: the estimator
    # withdraws that estimate, but only with a patch that tests the Job still suspended. An
    # admission pass reading the edit first started it on the 1-GPU run's 10 s, and the
    # withdrawal then failed: it ran on a kind chosen on a configuration it no longer has.
    one_gpu = {"cpu": {"resources": {"cpu": "2"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}
    four_gpus = {"cpu": {"resources": {"cpu": "2"}}, "gpu": {"resources": {"nvidia.com/gpu": "4"}}}
    api = RecordingApi()
    edited = estimated_for("edited", sampled=one_gpu, now=four_gpus, seconds={"cpu": 1000, "gpu": 10})
    decision = busy_gpu_controller(api, [edited], free_gpus=[8]).admit()
    assert decision.starts == () and api.patches == []
    # Unedited, the same Job starts on its GPUs.
    kept = estimated_for("kept", sampled=four_gpus, now=four_gpus, seconds={"cpu": 1000, "gpu": 10})
    (start,) = busy_gpu_controller(RecordingApi(), [kept], free_gpus=[8]).admit().starts
    assert (start.key, start.kind) == ("alice/kept", "gpu")


@pytest.mark.parametrize(("resources", "field"), [
    # Names the API server refuses in a container's resources: not a standard resource (cpu,
    # memory, ephemeral-storage, hugepages-<size>), nor a fully qualified extended one. Under
    # allox.mechanism auto the template's 422 sent the start to the webhook, whose patch (labels
    # and annotations) the API server took: the Job was unsuspended and told it runs, and every
    # pod the webhook rewrote was refused at creation, for ever.
    ({"cpus": "4"}, "cellfit.io/configurations.cpu.resources.cpus"),
    ({"gpu": "1", "cpu": "1"}, "cellfit.io/configurations.cpu.resources.gpu"),
    ({"requests": {"memory": "1Gi", "storage": "1Gi"}}, "cellfit.io/configurations.cpu.resources.requests.storage"),
    ({"requests.nvidia.com/gpu": "1"}, "cellfit.io/configurations.cpu.resources.requests.nvidia.com/gpu"),
    ({"nvidia.com/gpu/x": "1"}, "cellfit.io/configurations.cpu.resources.nvidia.com/gpu/x"),
])
def test_a_resource_name_no_container_may_ask_for_is_refused_naming_the_field(resources: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_configurations(json.dumps({"cpu": {"resources": resources}}))
    assert caught.value.field == field


def test_every_resource_name_a_container_may_ask_for_still_parses() -> None:
    resources = {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi", "hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi",
                 "nvidia.com/gpu": "1", "example.com/fpga": "2", "kubernetes.io/whatever": "1"}
    assert dict(parse_configurations(json.dumps({"gpu": {"resources": resources}}))["gpu"].requests) == resources


def pod_level_cpu_below_its_containers(body: dict[str, Any]) -> str | None:
    """The API server's check of pod-level resources (KEP-2837): the pod asks at least what its
    containers ask together."""
    spec = body["spec"]["template"]["spec"]
    pod = ((spec.get("resources") or {}).get("requests") or {}).get("cpu")
    asked = sum(cpu_millis((container.get("resources") or {}).get("requests", {}).get("cpu", "0"), field="cpu")
                for container in spec["containers"])
    if pod is not None and asked > cpu_millis(pod, field="cpu"):
        return ("spec.template.spec.resources.requests[cpu]: Invalid value: must be greater than or equal to the "
                "aggregate container requests")
    return None


def test_a_start_the_api_server_finds_invalid_is_refused_not_sent_to_the_webhook() -> None:
    # The pod template asks 2 cores for the whole pod; the configuration 4 for its container.
    # The template patch was refused (422, invalid), and allox.mechanism auto took every 422 for
    # a cluster without KEP-5440: the webhook's patch went through, the Job was unsuspended and
    # told it runs, and each pod the webhook rewrote was refused at creation, for ever.
    body = stored_job("a", created=0, cores="4")
    body["spec"]["template"]["spec"]["resources"] = {"requests": {"cpu": "2"}}
    api = ServerApi([body], invalid=pod_level_cpu_below_its_containers)
    server_controller(api, Jobs(api.watched()), mechanism="auto").admit()
    stored = api.jobs["a"]
    assert stored["spec"]["suspend"] is True and "cellfit.io/placement" not in stored["metadata"]["annotations"]
    # Refused before the patch now (placer/patch.py's check_pod_level_resources, which the API
    # server's 422 for the template backs; tests/placer/test_review_61.py has a 422 refusal).
    assert api.told["a"]["reason"] == "Refused" and "spec.template.spec.resources.requests[cpu] of 2" in api.told["a"]["message"]


def test_a_containers_resource_claims_are_kept_in_every_configuration() -> None:
    # The container uses a claim of the pod's (DRA: a shared-memory device, a NIC). The rewrite
    # replaced the container's resources whole and dropped its claims: the pod still held the
    # device, and the container never saw it. The webhook's patch, made from the rewrite, too.
    template = {"spec": {"resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "rdma"}],
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "nic"}]}}]}}
    cpu = parse_configurations(json.dumps({"cpu": {"resources": {"cpu": "8", "memory": "16Gi"}}}))["cpu"]
    (container,) = apply_configuration(template, cpu)["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "8", "memory": "16Gi"}, "claims": [{"name": "nic"}]}
    pod = {"metadata": {"name": "p"}, **template}
    assert json_patch.patched(pod, placement_patch(pod, cpu))["spec"]["containers"][0]["resources"]["claims"] == [{"name": "nic"}]


class WithoutKep5440(ServerApi):
    """A suspended Job's pod template as Kubernetes without KEP-5440 lets it change: its labels,
    annotations, node selector and tolerations only; any other change of the template is
    refused as immutable (env is, with KEP-5440 too)."""

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        before = self.jobs[name]["spec"]["template"] if name in self.jobs else None
        after = next((op["value"] for op in operations if op["path"] == "/spec/template"), before)
        if before is not None and after is not None and _unschedulable_part(before) != _unschedulable_part(after):
            raise KubernetesApiError(f'Job.batch "{name}" is invalid: spec.template: Invalid value: ...: field is immutable', status=422)
        super().patch_job(namespace=namespace, name=name, operations=operations)


def _unschedulable_part(template: dict[str, Any]) -> dict[str, Any]:
    spec = {key: value for key, value in (template.get("spec") or {}).items() if key not in ("nodeSelector", "tolerations")}
    return {"spec": spec}


def test_a_job_placed_again_on_the_other_kind_starts_with_the_webhook_without_the_first_configurations_env() -> None:
    # Started on gpu (its configuration sets env), suspended again by its user: AlloX starts it
    # on cpu. The template patch takes the env out (refused: env is immutable), and the
    # webhook's patch, meant to change only what a suspended Job's template may change, took the
    # same env out of its containers: refused too, so the Job was told Refused, for good.
    configurations = {"cpu": {"resources": {"cpu": "2"}},
                      "gpu": {"resources": {"nvidia.com/gpu": "1"}, "env": {"CUDA": "1"}, "nodeSelector": {"accelerator": "a100"}}}
    gpu = parse_configurations(json.dumps(configurations))["gpu"]
    original = {"spec": {"containers": [{"name": "c", "image": "train:1", "env": [{"name": "KEEP", "value": "1"}]}]}}
    placed_on_gpu = apply_configuration(original, gpu, extra_labels={"cellfit.io/placement": "gpu"},
                                        extra_annotations={"cellfit.io/configurations": json.dumps(configurations)})
    body = {"metadata": {"name": "again", "namespace": "alice", "uid": "uid-again", "resourceVersion": "9",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/placement": "gpu",
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
            "spec": {"suspend": True, "template": placed_on_gpu}}
    api = WithoutKep5440([body])
    (start,) = server_controller(api, Jobs(api.watched()), mechanism="auto").admit().starts
    assert (start.key, start.kind) == ("alice/again", "cpu")
    stored = api.jobs["again"]
    assert stored["spec"]["suspend"] is False, api.told.get("again")
    template = stored["spec"]["template"]
    assert template["metadata"]["labels"]["cellfit.io/placement"] == "cpu"
    assert "nodeSelector" not in template["spec"] or "accelerator" not in template["spec"]["nodeSelector"]
    # Each pod the Job controller makes of it, as the pod-create webhook rewrites it: the CPU
    # configuration's resources, and none of the GPU configuration's env.
    pod = {"metadata": template["metadata"], "spec": template["spec"]}
    cpu = parse_configurations(pod["metadata"]["annotations"]["cellfit.io/configurations"])["cpu"]
    (container,) = json_patch.patched(pod, placement_patch(pod, cpu))["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "2"}}
    assert container["env"] == [{"name": "KEEP", "value": "1"}]


def test_a_sampling_pod_of_a_job_placed_before_runs_in_the_configuration_it_samples() -> None:
    # A Job placed on gpu and suspended again with an edited configuration (the estimator samples
    # it anew), or a Job copied from a placed one without its estimate: its template carries the
    # label cellfit.io/placement: gpu and the configurations. The CPU sampling pod keeps the
    # label, and the pod-create webhook (which rewrites every pod labelled so, from the
    # configurations the pod carries) makes it a GPU pod: the CPU estimate is a GPU run's.
    configurations = {"cpu": {"resources": {"cpu": "8"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    parsed = parse_configurations(json.dumps(configurations))
    placed = apply_configuration({"spec": {"containers": [{"name": "c", "image": "train:1"}]}}, parsed["gpu"],
                                 extra_labels={"cellfit.io/placement": "gpu"},
                                 extra_annotations={"cellfit.io/configurations": json.dumps(configurations)})
    sample = build_sample_pod(job_name="j", job_namespace="alice", job_uid="0123456789abcdef", template=placed,
                              configuration=parsed["cpu"], run=CreateSample(key=SampleKey(configuration="cpu", pilot=0, length="short"),
                                                                            attempt=0, iterations=10),
                              indexed=False, scheduler_name="cellfit", priority_class_name=None)
    labels = sample["metadata"]["labels"]
    created = sample
    if "cellfit.io/placement" in labels:  # what the webhook does to such a pod (scheduler/extender/admission.py)
        carried = parse_configurations(sample["metadata"]["annotations"]["cellfit.io/configurations"])
        created = json_patch.patched(sample, placement_patch(sample, carried[labels["cellfit.io/placement"]]))
    assert created["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "8"}}


def placed_again(name: str, *, placed_in: dict[str, Any], now: dict[str, Any], kind: str, estimate: dict[str, float]) -> Any:
    """A suspended Job placed before on ``kind`` of the configurations ``placed_in`` (its template
    rewritten so, and recording them), whose configurations are ``now``."""
    first = parse_configurations(json.dumps(placed_in))[kind]
    original = {"spec": {"nodeSelector": {"zone": "a"}, "containers": [{"name": "c", "image": "train:1"}]}}
    template = apply_configuration(original, first, extra_labels={"cellfit.io/placement": kind},
                                   extra_annotations={"cellfit.io/configurations": json.dumps(placed_in)})
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "9",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(now), "cellfit.io/placement": kind,
                                         "cellfit.io/estimate": json.dumps({k: {"seconds": v} for k, v in estimate.items()})}},
            "spec": {"suspend": True, "template": template}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_a_job_placed_again_after_its_configuration_was_edited_sheds_the_configuration_it_was_placed_in() -> None:
    # Placed on gpu with a selector of a100 nodes; suspended again, its user moves the GPU
    # configuration to h100 nodes, and AlloX starts it on cpu. What the first placement added
    # was taken out as the GPU configuration reads now (h100): the a100 selector stayed, and
    # the CPU pods were pinned to a100 GPU nodes. Started on gpu again, its pods asked for both.
    before = {"cpu": {"resources": {"cpu": "2"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}, "nodeSelector": {"gpu-type": "a100"}}}
    after = {"cpu": {"resources": {"cpu": "2"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}, "nodeSelector": {"accelerator": "h100"}}}
    api = RecordingApi()
    busy_gpu_controller(api, [placed_again("on-cpu", placed_in=before, now=after, kind="gpu", estimate={"cpu": 60})], free_gpus=[8]).admit()
    ((_, operations),) = api.patches
    assert next(op["value"] for op in operations if op["path"] == "/spec/template")["spec"]["nodeSelector"] == {"zone": "a"}
    api = RecordingApi()
    busy_gpu_controller(api, [placed_again("on-gpu", placed_in=before, now=after, kind="gpu", estimate={"gpu": 60})], free_gpus=[8]).admit()
    ((_, operations),) = api.patches
    assert next(op["value"] for op in operations if op["path"] == "/spec/template")["spec"]["nodeSelector"] == {
        "zone": "a", "accelerator": "h100"}


def test_a_running_jobs_kind_is_the_one_its_pods_were_placed_in_whatever_its_annotation_says_now() -> None:
    # AlloX started it on the one GPU (its template labelled so, in the patch that unsuspended
    # it). Its user then edits the Job's cellfit.io/placement (metadata stays editable) to cpu:
    # it was read as running on a CPU slot, its GPU counted idle (its pods are its own busy
    # machine's), and the next GPU Job was started onto that GPU, where its pod could not bind.
    configurations = {"cpu": {"resources": {"cpu": "2"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}
    gpu = parse_configurations(json.dumps(configurations))["gpu"]
    template = apply_configuration({"spec": {"containers": [{"name": "c"}]}}, gpu, extra_labels={"cellfit.io/placement": "gpu"},
                                   extra_annotations={"cellfit.io/configurations": json.dumps(configurations)})
    estimate = json.dumps({"cpu": {"seconds": 5000}, "gpu": {"seconds": 3000}})
    running = {"metadata": {"name": "running", "namespace": "bob", "uid": "uid-running", "resourceVersion": "5",
                            "creationTimestamp": "2026-01-01T00:00:00Z",
                            "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/placement": "cpu",
                                            "cellfit.io/estimate": estimate}},
               "spec": {"suspend": False, "template": template}, "status": {"startTime": "2026-01-01T00:01:00Z"}}
    waiting = estimated_for("waiting", sampled={"gpu": {"resources": {"nvidia.com/gpu": "1"}}}, now={"gpu": {"resources": {"nvidia.com/gpu": "1"}}},
                            seconds={"gpu": 60})
    node = Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=1)
    api = RecordingApi()
    placer = PlacerController(
        api=api, jobs=Jobs([JOB_DECODER.decode(json.dumps(running).encode()), waiting]),
        settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        # As the cluster cache counts it: the pods of the running Jobs named are given back free.
        free_by_node=lambda uids: {"n1": node if "uid-running" in uids else Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=0)},
        capacity=lambda: node, clock=lambda: 1767225700.0,
    )
    decision = placer.admit()
    assert decision.starts == () and api.patches == []
    assert [(q.key, q.kind) for q in decision.queue] == [("alice/waiting", "gpu")]


class StatusApi(ServerApi):
    """The API server's Jobs with the conditions cellfit writes in their status, as the watch shows them."""

    def set_job_condition(self, *, name: str, condition: dict[str, Any], **_: Any) -> None:
        if name in self.jobs:
            conditions = self.jobs[name].setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [*(kept for kept in conditions if kept["type"] != condition["type"]), condition]
        super().set_job_condition(name=name, condition=condition)


def test_a_new_controller_rewrites_no_condition_that_already_says_what_it_would_tell() -> None:
    # A restart, or the other replica taking the lead, found its memory of what it told empty and
    # wrote every queued Job's condition again, unchanged: a thousand status writes at once for a
    # thousand queued Jobs, at every failover.
    api = StatusApi([stored_job("a", created=0, cores="6", seconds=50), stored_job("b", created=1, cores="6", seconds=100),
                     stored_job("c", created=2, cores="6", seconds=200)])
    watch = Jobs(api.watched())
    server_controller(api, watch).admit()
    assert api.told["b"]["reason"] == "Queued" and api.told["c"]["reason"] == "Queued"
    watch.jobs = api.watched()
    versions = {name: body["metadata"]["resourceVersion"] for name, body in api.jobs.items()}
    decision = server_controller(api, watch).admit()  # the same decision, by a new controller
    assert decision.starts == ()
    assert {name: body["metadata"]["resourceVersion"] for name, body in api.jobs.items()} == versions  # nothing written


def garbage_decide(payload: bytes, held: ChildInputs | None = None) -> bytes:
    """In the solver process: the decision, each start named twice, and starts of a Job that is
    not waiting and of a kind the Job has no configuration of (a child whose state is corrupt)."""
    answer = msgspec.msgpack.decode(decide_encoded(payload, held), type=DecideAnswer)
    if answer.decision is None or not answer.decision.starts:
        return msgspec.msgpack.encode(answer)
    starts = answer.decision.starts
    garbage = (*starts, *starts, replace(starts[0], key="alice/nobody"), replace(starts[0], kind="tpu"))
    return msgspec.msgpack.encode(DecideAnswer(replace(answer.decision, starts=garbage)))


class GarbageSolver(ProcessPoolExecutor):
    """A real solver process whose decisions are garbage."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return super().submit(garbage_decide if fn is decide_encoded else fn, *args, **kwargs)


def test_a_solver_process_answering_garbage_starts_each_waiting_job_once_and_the_pass_goes_on() -> None:
    # A start named twice was patched twice (a Job without a resourceVersion guard, or a second
    # patch racing its own condition write); a start of a Job not waiting ended the pass with a
    # KeyError after some starts, the queue never told.
    api = RecordingApi()
    placer = controller(api, [job("a", created=0), job("b", created=1, gpu=20, cpu=1000)], solver_process=True)
    placer._solver = GarbageSolver()
    try:
        decision = placer.admit()
    finally:
        placer.stop()
    assert [name for name, _ in api.patches] == ["a"]
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/a", "gpu")]
    assert [q.key for q in decision.queue] == ["alice/b"]


def test_a_queued_job_that_leaves_the_queue_unstarted_is_told_why_not_left_with_its_old_place() -> None:
    # Told "2nd on cpu, expected start in ~2 min"; then its estimate no longer holds (its user
    # edited the configuration it was sampled on), or its user scales it to no pods: AlloX
    # leaves it out, and its condition went on saying 2nd, expected start in ~2 min, for good.
    one_gpu = {"cpu": {"resources": {"cpu": "6"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}
    two_gpus = {"cpu": {"resources": {"cpu": "6"}}, "gpu": {"resources": {"nvidia.com/gpu": "2"}}}
    first = stored_job("first", created=0, cores="6", seconds=100)
    sampled = estimated_body("edited", sampled=one_gpu, now=one_gpu, seconds={"cpu": 200, "gpu": 5000})
    api = StatusApi([first, sampled])
    watch = Jobs(api.watched())
    server_controller(api, watch).admit()
    assert api.told["edited"]["reason"] == "Queued"
    api.edit("edited", lambda body: body["metadata"]["annotations"].update({"cellfit.io/configurations": json.dumps(two_gpus)}))
    watch.jobs = api.watched()
    server_controller(api, watch).admit()
    told = api.told["edited"]
    assert (told["status"], told["reason"]) == ("False", "NotQueued") and "cellfit.io/estimate" in told["message"], told
    api.edit("edited", lambda body: body["spec"].update(parallelism=0))
    watch.jobs = api.watched()
    server_controller(api, watch).admit()
    assert api.told["edited"]["reason"] == "NotQueued" and "parallelism" in api.told["edited"]["message"]


def test_hugepages_without_cpu_or_memory_are_refused_naming_the_field() -> None:
    # The API server refuses a container asking hugepages and neither CPU nor memory; through
    # the webhook mechanism each pod of the started Job was refused at creation.
    with pytest.raises(InvalidAnnotation) as caught:
        parse_configurations(json.dumps({"cpu": {"resources": {"hugepages-2Mi": "2Mi"}}}))
    assert caught.value.field == "cellfit.io/configurations.cpu.resources.hugepages-2Mi"
    parse_configurations(json.dumps({"cpu": {"resources": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}}}))


@pytest.mark.parametrize("name", ["A=B", "TAB\there", "ÜBER"])
def test_an_env_name_the_api_server_refuses_is_refused_naming_the_field(name: str) -> None:
    # Env is what the webhook mechanism sets at pod creation (the template's containers cannot
    # change): a name the API server refuses passed the start, then refused every pod.
    with pytest.raises(InvalidAnnotation) as caught:
        parse_configurations(json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"}, "env": {name: "1"}}}))
    assert caught.value.field == f"cellfit.io/configurations.gpu.env.{name}"
    parse_configurations(json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"}, "env": {"my-var.1 x": "1", "_A": "="}}}))


def test_a_job_started_before_the_watch_shows_it_holds_its_machine_meanwhile() -> None:
    # AlloX starts a on the one GPU; a pass runs before the watch shows a unsuspended (the
    # resync timer, another Job's change). a was neither waiting nor running in it, its GPU read
    # idle (no pod of a's yet), and b was started onto the same GPU.
    api = RecordingApi()
    first = job("a", created=0, cpu=1000, gpu=100, version="1")
    placer = controller(api, [first], gpus=1, mechanism="template")
    (start,) = placer.admit().starts
    assert (start.key, start.kind) == ("alice/a", "gpu")
    placer._jobs = Jobs([first, job("b", created=1, cpu=1000, gpu=100, version="1")])  # a as read before its start
    decision = placer.admit()
    assert decision.starts == () and [name for name, _ in api.patches] == ["a"]
    assert [(q.key, q.kind) for q in decision.queue] == [("alice/b", "gpu")]
