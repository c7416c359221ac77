"""An API error is read with its causes: the API server answers a JSON Patch whose operation
failed (a ``test`` guarding a write: another writer was first) with a generic message and the
operation's own error only as the one cause. Read without it, a start that lost a race to a
Job's other writer looked like the API server refusing the Job as patched (422, invalid), and
AlloX refused the Job in that kind until its template changed: seen on the local control plane,
a two-pod GPU Job started on CPU instead (e2e/test_allox_hived.py)."""

from __future__ import annotations

import json

from placer.controller import _refuses_job, _template_immutable
from scheduler.cluster.api import _status_error
from scheduler.kube import wire
from tests.support.json_patch import failed_operation_status, failed_test_error


def test_a_failed_test_operation_is_named_in_the_error() -> None:
    error = failed_test_error("/metadata/resourceVersion", action="patch job alice/pair")
    assert str(error) == ("patch job alice/pair: the server rejected our request due to an error in our request; "
                          "testing value /metadata/resourceVersion failed: test failed (HTTP 422)")
    assert error.status == 422


def test_a_start_that_lost_its_race_is_neither_a_refusal_nor_an_immutable_template() -> None:
    for path in ("/spec/suspend", "/metadata/resourceVersion"):
        error = failed_test_error(path, action="patch job alice/pair")
        assert not _refuses_job(error)
        assert not _template_immutable(error)


def test_a_real_refusal_still_reads_as_one() -> None:
    body = json.dumps({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
        "message": 'Job.batch "pair" is invalid: spec.template: Invalid value: ...: field is immutable',
        "details": {"name": "pair", "group": "batch", "kind": "Job",
                    "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: ...: field is immutable", "field": "spec.template"}]},
    }).encode()
    error = _status_error(422, body, "patch job alice/pair")
    assert str(error).count("field is immutable") == 1  # a cause the message holds is not told twice
    assert _refuses_job(error) and _template_immutable(error)


def test_a_status_without_details_reads_as_its_message() -> None:
    assert wire.STATUS_DECODER.decode(b'{"message": "jobs.batch \\"x\\" not found", "code": 404}').text() == 'jobs.batch "x" not found'
    assert wire.STATUS_DECODER.decode(failed_operation_status("boom")).text().endswith("; boom")
    assert wire.Status().text() == ""


def test_a_start_another_writer_beat_is_not_refused_and_starts_at_the_next_pass() -> None:
    from tests.placer.test_controller import Jobs
    from tests.placer.test_review_61 import ServerApi, server_controller, stored_job

    api = ServerApi([stored_job("pair", created=0)])
    watch = Jobs(api.watched())  # the watch shows version 1
    # Another writer (the estimator's annotation, the Job controller's status) is first.
    api.edit("pair", lambda body: body["metadata"]["annotations"].update({"example.com/note": "1"}))
    placer = server_controller(api, watch)
    placer.admit()
    assert api.jobs["pair"]["spec"]["suspend"] is True
    assert [e for e in api.events if e[1] == "PlacementRefused"] == []
    assert api.told.get("pair", {}).get("reason") != "Refused"
    watch.jobs = api.watched()
    placer.admit()
    assert api.jobs["pair"]["spec"]["suspend"] is False
