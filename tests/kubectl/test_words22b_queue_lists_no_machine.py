"""``kubectl cellfit queue`` lists the Jobs AlloX holds without a machine (seen live twice): it
printed "AlloX's queue is empty" while ``kubectl cellfit why job/y-huge`` said "queued by AlloX
(NoMachine): ..." of a Job no machine of AlloX's fits. The inspect document now lists such Jobs
(``waiting``: their Placed condition's reason and message), and the queue's table shows them with
a WAITING column, in the words ``why`` uses.

The view is a real placer's (placer/controller.py), served through test_cli's API server double;
``why`` answers from the condition that placer wrote on the Job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from placer.controller import PlacerController
from scheduler.core.resources import Resources
from scheduler.kubectl import cli
from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.views import queue_rows
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_cli import PROXY, ApiServer, config
from tests.placer.test_controller import RecordingApi
from tests.placer.test_guarantee import engine, gpu_only_placer, place
from tests.placer.test_words21b_no_machine import cpu_only, placer

__all__ = ["config"]  # test_cli's fixture: a kubeconfig for this API server

GIB = 2**30
NODE = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=0)
NEVER = ("AlloX's nodes (allox.nodeSelector) cannot start this Job: cellfit.io/configurations.cpu.resources, 500 cores a "
         "pod, more than they have in all (64 cores): it never fits")


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    server = ApiServer(None)
    yield server
    server.close()


def admitted(*jobs: Any) -> tuple[PlacerController, RecordingApi]:
    api = RecordingApi()
    live = placer(api, list(jobs), free=[Resources(cpu_millis=8_000, memory_bytes=256 * GIB, gpus=0)], capacity=NODE)
    live.admit()
    return live, api


def test_the_inspect_document_lists_a_job_no_machine_fits_with_its_reason() -> None:
    live, api = admitted(cpu_only("y-huge", "500"))
    (told,) = [condition for name, condition in api.conditions if name == "y-huge"]
    assert (told["reason"], told["message"]) == ("NoMachine", NEVER)
    document = live.inspect()
    assert document["queue"] == {}
    assert document["waiting"] == [{"job": "alice/y-huge", "reason": "NoMachine", "message": NEVER}]
    assert document["lastDecision"]["unplaceable"] == ["alice/y-huge"]  # as before


def test_queue_and_why_agree_on_a_job_no_machine_fits(config: Path, apiserver: ApiServer) -> None:
    live, api = admitted(cpu_only("y-huge", "500"), cpu_only("big", "32"))
    apiserver.routes[f"{PROXY}/v1/inspect/allox"] = (200, json.loads(json.dumps(live.inspect())))
    table = cli.run(["queue"])
    assert "AlloX's queue is empty" not in table
    lines = table.splitlines()
    assert lines[0].split() == ["JOB", "KIND", "POSITION", "EXPECTED-START", "VC", "WAITING"]
    huge = next(line for line in lines if line.startswith("alice/y-huge "))
    assert huge.split()[1:5] == ["-", "-", "-", "-"]
    assert huge.endswith(f"no machine (NoMachine): {NEVER}")
    big = next(line for line in lines if line.startswith("alice/big "))
    assert "no machine (NoMachine): AlloX's nodes (allox.nodeSelector) cannot start this Job: cellfit.io/configurations.cpu." \
        "resources, 32 cores a pod, more than any of them has free now" in big

    # why of the same Job, from the condition this placer wrote: the same reason and words, and that it
    # cannot run as configured, not queued (user26 #5).
    (condition,) = [condition for name, condition in api.conditions if name == "y-huge"]
    body = {"metadata": {"name": "y-huge", "namespace": "alice", "uid": "uid-y-huge",
                         "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "500"}}}),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
            "spec": {"suspend": True}, "status": {"conditions": [condition]}}
    answer = explain_job(job_from(body), CellfitView())
    assert (answer.reason, answer.summary) == (
        "cannot-run", f"cannot run as configured (AlloX's NoMachine): {NEVER}; change its cellfit.io/configurations")


def test_a_queue_without_held_jobs_keeps_its_columns(config: Path, apiserver: ApiServer) -> None:
    view = {"queue": {"gpu": [{"job": "ml/a", "kind": "gpu", "position": 1, "expectedStartSeconds": 30.0}]}, "waiting": []}
    apiserver.routes[f"{PROXY}/v1/inspect/allox"] = (200, view)
    assert cli.run(["queue"]).splitlines() == ["JOB    KIND   POSITION   EXPECTED-START   VC", "ml/a   gpu    1          ~30 s            -"]
    apiserver.routes[f"{PROXY}/v1/inspect/allox"] = (200, {"queue": {}, "waiting": []})
    assert cli.run(["queue"]) == "AlloX's queue is empty"


@pytest.mark.parametrize(("held", "free_gpus", "reason", "said"), [
    (8, 8, "WaitingForQuota", "its VC's quota (WaitingForQuota): waiting for a GPU of virtual cluster 'a'"),
    (0, 0, "NoMachine", "no machine (NoMachine): virtual cluster 'a' has free guaranteed GPUs, but AlloX's nodes"),
])
def test_a_job_waiting_on_its_vc_is_listed_with_its_vc_and_reason(held: int, free_gpus: int, reason: str, said: str) -> None:
    cells = engine()
    if held:
        place(cells, "hold", held, "a")
    api = RecordingApi()
    live = gpu_only_placer(cells, api, free_gpus=free_gpus)
    live.admit()
    ((_, condition),) = api.conditions
    (listed,) = live.inspect()["waiting"]
    assert listed == {"job": "a/g", "reason": reason, "message": condition["message"], "virtualCluster": "a"}
    (row,) = queue_rows(live.inspect())
    assert row["vc"] == "a" and row["waiting"].startswith(said), row


def test_a_job_backing_off_after_a_failed_start_is_listed_as_such() -> None:
    """A Job AlloX suspended again (none of its pods bound within 300 s) waits out a back-off in
    that kind (placer 5f9a53f): queue lists it as backing off, not 'not queued'."""
    said = "gpu start failed: no pod was bound within 300 s; not started in gpu again before 2026-11-28T20:07:00Z"
    view = {"queue": {}, "waiting": [{"job": "ml/a", "reason": "SuspendedAgain", "message": said, "virtualCluster": None}]}
    (row,) = queue_rows(view)
    assert row["waiting"] == f"backing off (SuspendedAgain): {said}", row
