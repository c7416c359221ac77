"""What a user reads of AlloX's starts and refusals, from user21's hand session on the local
control plane (helper-103's successor): five sampled Jobs on one GPU and three CPU slots.

- ij-0 and ij-1 started on CPU while sampling pods held the only GPU, told only "because no GPU
  was free for it": no end, no holder, nothing to tell them when to expect a GPU;
- ij-3 started on CPU (101 s) with the GPU expected free in 25 s and 27 s there: told AlloX's aim,
  not that waiting would have ended it 49 s sooner, so the aim read as a non sequitur;
- ij-huge's NoMachine said "500 cores and 0 GiB a pod": it asked no memory, and the 0 GiB read as
  part of what was too much."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import Guarantees, PlacerController
from placer.guarantee import guarantees
from scheduler.cells import HivedEngine
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.cells.helpers import rack_cluster
from tests.placer.test_controller import Jobs, RecordingApi, controller, job
from tests.placer.test_guarantee import NODES, place, views
from tests.placer.test_guarantee import job as vc_job
from tests.placer.test_review_61 import cpu_job, cpu_only_controller


def placed(api: RecordingApi) -> dict[str, str]:
    return {name: message for name, reason, message in api.events if reason == "Placed"}


def busy_gpu_controller(api: RecordingApi, jobs: list[Any]) -> PlacerController:
    """One GPU on AlloX's node, held by a pod AlloX did not start (a sampling pod): none free."""
    free = Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=0)
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"n1": free},
        capacity=lambda: Resources(cpu_millis=9000, memory_bytes=64 * 2**30, gpus=1), clock=lambda: 1767225700.0,
    )


def test_a_job_started_on_cpu_while_others_pods_hold_every_gpu_is_told_who_holds_them() -> None:
    api = RecordingApi()
    (start,) = busy_gpu_controller(api, [job("w", cpu=100, gpu=27)]).admit().starts
    assert start.kind == "cpu"
    message = placed(api)["w"]
    assert message.startswith("started on cpu: AlloX chose cpu (estimated 100 s; gpu 27 s) because no GPU was free for it")
    # Not "none exists": the holders are named, and why no time to wait is given.
    assert "pods AlloX did not start" in message and "sampling pods" in message
    assert "no end was known" in message


def test_a_cluster_without_gpus_is_not_said_to_have_them_held_by_others() -> None:
    api = RecordingApi()
    placer = controller(api, [job("w", cpu=100, gpu=27)], gpus=0)
    placer.admit()
    message = placed(api)["w"]
    assert "pods AlloX did not start" not in message and "was free" not in message  # none to be free
    assert message.endswith("because AlloX's nodes have no GPU")


def test_a_job_that_would_have_ended_sooner_waiting_is_told_by_how_much() -> None:
    # The GPU frees in 500 s; w2 there would end at 527 s, on cpu at 540 s: 13 s sooner waiting.
    api = RecordingApi()
    running = job("r", cpu=6000, gpu=600, suspend=False, placement="gpu", started="2026-01-01T00:00:00Z", version="7")
    placer = controller(api, [running, job("w1", cpu=6000, gpu=30, created=1), job("w2", cpu=540, gpu=27, created=2)], gpus=1)
    assert {(s.key, s.kind) for s in placer.admit().starts} == {("alice/w2", "cpu")}
    message = placed(api)["w2"]
    assert "the first expected free in 8 min" in message
    assert "waiting for it would have ended this Job ~13 s sooner" in message
    # AlloX counted the GPU free at 540 s (its end on the minute grid): 567 s there, 27 s later
    # than on cpu, which decided it (user26: said as its matching's aim before).
    assert message.endswith("in 9 min here, so waiting as it counted it would have ended this Job ~27 s later than on cpu")


def suspended_job(name: str, *, configurations: dict[str, Any], estimate: str | None, parallelism: int | None = None,
                  conditions: list[dict[str, str]] | None = None) -> Any:
    """A suspended interchangeable Job of ``configurations`` and the ``estimate`` annotation's text."""
    annotations = {"cellfit.io/configurations": json.dumps(configurations)}
    if estimate is not None:
        annotations["cellfit.io/estimate"] = estimate
    spec: dict[str, Any] = {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}
    if parallelism is not None:
        spec.update(parallelism=parallelism, completions=parallelism)
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
            "spec": spec, "status": {"conditions": conditions or []}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def cores_only_job(name: str, *, cores: str) -> Any:
    """A suspended Job whose only configuration asks cores and no memory, with its estimate."""
    return suspended_job(name, configurations={"cpu": {"resources": {"cpu": cores}}}, estimate=json.dumps({"cpu": {"seconds": 60}}))


