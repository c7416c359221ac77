"""A victim of the leader's reclaim whose deletion fails once (an API error: the round logs it and
the next round retries) is told its own place among its Job's failed pods, not one more (review24
F8). The victim's outcome was computed by FitGppEngine.victim_outcomes, which also recorded the
victim among its Job's failed pods that status.failed does not count yet; the deletion failed,
the victim stayed recorded, and the retry counted it as a failed pod before itself: "its Job fails
instead of resuming, ... this is its 3rd failed pod, over its backoffLimit 2" to the Job's 2nd,
in its Event and its DisruptionTarget condition. Now the outcome is computed without recording,
and the victim is recorded once its deletion succeeded.

tests/cluster/test_reclaim_victim_job_outcome.py's scene (the real ReclaimController, FitGppEngine
and HivedEngine), its API server failing the first deletion with a 500."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import tests.cluster.test_reclaim_victim_job_outcome as scene
from scheduler.cluster.reclaim import Reclaim, ReclaimController
from scheduler.errors import KubernetesApiError
from tests.cluster.test_reclaim import Api
from tests.preemption.test_hived_reclaim_victim_event import NOT_IGNORING, job


class FailingOnce(Api):
    """Fails the first pod deletion, as an API server timing out does."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    def delete_pod(self, **kwargs: Any) -> None:
        if self.failures == 0:
            self.failures += 1
            raise KubernetesApiError("etcdserver: request timed out", status=500)
        super().delete_pod(**kwargs)


class RetriedNextRound(ReclaimController):
    """Runs the next round at once where a round deleted nothing, as the controller's loop does a
    period later: the waiting pod's victim is retried."""

    def reconcile(self) -> list[Reclaim]:
        return super().reconcile() or super().reconcile()


@pytest.fixture
def failing_once(monkeypatch: pytest.MonkeyPatch) -> list[FailingOnce]:
    made: list[FailingOnce] = []

    def api() -> FailingOnce:
        made.append(FailingOnce())
        return made[-1]

    monkeypatch.setattr(scene, "Api", api)
    monkeypatch.setattr(scene, "ReclaimController", RetriedNextRound)
    return made


def test_a_retried_deletion_tells_the_victim_its_own_place_among_the_failed_pods(failing_once: list[FailingOnce]) -> None:
    said, engine, victim = scene.reclaimed_message(job("ob", backoff_limit=2, failed=1))
    (api,) = failing_once
    assert api.failures == 1 and len(api.deleted) == 1  # failed once, deleted at the retry
    assert said.endswith(
        f"{scene.HEAD}; its Job counts it as a failed pod against its backoffLimit 2, {NOT_IGNORING}: its 2nd failed pod, so the next one fails the Job"
    ), said


def test_the_victim_deleted_at_the_retry_is_counted_once_for_its_jobs_next_preemption(failing_once: list[FailingOnce]) -> None:
    _, engine, victim = scene.reclaimed_message(job("ob", backoff_limit=2, failed=1))
    shown = engine.victim(victim)
    assert shown is not None
    # status.failed (1) does not count the deleted victim yet: the Job's next preempted pod is its 3rd, not its 4th.
    assert engine.victim_outcomes([msgspec.structs.replace(shown, uid="another")])["another"] == (
        f"its Job fails instead of resuming, {NOT_IGNORING} and this is its 3rd failed pod, over its backoffLimit 2"
    )
