"""A gang member FitGpp takes on another node than the answered one (which cellfit deletes
itself) has its DisruptionTarget mark tried again while the API server fails for a moment (5xx,
429, no answer), with the deletion's bounded pauses, before it is deleted: a Job whose
podFailurePolicy ignores DisruptionTarget then resumes instead of counting a failure.

Before (review25 #7), a 503 on the mark was logged and the member deleted at once without the
condition, the deletion succeeding: the Job counted a failure for cellfit's preemption (its
backoffLimit spent, or the Job failed by a FailJob rule on exit codes). A mark that fails on
every try is given up: the member is deleted all the same (its gang-mates are gone; left
running it would hold its GPUs for a hung job) with a warning naming what its Job may count.

tests/cluster/test_gang_member_preemption_retried.py's replica and gang."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster import disruption
from scheduler.errors import KubernetesApiError
from tests.cluster.test_gang_member_preemption_retried import FailingDeletionApi
from tests.cluster.test_preemptor_record_write import preempt, replica, trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.kube_objects import node


class MarkFailsApi(FailingDeletionApi):
    """gang-1's mark fails ``mark_failures`` times with 503 (recorded, then refused)."""

    def __init__(self, *, mark_failures: int, **lists: Any) -> None:
        super().__init__(failures=0, status=500, **lists)
        self.mark_failures = mark_failures
        self.marks_failed = 0
        self.marked_before_deletion = False

    def write_path(self, method: str, path: str, body: Any, *, content_type: str = "application/json") -> bytes:
        if path.endswith("/pods/gang-1/status") and "status" in body:
            if self.marks_failed < self.mark_failures:
                self.marks_failed += 1
                raise KubernetesApiError("patch pods/gang-1/status: HTTP 503", status=503)
            if "ml/gang-1" not in self.deleted:
                self.marked_before_deletion = True
        return super().write_path(method, path, body, content_type=content_type)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "PREEMPT_PAUSES_SECONDS", (0.0, 0.0, 0.0, 0.0))


def gang_api(*, mark_failures: int) -> MarkFailsApi:
    return MarkFailsApi(mark_failures=mark_failures, nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)],
                        pods=[member(0, "gpu-a"), member(1, "gpu-b"), trial_pod()])


def test_a_member_whose_mark_fails_for_a_moment_is_deleted_marked() -> None:
    api = gang_api(mark_failures=2)
    cache, service, _ = replica(api)
    preempt(service, cache)
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert api.marked_before_deletion, "gang-1 was deleted without its DisruptionTarget condition"


def test_a_member_whose_mark_keeps_failing_is_deleted_unmarked_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    api = gang_api(mark_failures=100)
    cache, service, _ = replica(api)
    with caplog.at_level(logging.WARNING, logger=disruption.__name__):
        preempt(service, cache)
    assert api.marks_failed == len(cache_module.PREEMPT_PAUSES_SECONDS) + 1
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    assert not api.marked_before_deletion
    (warning,) = [r for r in caplog.records if r.name == disruption.__name__]
    assert "DisruptionTarget condition was not written" in warning.getMessage()
    assert warning.pod == "ml/gang-1"  # type: ignore[attr-defined]
