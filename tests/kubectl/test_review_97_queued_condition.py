"""``kubectl cellfit why`` for a Job in AlloX's queue when cellfit's inspect API has no entry for
it (a standby answered, AlloX's view is off): the Job's ``Placed`` condition says its place and
its expected start as a time, and the answer says the wait from when it is asked. A condition an
older cellfit wrote ("expected start in ~12 min") reads from when it was written."""

from __future__ import annotations

import pytest

from placer.controller import queued_message
from scheduler.kubectl.objects import CellfitView, Facts, job_from
from scheduler.kubectl.why import explain, explain_job
from tests.kubectl.test_why import interchangeable

WRITTEN = 1767225700.0  # 2026-01-01T00:01:40Z


def queued_job(message: str, *, since: str = "2026-01-01T00:01:40Z") -> Facts:
    placed = {"type": "Placed", "status": "False", "reason": "Queued", "message": message, "lastTransitionTime": since}
    return Facts(job=job_from(interchangeable(conditions=[placed], estimate=True)))


@pytest.mark.parametrize(("asked_after", "said"), [(0, "in ~12 min"), (5 * 60, "in ~7 min"), (15 * 60, "~3 min ago")])
def test_the_expected_start_the_condition_says_is_told_from_when_it_is_asked(asked_after: float, said: str) -> None:
    facts = queued_job(queued_message(place="2nd on gpu", starts_at=WRITTEN + 12 * 60))
    answer = explain_job(facts.job, CellfitView(), now=WRITTEN + asked_after)  # type: ignore[arg-type]
    assert answer.reason == "allox-queue"
    assert answer.summary == f"queued by AlloX: 2nd on gpu, expected start {said}"
    assert answer.details[-1] == "Placed: 2nd on gpu, expected start at 2026-01-01T00:13:40Z (AlloX)"


def test_an_older_cellfits_wording_reads_from_when_it_was_written() -> None:
    facts = queued_job("1st on cpu of virtual cluster 'vision', expected start in ~3.5 h (AlloX)")
    answer = explain(Facts(job=facts.job, now=WRITTEN + 30 * 60))
    assert answer.summary == "queued by AlloX: 1st on cpu of virtual cluster 'vision', expected start in ~3.0 h"
    seconds = queued_job("1st on cpu, expected start in ~95 s (AlloX)")
    assert explain(Facts(job=seconds.job, now=WRITTEN + 35)).summary == "queued by AlloX: 1st on cpu, expected start in ~60 s"


def test_a_condition_whose_time_does_not_read_is_said_as_written() -> None:
    message = "1st on cpu, expected start in ~95 s (AlloX)"
    facts = queued_job(message, since="")
    assert explain(Facts(job=facts.job, now=WRITTEN)).summary == f"queued by AlloX (Queued): {message}"
    unknown_time = queued_job(queued_message(place="1st on cpu", starts_at=WRITTEN))
    assert explain(unknown_time).summary.startswith("queued by AlloX (Queued): 1st on cpu, expected start at ")  # no now: as written
