"""A Job AlloX refuses in every kind it has (here: the API server will not rewrite its template
and cellfit's pod-create webhook is off). Seen live (user29): its Placed condition named only
the last kind refused ("… on cpu: …" while gpu was refused too), and ``kubectl cellfit queue``
printed "AlloX's queue is empty" with two such Jobs waiting. Now the condition names each kind's
refusal, and ``/v1/inspect/allox``'s ``waiting`` lists the Job (reason Refused), which the queue
table shows."""

from __future__ import annotations

from scheduler.kubectl import views
from tests.placer.test_controller import RecordingApi, job
from tests.placer.test_user29_no_pod_webhook import placer_of


def test_every_refused_kind_is_told_and_the_job_is_listed_as_waiting() -> None:
    api = RecordingApi(refuse_template_resources=True)
    placer = placer_of(api, [job("a")], mechanism="auto", pod_webhook=False)
    for _ in range(3):  # one kind refused a pass; the third finds none left to try
        placer.admit()
    told = [c["message"] for name, c in api.conditions if name == "a" and c["reason"] == "Refused"][-1]
    # Both kinds refused for the same reason: named together, the reason once.
    assert told.startswith("AlloX does not start this Job on cpu or gpu: the API server does not let a suspended Job's pod "
                           "template take this configuration (field is immutable)"), told
    assert told.count("admission.enabled: false") == 1
    assert sorted(message.split(":")[0] for _, reason, message in api.events if reason == "PlacementRefused") == [
        "AlloX does not start this Job on cpu", "AlloX does not start this Job on gpu"]
    (row,) = placer.inspect()["waiting"]
    assert row == {"job": "alice/a", "reason": "Refused", "message": told}
    (shown,) = views.queue_rows(placer.inspect())
    assert shown["job"] == "alice/a" and shown["waiting"] == f"refused (Refused): {told}"


def test_kinds_refused_for_different_reasons_are_each_told() -> None:
    api = RecordingApi(refuse_template_resources=True)
    placer = placer_of(api, [job("a")], mechanism="auto", pod_webhook=False)
    placer.admit()  # one kind refused for want of the webhook
    uid = "uid-a"
    (kind,) = placer._refusals[uid]
    other = ({"cpu", "gpu"} - {kind}).pop()
    placer._refusals[uid][other] = f"the API server refuses this Job in its {other} configuration, so AlloX does not start it there: x"
    expected = {
        kind: f"AlloX does not start this Job on {kind}: the API server does not let a suspended Job's pod template take this "
              "configuration (field is immutable), and cellfit's pod-create webhook, which would give each pod the configuration "
              "instead, is off (admission.enabled: false), so its pods would run without it",
        other: f"the API server refuses this Job in its {other} configuration, so AlloX does not start it there: x",
    }
    assert placer._refusal_told(uid).split("; ") == [expected[k] for k in sorted(expected)]