def test_no_machine_names_no_memory_the_configuration_did_not_ask_for() -> None:
    api = RecordingApi()
    cpu_only_controller(api, [cores_only_job("huge", cores="500")], cores=64).admit()
    told = dict(api.conditions)["huge"]
    assert told["reason"] == "NoMachine"
    assert "cellfit.io/configurations.cpu.resources, 500 cores a pod" in told["message"]
    assert "GiB" not in told["message"]


def test_no_machine_still_names_the_memory_a_configuration_asked_for() -> None:
    api = RecordingApi()
    cpu_only_controller(api, [cpu_job("typo", cores="1000", created=0)], cores=8).admit()
    assert "1000 cores and 1 GiB a pod" in dict(api.conditions)["typo"]["message"]


def pair(name: str, *, parallelism: int) -> Any:
    """A suspended two-kind Job of ``parallelism`` pods, 80 s on cpu, 20 s on gpu."""
    configurations = {"cpu": {"resources": {"cpu": "2", "memory": "1Gi"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    return suspended_job(name, configurations=configurations, estimate=json.dumps({"cpu": {"seconds": 80}, "gpu": {"seconds": 20}}),
                         parallelism=parallelism)


def test_a_job_whose_pods_need_more_gpus_than_there_are_is_told_waiting_never_helps() -> None:
    # ij-pair of the session: 2 pods of 1 GPU on AlloX's one GPU, told the GPU was held by
    # others "so no end was known to wait for", as if it might run on GPU later.
    api = RecordingApi()
    (start,) = controller(api, [pair("pair", parallelism=2)], gpus=1).admit().starts
    assert start.kind == "cpu"
    message = placed(api)["pair"]
    assert "because its 2 pods need 2 GPUs at once and AlloX's nodes have 1 in all" in message
    assert "wait" not in message.split("because", 1)[1]


def test_an_estimate_and_configurations_without_a_common_kind_say_the_job_never_starts() -> None:
    api = RecordingApi()
    mismatch = suspended_job("mismatch", configurations={"cpu": {"resources": {"cpu": "4"}}}, estimate=json.dumps({"gpu": {"seconds": 30}}))
    controller(api, [mismatch], gpus=1).admit()
    told = dict(api.conditions)["mismatch"]
    assert told["reason"] == "NoMachine" and "no kind has both" in told["message"]
    assert "never started" in told["message"]  # the consequence, as the webhook's warning says it


QUEUED = {"type": "Placed", "status": "False", "reason": "Queued", "message": "1st on cpu, expected start at 2026-01-01T00:01:00Z (AlloX)"}


def withdrawn(name: str, *, estimate: str | None, condition: dict[str, str] | None) -> Any:
    """A suspended Job AlloX told a place in its queue, now without an estimate it can read."""
    return suspended_job(name, configurations={"cpu": {"resources": {"cpu": "4"}}}, estimate=estimate,
                         conditions=[QUEUED, *([condition] if condition else [])])


def test_a_job_out_of_the_queue_without_an_estimate_is_told_which_case_it_is() -> None:
    # ij-6 of the session: its user edited its configurations, the estimator withdrew the
    # estimate (Estimated=False, ConfigurationsChanged), and the Job was told "its
    # cellfit.io/estimate is missing or unreadable".
    changed = {"type": "Estimated", "status": "False", "reason": "ConfigurationsChanged",
               "message": "cpu changed since the estimate: estimate withdrawn, sampling again"}
    cases = {"edited": withdrawn("edited", estimate=None, condition=changed),
             "new": withdrawn("new", estimate=None, condition=None),
             "garbled": withdrawn("garbled", estimate="{not json", condition=None)}
    api = RecordingApi()
    controller(api, list(cases.values()), gpus=1).admit()
    told = {name: c["message"] for name, c in api.conditions if c["reason"] == "NotQueued"}
    assert "estimate was withdrawn" in told["edited"] and "cellfit.io/configurations changed" in told["edited"]
    assert "no cellfit.io/estimate yet" in told["new"]
    assert "does not read" in told["garbled"]
    assert not any("missing or unreadable" in message for message in told.values())


# ------------------------------------------------------------------ the implicit VC 'default'
# Under the chart's defaults (no virtualClusters) HiveD's implicit VC 'default' owns every GPU:
# the session's Jobs were told "1st on gpu of virtual cluster 'default'" and "no GPU of virtual
# cluster 'default' was free for it", a name their users never chose (kubectl cellfit why left
# it out, so the Event and the plugin disagreed).


def hived_placer(api: RecordingApi, cells: HivedEngine, jobs: list[Any], *, free: dict[str, Resources]) -> PlacerController:
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template"), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: free, capacity=lambda: Resources(cpu_millis=128000, memory_bytes=2**39, gpus=16),
        clock=lambda: 1767225700.0,
        guarantees=lambda running: Guarantees(cells=guarantees(views(cells)), default_vc=cells.default_vc),
    )


def test_the_only_vc_is_not_named_to_a_queued_job() -> None:
    cells = HivedEngine.from_config(rack_cluster(1, 2))  # no virtualClusters: the implicit 'default'
    api = RecordingApi()
    placer = hived_placer(api, cells, [vc_job("j1", "default", created=0), vc_job("j2", "default", created=1)],
                          free={"r0n0": Resources(cpu_millis=1000, memory_bytes=2**38, gpus=1)})
    (queued,) = placer.admit().queue
    assert queued.pool == "default"
    (told,) = [c["message"] for _, c in api.conditions if c["reason"] == "Queued"]
    assert told.startswith("1st on gpu, expected start at ") and "virtual cluster" not in told
    (event,) = [message for _, reason, message in api.events if reason == "Queued"]
    assert "virtual cluster" not in event


def test_one_of_several_vcs_is_named() -> None:
    cells = HivedEngine.from_config(rack_cluster(1, 2, vcs={"a": [{"cellType": "V100-NODE", "count": 1}],
                                                            "b": [{"cellType": "V100-NODE", "count": 1}]}))
    place(cells, "hold", 8, "a")  # VC a's whole quota in use: its Job starts on cpu
    api = RecordingApi()
    free = {name: Resources(cpu_millis=64000, memory_bytes=2**38, gpus=8 if name == "r0n1" else 0) for name in NODES}
    hived_placer(api, cells, [vc_job("ja", "a", created=0), vc_job("jb", "b", created=1)], free=free).admit()
    assert "because no GPU of virtual cluster 'a' was free for it" in placed(api)["ja"]


def test_a_job_with_one_kind_is_not_told_allox_chose_it() -> None:
    # ij-c0 of the session, a cpu-only Job: "started on cpu: AlloX chose cpu (estimated 5 min)".
    api = RecordingApi()
    cpu_only_controller(api, [cpu_job("only", cores="4", created=0, seconds=300)], cores=8).admit()
    message = placed(api)["only"]
    assert message.startswith("started on cpu: ") and "AlloX chose" not in message
    assert "only configuration" in message and "5 min" in message


def test_a_job_moved_back_and_forth_between_kinds_is_told_each_kind_once() -> None:
    # ij-5 and ij-6 of the session each got three Queued Events in 30 s ("1st on cpu", "5th on
    # gpu", "1st on cpu") as the plan moved them while other Jobs started.
    api = RecordingApi()
    running = [job("r-gpu", cpu=6000, gpu=600, suspend=False, placement="gpu", started="2026-01-01T00:00:00Z", version="7"),
               job("r-cpu", cpu=600, gpu=6000, suspend=False, placement="cpu", started="2026-01-01T00:00:00Z", version="7")]
    placer = controller(api, [*running, job("w", cpu=2000, gpu=100, created=1, version="1")], gpus=1)
    watch = placer._jobs
    assert isinstance(watch, Jobs)
    for version, (cpu, gpu) in enumerate([(2000, 100), (200, 2000), (2000, 100), (200, 2000)], start=1):
        watch.jobs = [*running, job("w", cpu=cpu, gpu=gpu, created=1, version=str(version))]
        placer.admit()
    told = [message for _, reason, message in api.events if reason == "Queued"]
    assert [m.split(",")[0] for m in told] == ["queued by AlloX: 1st on gpu", "queued by AlloX: 1st on cpu"]
    # The condition follows it all the same: it says where it waits now.
    assert [c["message"].split(",")[0] for name, c in api.conditions if name == "w"][-1] == "1st on cpu"
