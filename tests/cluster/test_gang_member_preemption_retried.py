"""A gang member on another node than the preemption's is deleted by cellfit alone (kube-scheduler
deletes the victims of the node it picks): the replica that answered marks it DisruptionTarget
and deletes it, tried again while the API server fails for a moment (5xx), so that one failed
call no longer leaves it running while its gang-mates are gone. A member already gone (404) or
re-created under its name (409: the UID guard) is done, not an error; and its Preempted Event
is written once, however many tries the deletion took.

Before, the deletion was tried once: a 500 left gang-1 running on gpu-b for ever.

The cache and the preempt verb as ``cellfit serve`` wires them, over a recording API double
(tests/preemption/test_gang_members_elsewhere_deleted.py's gang: two 8-GPU pods of Job ml/gang
on gpu-a and gpu-b)."""

from __future__ import annotations

import logging

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.errors import KubernetesApiError
from tests.cluster.test_preemptor_record_write import WritingApi, preempt, replica, trial_pod
from tests.preemption.test_gang_members_elsewhere_deleted import member
from tests.support.kube_objects import node


class FailingDeletionApi(WritingApi):
    """Answers the first ``failures`` deletions of a pod with ``status``, then deletes it;
    ``attempts`` counts each pod's deletions tried, ``deleted`` holds the pods deleted, by
    ``namespace/name``, with the UID their deletion was guarded by."""

    def __init__(self, *, failures: int, status: int, **lists: object) -> None:
        super().__init__(**lists)  # type: ignore[arg-type]
        self.failures = failures
        self.status = status
        self.attempts: dict[str, int] = {}
        self.deleted: dict[str, str | None] = {}

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        key = f"{namespace}/{name}"
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if self.attempts[key] <= self.failures:
            raise KubernetesApiError(f"delete pod {key}: HTTP {self.status}", status=self.status)
        self.deleted[key] = uid


def gang_api(*, failures: int, status: int) -> FailingDeletionApi:
    return FailingDeletionApi(
        failures=failures,
        status=status,
        nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)],
        pods=[member(0, "gpu-a"), member(1, "gpu-b"), trial_pod()],
    )


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "PREEMPT_PAUSES_SECONDS", (0.0, 0.0, 0.0, 0.0))


def preempted_events(api: FailingDeletionApi, pod_name: str) -> list[str]:
    return [e["message"] for e in api.events if e["reason"] == "Preempted" and e["pod_name"] == pod_name]


def test_a_member_whose_deletion_fails_for_a_moment_is_deleted_on_a_later_try_with_one_event() -> None:
    api = gang_api(failures=2, status=500)
    cache, service, _ = replica(api)
    preempt(service, cache)
    assert api.attempts == {"ml/gang-1": 3}  # gang-0 is kube-scheduler's to delete
    assert api.deleted == {"ml/gang-1": "uid-be-1"}
    marks = [w for w in api.writes if w[0] == "PATCH" and w[1] == "/api/v1/namespaces/ml/pods/gang-1/status"]
    assert marks and all(w[2]["metadata"] == {"uid": "uid-be-1"} for w in marks)
    (message,) = preempted_events(api, "gang-1")
    assert message.startswith("preempted with its gang ml/gang: the trial pod ml/te-0 takes the gang's room on node gpu-a; this pod "
                              "ran on node gpu-b and goes with every pod of the gang ml/gang")


def test_a_member_the_api_server_keeps_failing_is_given_up_after_the_bounded_tries(caplog: pytest.LogCaptureFixture) -> None:
    api = gang_api(failures=100, status=503)
    cache, service, _ = replica(api)
    with caplog.at_level(logging.WARNING, logger=cache_module.__name__):
        preempt(service, cache)
    assert api.attempts == {"ml/gang-1": len(cache_module.PREEMPT_PAUSES_SECONDS) + 1}
    assert api.deleted == {}
    assert [r.what for r in caplog.records if r.getMessage() == "could not record preemption"] == ["preemption of ml/gang-1"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("status", [404, 409])  # gone already; another pod took its name (the UID guard failed)
def test_a_member_gone_or_replaced_is_done_without_error_or_another_try(status: int, caplog: pytest.LogCaptureFixture) -> None:
    api = gang_api(failures=100, status=status)
    cache, service, _ = replica(api)
    with caplog.at_level(logging.WARNING, logger=cache_module.__name__):
        preempt(service, cache)
    assert api.attempts == {"ml/gang-1": 1}
    assert not [r for r in caplog.records if r.getMessage() == "could not record preemption"]
    assert len(preempted_events(api, "gang-1")) == 1


@pytest.mark.parametrize("status", [404, 409])
def test_a_member_the_mark_finds_gone_or_replaced_is_not_deleted(status: int) -> None:
    api = gang_api(failures=0, status=500)
    refused = api.write_path

    def mark_refused(method: str, path: str, body: object, *, content_type: str = "application/json") -> bytes:
        if path.endswith("/gang-1/status"):
            api.writes.append((method, path, body, content_type))
            raise KubernetesApiError(f"patch {path}: HTTP {status}", status=status)
        return refused(method, path, body, content_type=content_type)

    api.write_path = mark_refused  # type: ignore[method-assign]
    cache, service, _ = replica(api)
    preempt(service, cache)
    assert api.attempts == {}  # that incarnation is not there: nothing to delete
