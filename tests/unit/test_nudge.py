"""The requeue nudge's pure parts: which pending pods call for a signal, when the pacer lets one
go, what is read of a PodList, and the signal pod itself. The loop against a real control plane
is e2e/test_outage_nudge.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

import pytest

from scheduler.config import NudgeSettings, parse_settings
from scheduler.core.resources import parse_quantity
from scheduler.errors import ConfigError, KubernetesApiError
from scheduler.constants import LABEL_REQUEUE_SIGNAL, REQUEUE_SIGNAL_NODE
from scheduler.cluster.nudge import (
    EXTENDER_ERROR_MARK,
    Parked,
    SignalPacer,
    UnschedulablePod,
    parked,
    send_signal,
    signal_pod,
    unschedulable_pods,
)

T0 = datetime(2026, 11, 25, 17, 0, 0, tzinfo=timezone.utc).timestamp()
REFUSED = (
    '0/5 nodes are available: 1 Insufficient nvidia.com/gpu, 4 node(s) didn\'t match Pod\'s node affinity/selector. '
    'preemption: Post "http://127.0.0.1:8888/v1/extender/preempt": dial tcp 127.0.0.1:8888: connect: connection refused'
)
STARTING = "preemption: failed preemption with extender at URL http://127.0.0.1:8888/v1/extender/preempt, code 503"
NO_ROOM = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No victims found."


def pod(key: str, *, since: float, message: str = NO_ROOM) -> UnschedulablePod:
    return UnschedulablePod(key=key, since=since, message=message)


def listed(*items: dict[str, Any]) -> bytes:
    return json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": list(items)}).encode()


def pending(name: str, *conditions: dict[str, Any], deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-25T17:00:09Z"
    return {"metadata": metadata, "spec": {"schedulerName": "cellfit", "containers": [{"name": "c"}]},
            "status": {"phase": "Pending", "conditions": list(conditions)}}


def scheduled(status: str, message: str = NO_ROOM, at: str = "2026-11-25T17:00:00Z") -> dict[str, Any]:
    return {"type": "PodScheduled", "status": status, "reason": "Unschedulable", "message": message, "lastTransitionTime": at}


# ------------------------------------------------------------------ selection


def test_a_pod_unschedulable_since_before_the_term_is_stale_one_since_after_is_not() -> None:
    found = parked([pod("ml/old", since=T0 - 60), pod("ml/new", since=T0 + 1)], term_began=T0)
    assert found == Parked(stale=("ml/old",), failed=())


def test_a_pod_whose_last_attempt_met_an_extender_error_is_failed_whenever_it_began() -> None:
    found = parked(
        [pod("ml/refused", since=T0 + 30, message=REFUSED), pod("ml/starting", since=T0 - 5, message=STARTING),
         pod("ml/waiting", since=T0 + 30)],
        term_began=T0,
    )
    # "starting" is also older than the term: it counts once, as failed.
    assert found == Parked(stale=(), failed=("ml/refused", "ml/starting"))
    assert EXTENDER_ERROR_MARK == "/v1/extender/"


def test_a_pod_cellfit_answered_with_an_error_is_not_failed_so_no_signal_repeats_for_it() -> None:
    # cellfit was there and refused this pod's preemption (a defect, or a request it cannot
    # read): a retry meets the same answer, and a signal every minInterval would requeue every
    # parked pod of the cluster for as long as the pod stays. Only cellfit away or starting
    # (refused, reset, timed out, 503) calls for one.
    answered = "preemption: failed preemption with extender at URL http://127.0.0.1:8888/v1/extender/preempt, code 500"
    bad_request = "failed filter with extender at URL http://127.0.0.1:8888/v1/extender/filter, code 400"
    reset = 'preemption: Post "http://127.0.0.1:8888/v1/extender/preempt": EOF'
    found = parked(
        [pod("ml/answered", since=T0 + 30, message=answered), pod("ml/bad", since=T0 + 30, message=bad_request),
         pod("ml/old-answered", since=T0 - 30, message=answered), pod("ml/reset", since=T0 + 30, message=reset),
         pod("ml/starting", since=T0 + 30, message=STARTING)],
        term_began=T0,
    )
    assert found == Parked(stale=("ml/old-answered",), failed=("ml/reset", "ml/starting"))


def test_nothing_parked_calls_for_no_signal() -> None:
    assert not parked([pod("ml/new", since=T0 + 1)], term_began=T0)
    assert not parked([], term_began=T0)


# ------------------------------------------------------------------ pacing


def test_stale_pods_get_one_signal_per_term() -> None:
    pacer = SignalPacer(min_interval=10)
    stale = Parked(stale=("ml/old",))
    assert pacer.due(stale, T0)
    pacer.record(T0)
    # The same pods, still unschedulable for their own reasons: the cluster's events wake them now.
    assert not pacer.due(stale, T0 + 5)
    assert not pacer.due(stale, T0 + 3600)
    assert pacer.sent == 1


def test_failed_pods_get_a_signal_at_most_every_min_interval_while_they_remain() -> None:
    pacer = SignalPacer(min_interval=10)
    failed = Parked(failed=("ml/refused",))
    sent = []
    for second in range(0, 35):  # a pass every second, the other cellfit still away
        now = T0 + second
        if pacer.due(failed, now):
            pacer.record(now)
            sent.append(second)
    assert sent == [0, 10, 20, 30]
    assert not pacer.due(Parked(), T0 + 100)  # nothing parked any more: nothing sent


def test_a_failed_pod_right_after_a_stale_signal_waits_for_the_interval() -> None:
    pacer = SignalPacer(min_interval=10)
    pacer.record(T0)  # the term's first signal, for stale pods
    failed = Parked(failed=("ml/refused",))
    assert not pacer.due(failed, T0 + 9.9)
    assert pacer.due(failed, T0 + 10)


# ------------------------------------------------------------------ reading the PodList


def test_only_pods_with_podscheduled_false_are_read_and_deleting_pods_are_left_out() -> None:
    raw = listed(
        pending("refused", scheduled("False", REFUSED, "2026-11-25T17:00:05Z")),
        pending("never-tried"),  # no condition: kube-scheduler has not tried it yet
        pending("gone", scheduled("False"), deleting=True),
        pending("being-bound", scheduled("True")),
        pending("other-conditions", {"type": "Ready", "status": "False"}, scheduled("False", at="2026-11-25T16:59:00Z")),
    )
    pods = unschedulable_pods(raw)
    assert pods == [
        UnschedulablePod(key="ml/refused", since=T0 + 5, message=REFUSED),
        UnschedulablePod(key="ml/other-conditions", since=T0 - 60, message=NO_ROOM),
    ]


def test_fractional_condition_times_are_read() -> None:
    raw = listed(pending("p", scheduled("False", at="2026-11-25T17:00:00.250000Z")))
    assert unschedulable_pods(raw)[0].since == T0 + 0.25


# ------------------------------------------------------------------ the signal pod


def test_the_signal_pod_is_bound_to_a_node_that_cannot_exist_and_asks_for_next_to_nothing() -> None:
    body = signal_pod("cellfit-requeue-0123456789", namespace="cellfit-system")
    assert body["metadata"] == {"name": "cellfit-requeue-0123456789", "namespace": "cellfit-system",
                                "labels": {LABEL_REQUEUE_SIGNAL: "true"}}
    spec = body["spec"]
    assert spec["nodeName"] == REQUEUE_SIGNAL_NODE and REQUEUE_SIGNAL_NODE.endswith(".invalid")
    (container,) = spec["containers"]
    assert spec["automountServiceAccountToken"] is False
    for amounts in container["resources"].values():  # stated for a ResourceQuota's sake (below), and tiny
        assert parse_quantity(amounts["cpu"], field="cpu") <= Fraction(1, 1000)
        assert parse_quantity(amounts["memory"], field="memory") <= 2**20
        assert parse_quantity(amounts["ephemeral-storage"], field="ephemeral-storage") <= 2**20
    # Admitted where Pod Security "restricted" is enforced.
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_nudge_settings_have_documented_defaults_and_bounds() -> None:
    settings = parse_settings("").nudge
    assert settings == NudgeSettings(enabled=True, scheduler_name="cellfit", period_seconds=5.0, min_interval_seconds=10.0)
    for bad in ("nudge: {minIntervalSeconds: 0}", "nudge: {periodSeconds: 0.1}", "nudge: {schedulerName: ''}"):
        try:
            parse_settings(bad)
        except Exception as error:
            assert "nudge" in str(error), str(error)
        else:
            raise AssertionError(f"accepted {bad!r}")


# The resources a ResourceQuota may track that kube-apiserver's quota admission then requires of
# every container of every new pod in its namespace ("failed quota: ...: must specify
# limits.cpu for: signal"), unless a LimitRange defaults them.
QUOTA_TRACKED = ("requests.cpu", "limits.cpu", "requests.memory", "limits.memory",
                 "requests.ephemeral-storage", "limits.ephemeral-storage")


class QuotaNamespaceApi:
    """A namespace whose ResourceQuota tracks compute resources and which has no LimitRange:
    the API server refuses a pod with a container that does not state each (HTTP 403)."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.deleted: list[str] = []

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes:
        return listed()

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        for container in pod["spec"]["containers"]:
            resources = container.get("resources") or {}
            missing = [tracked for tracked in QUOTA_TRACKED
                       if tracked.partition(".")[2] not in (resources.get(tracked.partition(".")[0]) or {})]
            if missing:
                raise KubernetesApiError(
                    f"create pod {namespace}/{name}: HTTP 403: pods {name!r} is forbidden: failed quota: compute: must "
                    f"specify {', '.join(missing)} for: {container['name']}", status=403,
                )
        self.created.append(name)

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        self.deleted.append(name)


