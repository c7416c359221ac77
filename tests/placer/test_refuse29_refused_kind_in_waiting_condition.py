"""An interchangeable Job AlloX refuses in one kind (here its cpu configuration selects nodes
outside AlloX's pool) while it waits for the other (gpu, in use). Seen in user29's walkthrough:
its condition said only the waiting, the refusal was in one PlacementRefused Event, which
expires after an hour, so ``kubectl describe job`` later showed a Job "waiting for a gpu" with
no word that its cpu configuration is never used. The waiting condition now says, after why it
waits, ``; not on cpu: <why>``, on the writes it already had; a restart reads the condition
back as it did without the note, and a Job changed since its refusal loses the note at its next
condition write."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController, backing_off_said, queued_said, told_first
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.kubectl import views
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_live23_pool_selector import CONFIGURATIONS, POOL, template

NOW = 1767225700.0
OUTSIDE = {**CONFIGURATIONS, "cpu": {**CONFIGURATIONS["cpu"], "nodeSelector": {"pool": "batch"}}}
FIXED = {**CONFIGURATIONS, "cpu": {**CONFIGURATIONS["cpu"], "nodeSelector": {"disk": "ssd"}}}
CPU_REFUSED = ("; not on cpu: its pods would run outside AlloX's nodes: cellfit.io/configurations.cpu.nodeSelector[pool]: "
               "'batch' is not 'allox'")


def job_body(name: str, *, configurations: dict[str, Any] = OUTSIDE, version: str = "1", created: int = 0,
             running_on: str | None = None, placed: dict[str, Any] | None = None) -> Any:
    annotations = {"cellfit.io/configurations": json.dumps(configurations),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 30}, "gpu": {"seconds": 40}})}
    status: dict[str, Any] = {}
    if running_on is not None:
        annotations["cellfit.io/placement"] = running_on
        status["startTime"] = "2026-01-01T00:01:30Z"
    if placed is not None:
        status["conditions"] = [{"type": "Placed", "lastTransitionTime": "2026-01-01T00:01:00Z", **placed}]
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "annotations": annotations,
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z", "resourceVersion": version},
            "spec": {"suspend": running_on is None, "template": template()}, "status": status}
    return JOB_DECODER.decode(json.dumps(body).encode())


class Cluster:
    """One node of AlloX's pool: one GPU, ``cpus`` free cores; ``gpu_busy``: its GPU runs Job r,
    which AlloX started (a Job queues behind it), else pods AlloX did not start hold it."""

    def __init__(self, *, cpus: int = 5, gpu_busy: bool = True) -> None:
        self.cpus, self.gpu_busy = cpus, gpu_busy

    def placer(self, api: RecordingApi, jobs: list[Any]) -> PlacerController:
        return PlacerController(
            api=api, jobs=Jobs(jobs),
            settings=AlloxSettings(alpha=1.0, mechanism="auto", solver_process=False, node_selector=POOL),
            gpu_resource="nvidia.com/gpu",
            free_by_node=lambda running: {"n1": Resources(cpu_millis=self.cpus * 1000, memory_bytes=64 * 2**30,
                                                          gpus=0 if self.gpu_busy and not running else 1 - len(running))},
            capacity=lambda: Resources(cpu_millis=6000, memory_bytes=64 * 2**30, gpus=1),
            clock=lambda: NOW,
        )


def refusal_note_split(message: str) -> tuple[str, str]:
    """(why it waits, "; not on cpu: <why>" or "")."""
    head, marker, note = message.partition("; not on cpu: ")
    return head, marker + note


def placed_of(api: RecordingApi, name: str = "a") -> list[dict[str, Any]]:
    return [condition for who, condition in api.conditions if who == name]


def queued_behind_a_running_job() -> tuple[RecordingApi, PlacerController, Jobs]:
    api = RecordingApi()
    placer = Cluster().placer(api, [job_body("r", running_on="gpu"), job_body("a", created=1)])
    for _ in range(2):  # the first pass chooses a on the free CPUs and is refused; the next queues it on gpu
        placer.admit()
    assert isinstance(placer._jobs, Jobs)
    return api, placer, placer._jobs


def test_a_job_refused_on_cpu_and_queued_on_gpu_carries_both() -> None:
    api, placer, _ = queued_behind_a_running_job()
    refused, queued = placed_of(api)
    assert refused["reason"] == "Refused" and refused["message"].startswith("AlloX does not start this Job on cpu: ")
    assert queued["reason"] == "Queued"
    assert queued["message"].startswith("1st on gpu, expected start at ")
    head, note = refusal_note_split(queued["message"])
    assert head.endswith(" (AlloX)") and note.startswith(CPU_REFUSED)
    assert note == "; not on cpu: " + refused["message"].removeprefix("AlloX does not start this Job on cpu: ")
    # the note once, on the write the queue already made: a third pass writes nothing
    placer.admit()
    assert len(placed_of(api)) == 2
    # kubectl cellfit queue shows it beside the place
    (row,) = views.queue_rows(placer.inspect())
    assert row["job"] == "alice/a" and row["position"] == 1 and row["waiting"] == note.removeprefix("; ")


def test_a_job_held_waiting_for_its_machine_carries_the_refusal_too() -> None:
    api = RecordingApi()
    placer = Cluster().placer(api, [job_body("a")])  # the GPU held by pods AlloX did not start
    for _ in range(3):
        placer.admit()
    refused, waiting = placed_of(api)
    assert refused["reason"] == "Refused" and waiting["reason"] == "WaitingForMachine"
    head, note = refusal_note_split(waiting["message"])
    assert "every gpu machine of AlloX's nodes is in use" in head and note.startswith(CPU_REFUSED)
    (row,) = placer.inspect()["waiting"]
    assert row == {"job": "alice/a", "reason": "WaitingForMachine", "message": waiting["message"]}
    (shown,) = views.queue_rows(placer.inspect())
    assert shown["waiting"].endswith(note)


def test_a_restart_reads_the_condition_back_as_without_the_note() -> None:
    api, _, _ = queued_behind_a_running_job()
    told = placed_of(api)[-1]
    head, note = refusal_note_split(told["message"])
    assert note and queued_said(told["message"]) == queued_said(head) is not None
    assert told_first(told["message"], position=1) == told_first(head, position=1) == 1
    assert backing_off_said(told["message"]) == backing_off_said(head) == ""
    for message in (told["message"], head):  # a restart finding the condition with and without the note
        restarted_api = RecordingApi()
        placed = {key: told[key] for key in ("status", "reason")} | {"message": message}
        # no CPU free: the restart does not choose a on cpu again, and its place stands
        restarted = Cluster(cpus=0).placer(restarted_api, [job_body("r", running_on="gpu"), job_body("a", created=1, placed=placed)])
        for _ in range(2):
            restarted.admit()
        assert placed_of(restarted_api) == [], message  # read back as told: no write
        assert not [event for event in restarted_api.events if event[1] == "Queued"], message  # queued there already
        assert restarted.inspect()["queue"]["gpu"][0]["job"] == "alice/a"


def test_a_job_changed_since_its_refusal_loses_the_note_at_its_next_write() -> None:
    api, placer, jobs = queued_behind_a_running_job()
    assert refusal_note_split(placed_of(api)[-1]["message"])[1]
    # its user fixes the cpu configuration while the CPUs are taken: not chosen there this pass
    placer._free_by_node = lambda running: {"n1": Resources(cpu_millis=0, memory_bytes=64 * 2**30, gpus=0)}
    jobs.jobs = [job_body("r", running_on="gpu"), job_body("a", created=1, version="2")]  # another version, as refused
    placer.admit()
    assert len(placed_of(api)) == 2  # the refusal stands: its note too, nothing written
    jobs.jobs = [job_body("r", running_on="gpu"), job_body("a", created=1, configurations=FIXED, version="3")]
    placer.admit()
    last = placed_of(api)[-1]
    assert last["reason"] == "Queued" and refusal_note_split(last["message"]) == (last["message"], "")
    assert "not on cpu" not in last["message"]
    assert [reason for _, reason, _ in api.events].count("PlacementRefused") == 1  # not refused again
