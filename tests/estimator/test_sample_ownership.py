"""Which pods are a Job's samples: those in the Job's namespace that the Job owns (as
sample_pod.build_sample_pod makes them), not any pod that carries the Job's UID in its
``cellfit.io/sample-job`` label. One reconcile pass at a time over a recording API."""

from __future__ import annotations

import json
from typing import Any

from estimator.controller import EstimatorController
from estimator.objects import POD_DECODER
from tests.estimator.test_controller import finished, job
from tests.estimator.test_review_62 import CREATED_AT, Clock, DeletingApi, estimator_for


class WhereDeletingApi(DeletingApi):
    """The recording API that also remembers where each deleted pod was."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted_at: list[tuple[str, str]] = []

    def delete_pod(self, *, namespace: str, name: str, **rest: Any) -> None:  # type: ignore[override]
        self.deleted_at.append((namespace, name))
        super().delete_pod(name=name, **rest)


def sampled(name: str) -> tuple[WhereDeletingApi, EstimatorController, list[dict[str, Any]]]:
    """A Job of namespace ``ml``, its first runs created: the API, the estimator, the runs (each
    with a pod UID, as the API server gives it)."""
    api = WhereDeletingApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    estimator._replace_jobs([job(name)])
    estimator.reconcile()
    return api, estimator, [copied(body, uid=f"pod-{i}") for i, body in enumerate(api.created)]


def copied(body: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """``body`` with its metadata changed (a key given None is taken off)."""
    copy: dict[str, Any] = json.loads(json.dumps(body))
    for key, value in metadata.items():
        if value is None:
            copy["metadata"].pop(key, None)
        else:
            copy["metadata"][key] = value
    return copy


def running(body: dict[str, Any]) -> Any:
    return POD_DECODER.decode(json.dumps({**body, "status": {"phase": "Running"}}).encode())


def reported(body: dict[str, Any]) -> Any:
    """A run that reports 1 ms (and 0.5 ms at its split)."""
    return finished(body, 0.001, splits=[[10, 0.0005]])


def estimates(api: DeletingApi) -> list[dict[str, Any]]:
    return [json.loads(a["cellfit.io/estimate"]) for _, a in api.annotations if "cellfit.io/estimate" in a]


def samples(estimator: EstimatorController) -> list[tuple[str, str]]:
    """The Job's runs as ``GET /v1/inspect/estimates`` shows them: pod and state."""
    (view,) = estimator.inspect()["jobs"]
    return sorted((row["pod"], row["state"]) for row in view["samples"])


def deleted_with_the_job(estimator: EstimatorController, uid: str) -> None:
    estimator.delete_job(uid)
    estimator._creator.shutdown(wait=True)  # the deletions go out from the creators' pool


def test_pods_elsewhere_under_a_jobs_sample_names_with_an_owner_reference_to_it_are_not_its_samples():
    """Pods in another namespace under the names of the Job's running samples, with an owner
    reference to the Job (any text its writer chooses) and reports of 1 ms: they stood for the
    Job's own samples (pods were kept by name alone) and made its estimate; and once deleted, they
    took the real samples out of sight with them."""
    api, estimator, runs = sampled("victim")
    spoofs = [reported(copied(body, namespace="elsewhere", uid=f"spoof-{i}")) for i, body in enumerate(runs)]
    estimator._replace_pods([running(body) for body in runs] + spoofs)
    estimator.reconcile()
    assert estimates(api) == [] and api.deleted_at == []
    for spoof in spoofs:
        estimator.delete_pod(spoof)
    estimator.reconcile()
    # The Job's own samples still run: nothing created again, nothing estimated.
    assert samples(estimator) == sorted((body["metadata"]["name"], "running") for body in runs)
    assert len(api.created) == len(runs) and estimates(api) == []


def test_a_pod_of_the_jobs_namespace_labelled_with_its_uid_but_not_owned_by_it_is_neither_read_nor_deleted():
    """A user's own pod in the Job's namespace, labelled as one of the Job's samples (a copy of a
    sampling pod, its owner reference dropped): not read, and not deleted with the Job, which
    deletes only the pods it made."""
    api, estimator, runs = sampled("victim")
    stranger = copied(runs[0], name="mine", uid="mine", ownerReferences=None)
    estimator._replace_pods([running(body) for body in runs] + [reported(stranger)])
    estimator.reconcile()
    assert samples(estimator) == sorted((body["metadata"]["name"], "running") for body in runs) and estimates(api) == []
    deleted_with_the_job(estimator, "uid-victim")
    assert sorted(api.deleted_at) == sorted(("ml", body["metadata"]["name"]) for body in runs)


def test_a_sample_whose_owner_reference_an_orphaning_deletion_took_off_is_still_deleted_with_its_job():
    """A Job deleted with ``propagationPolicy: Orphan``: the garbage collector takes the owner
    reference off its pods before the Job goes. The sampling pods, seen owned before, are still
    the estimator's to delete."""
    api, estimator, runs = sampled("orphaning")
    estimator._replace_pods([running(body) for body in runs])
    for body in runs:
        estimator.apply_pod(running(copied(body, ownerReferences=None)))
    deleted_with_the_job(estimator, "uid-orphaning")
    assert sorted(api.deleted_at) == sorted(("ml", body["metadata"]["name"]) for body in runs)