def test_the_signal_pod_is_admitted_in_a_namespace_whose_quota_tracks_compute_resources() -> None:
    # Without stated resources, every signal (the nudge's and after preemption alike) was refused
    # there, and parked pods waited for kube-scheduler's 5-minute flush again.
    api = QuotaNamespaceApi()
    send_signal(api, namespace="cellfit-system")
    assert api.created and api.created == api.deleted


class RegistryAllowlistApi(QuotaNamespaceApi):
    """A cluster whose admission allows images of its own registry only (a policy engine's
    usual rule): the API server refuses a pod naming any other."""

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        for container in pod["spec"]["containers"]:
            if not container["image"].startswith("registry.corp.example/"):
                raise KubernetesApiError(f"create pod: HTTP 403: image {container['image']} is not allowed", status=403)
        super().create_pod(namespace=namespace, pod=pod)


def test_the_signal_pod_names_the_configured_image_so_a_registry_allowlist_admits_it() -> None:
    image = "registry.corp.example/mirror/pause:3.10"
    settings = NudgeSettings(signal_image=image)
    assert parse_settings(f"nudge:\n  signalImage: {image}\n").nudge.signal_image == image
    api = RegistryAllowlistApi()
    with pytest.raises(KubernetesApiError):
        send_signal(api, namespace="cellfit-system")  # the default image, refused there
    send_signal(api, namespace="cellfit-system", image=settings.signal_image)
    assert api.created and api.created == api.deleted


@pytest.mark.parametrize("image", ["", "pause 3.10", "x" * 513])
def test_a_signal_image_that_cannot_be_one_is_refused_naming_the_field(image: str) -> None:
    with pytest.raises(ConfigError, match="signalImage"):
        parse_settings(f"nudge:\n  signalImage: {json.dumps(image)}\n")
