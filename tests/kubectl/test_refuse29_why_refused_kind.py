"""``kubectl cellfit why job/`` of a Job AlloX refuses on cpu while it waits on gpu: its Placed
condition says, after its place, ``; not on cpu: <why>`` (placer/controller.py _refusal_note),
and the answer's summary says it with the place, whether AlloX's queue entry gives the place or
the condition alone does (cellfit's inspect API unreachable: the wait is still said from when it
is asked, not the condition as written)."""

from __future__ import annotations

from placer.controller import queued_message
from scheduler.kubectl.objects import CellfitView, Facts
from scheduler.kubectl.views import queue_rows
from scheduler.kubectl.why import explain, explain_job
from tests.kubectl.test_review_97_queued_condition import WRITTEN, queued_job

NOTE = "; not on cpu: its pods would run outside AlloX's nodes: cellfit.io/configurations.cpu.nodeSelector[pool]: 'batch' is not 'allox'"


def test_the_condition_alone_says_the_wait_and_the_refused_kind() -> None:
    facts = queued_job(queued_message(place="2nd on gpu", starts_at=WRITTEN + 12 * 60) + NOTE)
    answer = explain(Facts(job=facts.job, now=WRITTEN))
    assert answer.reason == "allox-queue"
    assert answer.summary == f"queued by AlloX: 2nd on gpu, expected start in ~12 min{NOTE}"


def test_the_queue_entry_gives_the_place_and_the_condition_the_refused_kind() -> None:
    facts = queued_job(queued_message(place="1st on gpu", starts_at=WRITTEN + 60) + NOTE)
    entry = {"job": "ns/ij", "kind": "gpu", "position": 1, "expectedStartSeconds": 60.0}
    answer = explain_job(facts.job, CellfitView(allox_entry=entry))  # type: ignore[arg-type]
    assert answer.summary == f"queued by AlloX: 1st on gpu, expected start in ~1 min or less{NOTE}"
    # without the note, as before
    plain = queued_job(queued_message(place="1st on gpu", starts_at=WRITTEN + 60))
    assert explain_job(plain.job, CellfitView(allox_entry=entry)).summary == "queued by AlloX: 1st on gpu, expected start in ~1 min or less"  # type: ignore[arg-type]


def test_the_queue_table_says_the_refused_kind_after_a_back_off() -> None:
    view = {"queue": {"gpu": [{"job": "ns/ij", "kind": "gpu", "position": 1, "expectedStartSeconds": 60.0,
                               "backingOff": "backing off on tpu until 2026-01-01T00:30:00Z",
                               "refused": NOTE.removeprefix("; ")}]}}
    (row,) = queue_rows(view)
    assert row["waiting"] == "backing off on tpu until 2026-01-01T00:30:00Z" + NOTE
