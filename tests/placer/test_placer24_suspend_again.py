"""A Job AlloX started none of whose pods was bound within the NotBound limit goes back to
AlloX's queue, suspended again (user24, F7): AlloX had started q-u1-4 on its VC's "free" GPUs
that a FitGpp resume hold kept for a preempted Job's resumed pod; the resumed pod won, and
q-u1-4 stayed unsuspended and Pending for ever after AlloX stopped counting its machine. A Job
its user unsuspended by hand, or one whose pods were bound and now wait to be placed again, is
left as it is; a restarted cellfit unsuspends the Job suspended again once, as any waiting Job."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.holding import JobPods
from tests.placer.test_controller import RecordingApi, job
from tests.placer.test_holding import placer_with

LONG_AGO = "2025-12-31T23:20:00Z"  # 40 minutes before the clock: past the 300 s limit


class SuspendingApi(RecordingApi):
    """Records the patches that only suspend a Job apart from the starts."""

    def __init__(self) -> None:
        super().__init__()
        self.suspends: list[tuple[str, list[dict[str, Any]]]] = []

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        if not any(op["path"] == "/spec/template" for op in operations):
            self.suspends.append((name, operations))
            return
        super().patch_job(namespace=namespace, name=name, operations=operations)


def test_an_allox_job_none_of_whose_pods_was_bound_is_suspended_again_and_its_gpu_goes_to_the_queue() -> None:
    api = SuspendingApi()
    stuck = job("q", gpu=120, cpu=300, suspend=False, placement="gpu", started=LONG_AGO, version="7")
    placer = placer_with(api, [stuck, job("w", gpu=100, cpu=1000, created=5)], {"uid-q": JobPods(unbound=1)})
    decision = placer.admit()
    assert api.suspends == [("q", [{"op": "test", "path": "/spec/suspend", "value": False},
                                   {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                                   {"op": "replace", "path": "/spec/suspend", "value": True}])]
    message = ("suspended again, back in AlloX's queue: started on gpu, and none of its pods was bound to a node within 300 s "
               "(the room it was started on went to other pods, or no node takes them now)")
    assert ("q", "SuspendedAgain", message) in api.events
    told = [(c["status"], c["reason"], c["message"]) for name, c in api.conditions if name == "q"]
    assert told == [("False", "SuspendedAgain", message)]
    assert decision.busy_machines == {}  # it holds no machine: w starts on the GPU
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/w", "gpu")]


def test_the_job_suspended_again_waits_and_starts_once_like_any_other_after_a_restart() -> None:
    # The watch shows it suspended (at a new version, its placement kept); a restarted cellfit
    # starts it once: a second pass over the same version patches nothing twice.
    api = SuspendingApi()
    again = job("q", gpu=120, cpu=300, suspend=True, placement="gpu", version="8")
    placer = placer_with(api, [again], {})
    assert [(s.key, s.kind) for s in placer.admit().starts] == [("alice/q", "gpu")]
    placer.admit()
    assert [name for name, _ in api.patches] == ["q"] and api.suspends == []
    ((_, operations),) = api.patches
    assert operations[0] == {"op": "test", "path": "/spec/suspend", "value": True}


def test_a_job_its_user_unsuspended_by_hand_is_not_suspended_again() -> None:
    api = SuspendingApi()
    by_hand = job("h", gpu=120, cpu=300, suspend=False, started=LONG_AGO, version="7")  # no cellfit.io/placement
    placer_with(api, [by_hand], {"uid-h": JobPods(unbound=1)}).admit()
    assert api.suspends == []
    # Its pod may be waiting for a machine: it takes the first to free (user26), and is told so;
    # let go (NotBound) once unbound beside an idle one for the limit (tests/placer/test_holding.py).
    assert [c["reason"] for name, c in api.conditions if name == "h"] == ["Unsuspended"]


def test_a_job_whose_pods_were_bound_and_wait_to_be_placed_again_is_not_suspended() -> None:
    api = SuspendingApi()
    ran = job("r", gpu=120, cpu=300, suspend=False, placement="cpu", started=LONG_AGO, version="7")
    placer = placer_with(api, [ran], {"uid-r": JobPods(here=1)})
    placer.admit()
    placer._job_pods = lambda owners: {"uid-r": JobPods(unbound=1)}  # its node deleted
    placer.admit()
    assert api.suspends == []
    assert [c["reason"] for name, c in api.conditions if name == "r"] == ["NotBound"]


def test_a_job_changed_meanwhile_is_left_to_the_next_pass() -> None:
    class Refusing(SuspendingApi):
        def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
            from scheduler.errors import KubernetesApiError
            raise KubernetesApiError("the server rejected our request: test failed", status=422)

    api = Refusing()
    stuck = job("q", gpu=120, cpu=300, suspend=False, placement="gpu", started=LONG_AGO, version="7")
    placer = placer_with(api, [stuck], {"uid-q": JobPods(unbound=1)})
    placer.admit()
    assert not [c for name, c in api.conditions if name == "q" and c["reason"] == "SuspendedAgain"]


def test_a_trial_job_waiting_on_its_victims_is_not_suspended_again() -> None:
    api = SuspendingApi()
    body = json.loads(json.dumps({"metadata": {"name": "te", "namespace": "alice", "uid": "uid-te", "resourceVersion": "7",
                                               "labels": {"cellfit.io/job-class": "trial"},
                                               "annotations": {**job("te").annotations, "cellfit.io/placement": "gpu"}},
                                  "spec": {"suspend": False, "template": json.loads(bytes(job("te").spec.template))},
                                  "status": {"startTime": LONG_AGO}}))
    trial = JOB_DECODER.decode(json.dumps(body).encode())
    placer_with(api, [trial], {"uid-te": JobPods(unbound=1)}).admit()
    assert api.suspends == []
