"""AlloX admission, live, one matching at a time over a recording API: what a start patches
(template mechanism, and the webhook mechanism when the API server refuses template resources),
what a waiting Job is told, and how state comes back from the Jobs after a restart."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.errors import KubernetesApiError
from scheduler.matching.admission import QueuePlan

CONFIGURATIONS = {"cpu": {"resources": {"cpu": "4", "memory": "8Gi"}},
                  "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}, "env": {"CUDA": "1"}}}


class RecordingApi:
    def __init__(self, *, refuse_template_resources: bool = False) -> None:
        self.refuse = refuse_template_resources
        self.patches: list[tuple[str, list[dict[str, Any]]]] = []
        self.conditions: list[tuple[str, dict[str, Any]]] = []
        self.events: list[tuple[str, str, str]] = []
        self.annotated: list[tuple[str, dict[str, str]]] = []

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        template = next(op["value"] for op in operations if op["path"] == "/spec/template")
        if self.refuse and any("resources" in c and c["resources"] != {"requests": {"cpu": "500m"}} for c in template["spec"]["containers"]):
            raise KubernetesApiError("spec.template: field is immutable", status=422)
        self.patches.append((name, operations))

    def set_job_condition(self, *, name: str, condition: dict[str, Any], **_: Any) -> None:
        self.conditions.append((name, condition))

    def annotate_job(self, *, name: str, annotations: dict[str, str], **_: Any) -> None:
        self.annotated.append((name, annotations))

    def create_event(self, *, pod_name: str, reason: str, message: str, **_: Any) -> None:
        self.events.append((pod_name, reason, message))


class Jobs:
    def __init__(self, jobs: list[Any]) -> None:
        self.jobs = jobs

    def interchangeable_jobs(self) -> list[Any]:
        return list(self.jobs)

    def subscribe(self, on_change: Any) -> None:
        pass


def job(name: str, *, namespace: str = "alice", cpu: float = 100, gpu: float = 10, created: int = 0, suspend: bool = True,
        placement: str | None = None, started: str | None = None, version: str | None = None) -> Any:
    annotations = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": cpu}, "gpu": {"seconds": gpu}})}
    if placement:
        annotations["cellfit.io/placement"] = placement
    body = {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "annotations": annotations,
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z", **({"resourceVersion": version} if version else {})},
            "spec": {"suspend": suspend, "template": {"metadata": {"labels": {"job-name": name}},
                                                      "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}},
            "status": {"startTime": started} if started else {}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def controller(api: RecordingApi, jobs: list[Any], *, gpus: int = 1, mechanism: str = "auto", solver_process: bool = False) -> PlacerController:
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism=mechanism, solver_process=solver_process),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=(gpus + 4) * 1000, memory_bytes=64 * 2**30, gpus=gpus)},
        capacity=lambda: Resources(cpu_millis=(gpus + 4) * 1000, memory_bytes=64 * 2**30, gpus=gpus),
        clock=lambda: 1767225700.0,
    )


def template_of(operations: list[dict[str, Any]]) -> dict[str, Any]:
    return next(op["value"] for op in operations if op["path"] == "/spec/template")


def test_starts_rewrite_the_template_and_unsuspend_in_one_guarded_patch():
    api = RecordingApi()
    placer = controller(api, [job("a", cpu=100, gpu=10), job("b", cpu=50, gpu=40, created=1)])
    decision = placer.admit()
    assert {(s.key, s.kind) for s in decision.starts} == {("alice/a", "gpu"), ("alice/b", "cpu")}
    patches = dict(api.patches)
    ops = patches["a"]
    assert ops[0] == {"op": "test", "path": "/spec/suspend", "value": True}
    assert {"op": "add", "path": "/metadata/annotations/cellfit.io~1placement", "value": "gpu"} in ops
    assert ops[-1] == {"op": "replace", "path": "/spec/suspend", "value": False}
    gpu_template = template_of(ops)
    assert gpu_template["spec"]["containers"][0]["resources"] == {"requests": {"nvidia.com/gpu": "1", "cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    assert gpu_template["metadata"]["labels"] == {"job-name": "a", "cellfit.io/placement": "gpu"}
    # The webhook, which sees the placement label, finds the configurations and nothing to change.
    assert json.loads(gpu_template["metadata"]["annotations"]["cellfit.io/configurations"]) == CONFIGURATIONS
    assert template_of(patches["b"])["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "4", "memory": "8Gi"}}
    # b waits less on cpu than a would: the one GPU went to a, which it speeds up 10x; b's Event
    # says so. The mechanism is the operator's (inspect), not in what the user reads.
    assert sorted((name, message) for name, reason, message in api.events if reason == "Placed") == [
        ("a", "started on gpu: AlloX chose gpu (estimated 10 s; cpu 100 s)"),
        ("b", "started on cpu: AlloX chose cpu (estimated 50 s; gpu 40 s) because the free GPU went to another Job: "
              "AlloX places the waiting Jobs so that their total completion time is least, not each Job's own"),
    ]
    assert placer.inspect()["startsByMechanism"] == {"template": 2}


def test_without_kep_5440_the_webhook_mechanism_takes_over():
    api = RecordingApi(refuse_template_resources=True)
    placer = controller(api, [job("a"), job("c", cpu=200, gpu=10, created=2)])
    placer.admit()
    (name, ops), = api.patches  # one start (one GPU, the CPU slot would make c slower than waiting)
    template = template_of(ops)
    assert template["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m"}}  # left to the webhook
    assert template["metadata"]["labels"]["cellfit.io/placement"] == "gpu"
    assert json.loads(template["metadata"]["annotations"]["cellfit.io/configurations"]) == CONFIGURATIONS
    assert placer.inspect()["startsByMechanism"] == {"webhook": 1}
    assert [message for _, reason, message in api.events if reason == "Placed"] == ["started on gpu: AlloX chose gpu (estimated 10 s; cpu 3 min)"]


def test_waiting_jobs_are_told_their_position_and_expected_start_once():
    api = RecordingApi()
    jobs = [job("a", gpu=10, cpu=1000), job("b", gpu=20, cpu=1000, created=1), job("c", gpu=30, cpu=1000, created=2)]
    placer = controller(api, jobs)
    placer.admit()
    told = {name: c["message"] for name, c in api.conditions if c["reason"] == "Queued"}
    # a's 10 s end on the minute grid (scheduler/matching/admission.py), then b's 20 s; the
    # clock reads 2026-01-01T00:01:40Z.
    assert told == {"b": "1st on gpu, expected start at 2026-01-01T00:02:40Z (AlloX)",
                    "c": "2nd on gpu, expected start at 2026-01-01T00:03:00Z (AlloX)"}
    before = len(api.conditions)
    jobs_now = [job("b", gpu=20, cpu=1000, created=1), job("c", gpu=30, cpu=1000, created=2),
                job("a", gpu=10, cpu=1000, suspend=False, placement="gpu", started="2026-01-01T00:01:40Z")]
    placer._jobs = Jobs(jobs_now)  # the watch now shows a running on its GPU
    placer.admit()
    assert len(api.conditions) == before  # nothing moved: nothing written


def test_state_comes_back_from_the_jobs_after_a_restart():
    api = RecordingApi()
    # r: running by hand. a: suspended with a placement (a start writes both in one patch, so it
    # was suspended again, or copied from a placed Job): it waits for r's slot like any Job.
    jobs = [job("a", placement="cpu"), job("r", namespace="bob", suspend=False, started="2026-01-01T00:01:00Z")]
    placer = controller(api, jobs, gpus=0)
    decision = placer.admit()
    assert api.patches == []
    assert decision.busy_machines == {"cpu": 1}  # r holds a slot until its start + estimate
    assert decision.starts == ()
    assert [(q.key, q.kind) for q in decision.queue] == [("alice/a", "cpu")]


def wide_job(name: str, *, parallelism: int, gpu: float = 5, cpu: float | None = None, completions: int | None = None) -> Any:
    estimate = {"gpu": {"seconds": gpu}, **({"cpu": {"seconds": cpu}} if cpu is not None else {})}
    body = {"metadata": {"name": name, "namespace": "n", "uid": name, "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(CONFIGURATIONS), "cellfit.io/estimate": json.dumps(estimate)}},
            "spec": {"suspend": True, "parallelism": parallelism, **({"completions": completions} if completions else {}),
                     "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_a_job_without_an_estimate_waits_and_one_wider_than_the_cluster_says_so():
    api = RecordingApi()
    unestimated = JOB_DECODER.decode(json.dumps({"metadata": {"name": "u", "namespace": "n", "uid": "u",
        "annotations": {"cellfit.io/configurations": json.dumps(CONFIGURATIONS)}}, "spec": {"suspend": True}}).encode())
    placer = controller(api, [unestimated, wide_job("w", parallelism=4)])  # 4 pods, one GPU in the cluster
    decision = placer.admit()
    assert decision.starts == () and api.patches == []
    ((name, condition),) = api.conditions
    assert name == "w" and condition["reason"] == "NoMachine" and "with 4 machines at once" in condition["message"]


def test_a_job_of_two_pods_starts_on_two_gpus_in_the_gpu_configuration():
    api = RecordingApi()
    placer = controller(api, [wide_job("pair", parallelism=2, gpu=5, cpu=500), job("solo", gpu=5, cpu=500, created=1)], gpus=2)
    decision = placer.admit()
    (start,) = decision.starts  # the pair holds both GPUs; solo waits behind it
    assert start.key == "n/pair" and start.kind == "gpu" and len(start.machines) == 2
    ((name, operations),) = api.patches
    assert name == "pair"
    (container,) = template_of(operations)["spec"]["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1", "cpu": "1"}}
    (queued,) = decision.queue
    assert queued.key == "alice/solo" and queued.kind == "gpu" and queued.expected_start_seconds > 0
    assert placer.inspect()["lastDecision"]["starts"][0]["machines"] == list(start.machines)


def test_a_running_job_of_several_pods_holds_that_many_machines():
    api = RecordingApi()
    running = json.loads(json.dumps({"metadata": {"name": "pair", "namespace": "n", "uid": "pair",
        "annotations": {"cellfit.io/configurations": json.dumps(CONFIGURATIONS), "cellfit.io/placement": "gpu",
                        "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 500}, "cpu": {"seconds": 5000}})}},
        "spec": {"suspend": False, "parallelism": 2, "completions": 4}, "status": {"startTime": "2026-01-01T00:01:00Z"}}))
    placer = controller(api, [JOB_DECODER.decode(json.dumps(running).encode()), job("solo", gpu=5, cpu=5000, created=1)], gpus=3)
    decision = placer.admit()
    assert decision.busy_machines == {"gpu": 2}
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/solo", "gpu")]


def trial(name: str, **kwargs: Any) -> Any:
    body = json.loads(json.dumps({"metadata": {"labels": {"cellfit.io/job-class": "trial"}}}))
    job_object = job(name, **kwargs)
    raw = json.loads(json.dumps({
        "metadata": {**{f: getattr(job_object.metadata, f) for f in ("name", "namespace", "uid", "creationTimestamp")},
                     "annotations": job_object.annotations, **body["metadata"]},
        "spec": {"suspend": True, "template": json.loads(bytes(job_object.spec.template))},
    }))
    return JOB_DECODER.decode(json.dumps(raw).encode())


@pytest.mark.parametrize(("grace", "kind"), [(15 * 60, "cpu"), (30, "gpu")])
def test_a_trial_job_starts_at_once_where_it_finishes_first(grace, kind):
    api = RecordingApi()
    # The one GPU is busy for an hour with a best-effort Job whose pod checkpoints in `grace` seconds.
    running = job("be", namespace="bob", cpu=7200, gpu=3600, suspend=False, placement="gpu", started="2026-01-01T00:01:40Z")
    placer = controller(api, [running, trial("te", cpu=14 * 60, gpu=4 * 60)], gpus=1)
    placer._preemption_grace = lambda: float(grace)
    placer.admit()
    (name, ops), = api.patches
    assert name == "te" and {"op": "add", "path": "/metadata/annotations/cellfit.io~1placement", "value": kind} in ops
    (event,) = [message for job_name, reason, message in api.events if reason == "Placed"]
    if kind == "cpu":
        assert event == "started on cpu: trial Job, done in ~14 min; on gpu it would be done in ~19 min, after a best-effort Job checkpoints"
    else:
        assert event == ("started on gpu: trial Job, done in ~4 min, counting the checkpoint of the best-effort Job its pod "
                         "preempts; on cpu it would be done in ~14 min")


def test_the_solver_process_decides_as_the_extenders_process():
    # allox.solverProcess sends decide's inputs to a child process: they must pickle, and the
    # decision coming back must be the one made in process.
    jobs = [job("a", cpu=100, gpu=10), job("b", cpu=50, gpu=40, created=1), job("c", cpu=300, gpu=20, created=2),
            job("r", namespace="bob", cpu=700, gpu=70, suspend=False, placement="gpu", started="2026-01-01T00:01:00Z")]
    here = controller(RecordingApi(), jobs, gpus=2).admit()
    child = controller(RecordingApi(), jobs, gpus=2, solver_process=True)
    try:
        assert child.admit() == here
    finally:
        child.stop()
    assert here.progress and here.starts


def versioned(body: Any, version: str, **changes: Any) -> Any:
    document = json.loads(json.dumps({"metadata": {**{f: getattr(body.metadata, f) for f in ("name", "namespace", "uid", "creationTimestamp")},
                                                   "resourceVersion": version, "annotations": {**body.annotations, **changes}},
                                      "spec": {"suspend": True, "template": json.loads(bytes(body.spec.template))}}))
    return JOB_DECODER.decode(json.dumps(document).encode())


def test_a_waiting_job_is_read_again_only_when_the_watch_shows_it_changed():
    api = RecordingApi()
    first = versioned(job("a", gpu=10, cpu=100), "7")
    source = Jobs([first])
    placer = PlacerController(
        api=api, jobs=source, settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=1000, memory_bytes=2**36, gpus=0)},  # no machine: it waits
        capacity=lambda: Resources(cpu_millis=1000, memory_bytes=2**36, gpus=0), clock=lambda: 1767225700.0,
    )
    placer.admit()
    (entry,) = placer._seen.values()
    placer.admit()
    assert next(iter(placer._seen.values()))[1] is entry[1]  # unchanged: the same reading
    # The estimate changes (a new resourceVersion): read again.
    source.jobs = [versioned(first, "8", **{"cellfit.io/estimate": json.dumps({"cpu": {"seconds": 50}})})]
    placer.admit()
    (changed,) = placer._seen.values()
    assert changed[0] == "8" and dict(changed[1].seconds) == {"cpu": 50.0}


def test_a_running_job_is_read_again_only_when_the_watch_shows_it_changed_or_without_its_start_time():
    """A running Job with its start time reads the same until its resourceVersion changes; one
    the watch shows without a start time yet is taken to start "now", so it is read every pass
    (a kept reading would pin ω to the first pass's clock)."""
    clock = [1767225700.0]
    running = job("r", gpu=600, cpu=6000, suspend=False, placement="gpu", started="2026-01-01T00:01:40Z", version="3")
    fresh = job("f", gpu=600, cpu=6000, suspend=False, placement="gpu", version="4")
    source = Jobs([running, fresh])
    placer = PlacerController(
        api=RecordingApi(), jobs=source, settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda _running: {"n1": Resources(cpu_millis=6000, memory_bytes=2**36, gpus=2)},
        capacity=lambda: Resources(cpu_millis=6000, memory_bytes=2**36, gpus=2), clock=lambda: clock[0],
    )
    first = placer.admit()
    assert list(placer._seen) == ["uid-r"]
    kept = placer._seen["uid-r"][1]
    clock[0] += 30.0
    second = placer.admit()
    assert placer._seen["uid-r"][1] is kept  # unchanged: the same reading
    # f's ω follows the clock (it started "now" on each pass); r's stays at its start + estimate.
    assert first.busy_machines == second.busy_machines == {"gpu": 2}
    # Its estimate changes: read again, and the new estimate counts.
    source.jobs = [job("r", gpu=900, cpu=6000, suspend=False, placement="gpu", started="2026-01-01T00:01:40Z", version="5"), fresh]
    placer.admit()
    version, item, _, _ = placer._seen["uid-r"]
    assert version == "5" and dict(item.seconds) == {"cpu": 6000.0, "gpu": 900.0}


def test_what_was_told_to_jobs_that_are_gone_is_forgotten() -> None:
    api = RecordingApi()
    placer = controller(api, [job(f"q{i}", created=i, gpu=10 + i) for i in range(6)], gpus=0)  # every Job queued
    placer.admit()
    assert len(placer._told) == 6
    for round_ in range(4):  # the queue turns over: the old Jobs are deleted, new ones come
        live = [job(f"n{round_}-{i}", created=10 + i) for i in range(2)]
        placer._jobs.jobs = live  # type: ignore[attr-defined]
        placer.admit()
        assert len(placer._told) <= 2 * len(live)  # no more stale entries than live Jobs
    assert set(placer._told) <= {f"uid-n{r}-{i}" for r in (2, 3) for i in range(2)}


class OrderedApi(RecordingApi):
    """Records every write in one sequence (``log``), beside what RecordingApi keeps."""

    def __init__(self, log: list[tuple[str, ...]]) -> None:
        super().__init__()
        self.log = log

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        super().patch_job(namespace=namespace, name=name, operations=operations)
        self.log.append(("patch", name))

    def set_job_condition(self, *, name: str, condition: dict[str, Any], **_: Any) -> None:
        super().set_job_condition(name=name, condition=condition)
        self.log.append(("condition", name, condition["reason"]))


def queue_jobs() -> list[Any]:
    # One GPU: a starts on it, b and c queue behind it (their CPU runs are far slower).
    return [job("a", gpu=10, cpu=1000), job("b", gpu=20, cpu=1000, created=1), job("c", gpu=30, cpu=1000, created=2)]


def assert_started_then_planned_then_told(log: list[tuple[str, ...]], planned: tuple[str, ...]) -> None:
    patches = [at for at, entry in enumerate(log) if entry[0] == "patch"]
    told = [at for at, entry in enumerate(log) if entry[0] == "condition" and entry[2] == "Queued"]
    assert patches and told
    assert log.count(planned) == 1
    assert max(patches) < log.index(planned) < min(told)


def test_the_queue_is_planned_after_every_start_is_patched_and_told_after(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[tuple[str, ...]] = []
    plan_queue = QueuePlan.queue

    def recorded(plan: QueuePlan) -> Any:  # the real plan, its call recorded in the API's sequence
        log.append(("queue planned",))
        return plan_queue(plan)

    monkeypatch.setattr(QueuePlan, "queue", recorded)
    observed: list[Any] = []
    placer = controller(OrderedApi(log), queue_jobs())
    placer._on_decision = lambda seconds, decision: observed.append(decision)
    decision = placer.admit()
    assert_started_then_planned_then_told(log, ("queue planned",))
    assert [(q.key, q.position) for q in decision.queue] == [("alice/b", 1), ("alice/c", 2)]
    assert observed == [decision]  # the decision's observer (the queue gauge) sees the queue
    last = placer.inspect()["lastDecision"]
    assert last["queueSeconds"] == round(placer.last.queue_seconds, 6) and placer.last.queue_seconds > 0
    assert placer.last.from_state_seconds > 0


class RecordingExecutor(ProcessPoolExecutor):
    """The solver process, each call sent to it recorded in the API's sequence."""

    def __init__(self, log: list[tuple[str, ...]]) -> None:
        super().__init__(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self.log = log

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.log.append(("child", fn.__name__))
        return super().submit(fn, *args, **kwargs)


def test_in_the_solver_process_the_queue_is_asked_for_after_the_starts_and_equals_the_one_planned_here() -> None:
    log: list[tuple[str, ...]] = []
    here = controller(RecordingApi(), queue_jobs()).admit()
    placer = controller(OrderedApi(log), queue_jobs(), solver_process=True)
    placer._solver = RecordingExecutor(log)
    try:
        decision = placer.admit()
    finally:
        placer.stop()
    assert decision == here and here.queue
    assert log.index(("child", "decide_encoded")) < min(at for at, entry in enumerate(log) if entry[0] == "patch")
    assert_started_then_planned_then_told(log, ("child", "queue_encoded"))


def test_a_solver_process_that_dies_between_the_starts_and_the_queue_is_replaced_and_the_queue_planned_here() -> None:
    jobs = queue_jobs()
    here_api = RecordingApi()
    in_process = controller(here_api, jobs)
    here = in_process.admit()

    class KillingApi(RecordingApi):
        """Kills the solver process at the first start's patch: after it decided, before the queue."""

        kills = 1

        def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
            super().patch_job(namespace=namespace, name=name, operations=operations)
            solver = placer._solver
            if solver is not None and self.kills:
                self.kills -= 1
                for process in list(solver._processes.values()):  # type: ignore[attr-defined]
                    process.kill()
                    process.join()  # dead before the controller asks for the queue

    api = KillingApi()
    placer = controller(api, jobs, solver_process=True)
    try:
        decision = placer.admit()
        assert api.kills == 0 and placer._solver is None  # it died; another starts at the next pass
        assert decision == here and here.queue
        assert api.conditions == here_api.conditions  # every queued Job told, as in process
        assert placer.last.queue == in_process.last.queue and placer.last.starts == in_process.last.starts
        # The next pass (the watch not caught up yet: a still suspended) in a new child, as in process.
        assert placer.admit() == in_process.admit()
        assert placer._solver is not None and api.conditions == here_api.conditions
    finally:
        placer.stop()


def test_a_controller_stopped_between_the_starts_and_the_queue_still_tells_the_queue() -> None:
    """The term ends (stop() shuts the solver process down) while the starts are patched: the
    pass ends as in process, not with the queue's request refused by the shut-down executor."""
    jobs = queue_jobs()
    here_api = RecordingApi()
    here = controller(here_api, jobs).admit()

    class StoppingApi(RecordingApi):
        """Stops the controller at the first start's patch: after it decided, before the queue."""

        stops = 1

        def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
            super().patch_job(namespace=namespace, name=name, operations=operations)
            if self.stops:
                self.stops -= 1
                placer.stop()

    api = StoppingApi()
    placer = controller(api, jobs, solver_process=True)
    try:
        decision = placer.admit()
    finally:
        placer.stop()
    assert api.stops == 0
    assert decision == here and here.queue
    assert api.conditions == here_api.conditions  # every queued Job told, as in process
