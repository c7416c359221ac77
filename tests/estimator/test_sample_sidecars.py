"""Sampling pods with more than the workload in them: an ordinary sidecar in spec.containers
(istio-proxy, a log shipper) that never exits, and containers whose images the node pulls one
after another. The workload is the container that writes the report."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import POD_DECODER, sample_pod
from scheduler.config import EstimatorSettings
from tests.estimator.test_controller import job
from tests.estimator.test_review_62 import CREATED_AT, Clock, DeletingApi, edited, estimator_for

PENDING_LIMIT = EstimatorSettings().pending_limit_seconds
NOTES = {
    "cellfit.io/sample-configuration": "gpu", "cellfit.io/sample-pilot": "0", "cellfit.io/sample-length": "long",
    "cellfit.io/sample-attempt": "0", "cellfit.io/sample-iterations": "20",
}
START = "2026-01-01T00:00:00Z"  # CREATED_AT


def report(iterations: int, seconds: float, *, split: list[float] | None = None) -> str:
    return json.dumps({"iterations": iterations, "seconds": seconds, **({"splits": [split]} if split else {})})


def with_containers(phase: str, *containers: tuple[str, dict[str, Any]], body: dict[str, Any] | None = None) -> Any:
    """A sampling pod (``body``'s, else a bare one) in ``phase`` with these containers' states."""
    base = body or {"metadata": {"name": "p", "annotations": NOTES}}
    status = {"phase": phase, "startTime": START, "containerStatuses": [{"name": name, "state": state} for name, state in containers]}
    return POD_DECODER.decode(json.dumps({**base, "status": status}).encode())


def viewed(pod: Any, *, now: float = 0.0) -> Any:
    return sample_pod(pod, now=now, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)


SIDECAR_RUNNING = ("istio-proxy", {"running": {"startedAt": START}})


def test_a_reported_run_whose_sidecar_was_killed_after_it_counts():
    """The pod ends Failed once its sidecar is killed (evicted, or deleted with its Job's other
    runs): the workload had exited 0 with its report, and the run counts."""
    killed = ("istio-proxy", {"terminated": {"exitCode": 137, "reason": "Error"}})
    trainer = ("trainer", {"terminated": {"exitCode": 0, "message": report(20, 12.25)}})
    view = viewed(with_containers("Failed", killed, trainer))
    assert view.state == "succeeded" and view.sample is not None and view.sample.seconds == 12.25


def test_a_container_that_exits_without_a_report_does_not_end_the_run():
    """A helper container that exits 0 early (no report) while the trainer runs: the run goes
    on, counted from the trainer's start."""
    helper = ("fetch", {"terminated": {"exitCode": 0, "message": "fetched 3 files"}})
    trainer = ("trainer", {"running": {"startedAt": "2026-01-01T00:00:40Z"}})
    view = viewed(with_containers("Running", helper, trainer), now=CREATED_AT + 100)
    assert view.state == "running" and view.running_seconds == 60.0


def test_a_running_sample_counts_from_its_last_started_container():
    """The sidecar started at once, the trainer after a 3-minute pull of its image: the run is
    the trainer's, 10 s old, not the sidecar's 190 s."""
    trainer = ("trainer", {"running": {"startedAt": "2026-01-01T00:03:00Z"}})
    view = viewed(with_containers("Running", SIDECAR_RUNNING, trainer), now=CREATED_AT + 190)
    assert view.state == "running" and view.running_seconds == 10.0


def test_a_run_that_reported_while_its_sidecar_runs_makes_the_estimate_and_its_pod_is_deleted_with_the_jobs_other_runs():
    """Both configurations' long runs reported (their splits standing for the short runs), the
    GPU one while its sidecar still runs: the Job is estimated from both, and once it is, the pod
    that still holds a GPU for its sidecar is deleted; the ended one stays, as ended runs do."""
    api = DeletingApi()
    clock = Clock(CREATED_AT + 60)
    estimator = estimator_for(api, clock)
    estimator._replace_jobs([job("meshed")])
    estimator.reconcile()
    bodies = {body["metadata"]["annotations"]["cellfit.io/sample-configuration"]: body for body in api.created}
    assert set(bodies) == {"cpu", "gpu"}
    ended = with_containers("Succeeded", ("c", {"terminated": {"exitCode": 0, "message": report(20, 44.0, split=[10, 24.0])}}), body=bodies["cpu"])
    trainer = ("c", {"terminated": {"exitCode": 0, "message": report(20, 12.0, split=[10, 10.0])}})
    meshed = with_containers("Running", SIDECAR_RUNNING, trainer, body=bodies["gpu"])
    estimator._replace_pods([ended, meshed])
    estimator.reconcile()
    written = [json.loads(a["cellfit.io/estimate"]) for _, a in api.annotations if "cellfit.io/estimate" in a]
    assert len(written) == 1 and set(written[0]) == {"cpu", "gpu"}
    assert api.deleted == []
    estimated = edited(estimator._jobs["uid-meshed"], annotations={"cellfit.io/estimate": json.dumps(written[0])})
    estimator._replace_jobs([estimated])
    estimator.reconcile()
    assert api.deleted == [bodies["gpu"]["metadata"]["name"]]
