"""Review of the cluster view (helper-67): the controllers' Lease kept only while it is safe to
lead, and the watch cache's state against what a fresh list builds."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from scheduler.cluster import api as api_module
from scheduler.cluster import loop_http
from scheduler.cluster.api import KubernetesApi, WatchExpired
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.leadership import LeaderElector
from scheduler.cluster.nudge import Nudger
from scheduler.cluster.priority_class import PriorityClassLookup
from scheduler.cluster.reflector import Reflector
from scheduler.config import ClusterSettings, LeaderElectionSettings, NudgeSettings
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.errors import KubernetesApiError
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import AlwaysReady, ExtenderService
from scheduler.kube import wire
from tests.support import kube_objects as k
from tests.support.api_double import ListingApi
from tests.unit.test_leadership import Clock  # monotonic and wall time advanced by hand
from tests.unit.test_nudge import REFUSED, T0, listed, pending, scheduled

SETTINGS = LeaderElectionSettings(lease_name="cellfit-controllers", namespace="cellfit-system", identity="a")


class SlowLeases:
    """One Lease with the API server's optimistic concurrency; a write may take ``write_seconds``
    of the clock to answer (committed as it arrives: the double advances the clock), and reads
    may hang until released."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.write_seconds = 0.0
        self.reachable = True
        self.hang = False
        self.hang_writes = False  # a write commits, then its answer hangs until released
        self.hanging = threading.Event()  # a read (or a write's answer) is hanging now
        self.released = threading.Event()  # hanging reads answer (unreachable)

    def get_lease(self, *, namespace: str, name: str) -> bytes | None:
        if self.hang:
            self.hanging.set()
            self.released.wait(30)
            raise KubernetesApiError("Kubernetes API did not answer")
        if not self.reachable:
            raise KubernetesApiError("Kubernetes API unreachable: connection refused")
        return None if self.lease is None else json.dumps(self.lease).encode()

    def write_lease(self, *, namespace: str, lease: dict[str, Any]) -> bytes:
        if not self.reachable:
            raise KubernetesApiError("Kubernetes API unreachable: connection refused")
        stored_version = None if self.lease is None else self.lease["metadata"]["resourceVersion"]
        if lease["metadata"].get("resourceVersion") != stored_version:
            raise KubernetesApiError("the object has been modified", status=409)
        self.version += 1
        self.lease = json.loads(json.dumps(lease))
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        answer = json.dumps(self.lease).encode()
        self.clock.seconds += self.write_seconds  # committed on arrival, answered this much later
        if self.hang_writes:
            self.hang_writes = False
            self.hanging.set()
            self.released.wait(30)
        return answer


def elector(clock: Clock, leases: SlowLeases, events: list[str], *, settings: LeaderElectionSettings = SETTINGS) -> LeaderElector:
    return LeaderElector(
        api=leases, settings=settings,
        on_started=lambda: events.append("started"), on_stopped=lambda: events.append("stopped"),
        monotonic=clock.monotonic, wall=clock.wall,
    )


def test_a_renewal_answered_late_counts_from_when_it_was_sent_not_answered() -> None:
    """The write commits when it reaches the server; a standby that reads the Lease then may take
    it a lease duration later. A leader that counted its deadline from the late answer led on
    past that moment (two leaders: two estimators, two placers)."""
    clock = Clock()
    leases = SlowLeases(clock)
    events: list[str] = []
    leader = elector(clock, leases, events)
    leader.campaign_once()
    assert leader.leading
    clock.seconds += SETTINGS.retry_period_seconds
    sent_at = clock.seconds
    leases.write_seconds = 6.0  # a congested API server answers the renewal 6 s late
    leader.campaign_once()
    leases.write_seconds = 0.0
    leases.reachable = False  # then nothing reaches it
    while leader.leading:
        clock.seconds += SETTINGS.retry_period_seconds
        leader.campaign_once()
    # A standby that read the renewal as it was committed may take the Lease at sent_at + duration.
    assert clock.seconds < sent_at + SETTINGS.lease_duration_seconds
    assert events == ["started", "stopped"]


def test_a_leader_whose_renewal_hangs_ends_its_term_by_the_deadline() -> None:
    """The API server stops answering (a black-holed connection) mid-term: the renewal's read
    hangs for the client's timeout and its retries. The term must end by the renew deadline all
    the same, not when the call gives up, by which time a standby may have led for a while."""
    clock = Clock()
    leases = SlowLeases(clock)
    events: list[str] = []
    stopped = threading.Event()
    settings = SETTINGS.model_copy(update={"retry_period_seconds": 0.01})
    leader = LeaderElector(
        api=leases, settings=settings,
        on_started=lambda: events.append("started"),
        on_stopped=lambda: (events.append("stopped"), stopped.set()),
        monotonic=clock.monotonic, wall=clock.wall,
    )
    leader.campaign_once()
    assert leader.leading
    leases.hang = True
    leader.start()
    try:
        assert leases.hanging.wait(10)
        clock.seconds += settings.renew_deadline_seconds + 0.5  # still hanging past the deadline
        assert stopped.wait(10), "the term outlived the renew deadline while the renewal hung"
        assert not leader.leading and events == ["started", "stopped"]
    finally:
        leases.released.set()
        leader.stop()


# ------------------------------------------------------------------ a binding made, answered as failed


class BindingCommittedUnanswered(ListingApi):
    """The API server commits the binding and the watch delivers the bound pod, but the answer
    never reaches cellfit (the connection is reset mid-response, or the client's timeout fires
    first): the bind call fails without a status."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.cache: ClusterCache | None = None

    async def create_binding(self, *, namespace: str, name: str, uid: str, node_name: str, annotations: dict[str, str]) -> None:
        assert self.cache is not None
        for stored in self.pods:
            if stored["metadata"]["uid"] == uid:
                stored["spec"]["nodeName"] = node_name  # committed: a list shows it bound now
                self.cache.pods._apply(wire.POD_DECODER.decode(json.dumps(stored)))  # the watch's MODIFIED
        raise KubernetesApiError(f"bind pod {namespace}/{name} to {node_name}: Kubernetes API unreachable: connection reset")


def watched(api: ListingApi, engine: ResourceFitEngine, lock: threading.RLock) -> ClusterCache:
    cache = ClusterCache(api=api, engine=engine, lock=lock, gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=PodStore(), jobs=None)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    return cache


def test_a_binding_made_but_answered_as_failed_keeps_the_pod_booked_as_a_relist_would() -> None:
    """The watch showed the pod bound before the bind call failed: the bind verb handed the
    reservation back, and every later event of the pod (equal to the record) was skipped, so its
    node looked free until the pod's phase changed (minutes of image pulls for a GPU pod), even
    across relists: another pod booked the same GPUs and failed at the kubelet."""
    api = BindingCommittedUnanswered(nodes=[k.node("gpu-a", gpus=8, cpu="64")], pods=[k.pod("train-0", uid="uid-train-0", gpus=8)])
    engine, lock = ResourceFitEngine(), threading.RLock()
    cache = api.cache = watched(api, engine, lock)
    service = ExtenderService(engine=engine, lock=lock, metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu",
                              cluster=cache, readiness=AlwaysReady())
    body = json.dumps({"PodName": "train-0", "PodNamespace": "ml", "PodUID": "uid-train-0", "Node": "gpu-a"}).encode()
    answer = asyncio.run(service.bind(body))
    cache.pods._list_and_replace()  # and a relist after it (the watch expired)
    fresh = ResourceFitEngine()
    watched(api, fresh, threading.RLock())
    assert fresh.free_on("gpu-a").gpus == 0  # the list shows it bound
    assert engine.free_on("gpu-a") == fresh.free_on("gpu-a")
    assert json.loads(answer.body) == {"Error": ""}  # it is bound: kube-scheduler is told so


def test_two_replicas_given_the_same_identity_never_lead_at_once() -> None:
    """``leaderElection.identity`` set once for every replica (a shared ConfigMap): each took the
    Lease naming it for its own and renewed it, so both led (two estimators, two placers, two
    nudges) for as long as they ran. A replica that has written the Lease and finds it rewritten
    under its name by someone else stands by, as for any other holder; one leads, and when it
    stops renewing the other takes over once the Lease lapses. (A replica that has never written
    takes a Lease naming it at once, as a restarted container must: the two overlap until the
    first's next round, as a restart would with a replica that was not dead.)"""
    clock = Clock()
    leases = SlowLeases(clock)
    events: dict[str, list[str]] = {"first": [], "second": []}
    replicas = {name: elector(clock, leases, log) for name, log in events.items()}
    both_led = []
    for round_number in range(20):
        for name, replica in replicas.items():
            replica.campaign_once()
            clock.seconds += 0.001  # the two never write in the same microsecond
            if all(other.leading for other in replicas.values()):
                both_led.append((round_number, name))
        clock.seconds += SETTINGS.retry_period_seconds
    assert both_led in ([], [(0, "second")])  # the second's first round, as after a restart
    leader = next(name for name, replica in replicas.items() if replica.leading)
    standby = next(name for name in replicas if name != leader)
    # The leader stops (SIGKILL: no release): the standby leads once the Lease has lapsed.
    while not replicas[standby].leading:
        clock.seconds += SETTINGS.retry_period_seconds
        replicas[standby].campaign_once()
    assert events[standby][-1] == "started"


def test_a_renewal_answered_after_shutdown_began_starts_no_term() -> None:
    """Shutdown ends the term while a renewal's answer is still on its way (a congested API
    server): the late answer must not start the drivers again in a process that is going away
    (they would run beside the standby that takes over)."""
    clock = Clock()
    leases = SlowLeases(clock)
    events: list[str] = []
    leader = elector(clock, leases, events)
    leader.campaign_once()
    leases.hang_writes = True
    renewing = threading.Thread(target=leader.campaign_once)
    renewing.start()
    try:
        assert leases.hanging.wait(10)
        leader.stop()  # the campaign thread is this test's: stop ends the term without waiting for it
    finally:
        leases.released.set()
        renewing.join(10)
    assert not leader.leading and events == ["started", "stopped"]
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == ""  # a standby takes it at once


# ------------------------------------------------------------------ the requeue nudge


class ParkedPods:
    """The profile's pending pods as the API lists them (one parked by a refused extender call)
    and watches them (nothing changes until the server closes), and the signal pods created."""

    def __init__(self) -> None:
        self.signals: list[str] = []
        self.closed = threading.Event()

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes:
        return listed(pending("train-0", scheduled("False", REFUSED)))

    def watch_pending_pods(self, scheduler_name: str, *, resource_version: str) -> Iterator[bytes]:
        self.closed.wait()
        yield from ()

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        self.signals.append(pod["metadata"]["name"])

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        pass


@pytest.fixture
def nudgers() -> Iterator[list[tuple[Nudger, ParkedPods]]]:
    """Nudgers to stop, and their servers to close, once the test is done: the threads of their
    views of the pending pods end."""
    made: list[tuple[Nudger, ParkedPods]] = []
    yield made
    for nudger, api in made:
        nudger.stop()
        api.closed.set()
        nudger.join(10)
    assert not [thread for thread in threading.enumerate() if thread.name == "reflector-pending-pods"]


def parked_nudger(nudgers: list[tuple[Nudger, ParkedPods]], api: ParkedPods, settings: NudgeSettings, wall: list[float]) -> Nudger:
    nudger = Nudger(api=api, settings=settings, namespace="cellfit-system", ready=lambda: True, clock=lambda: wall[0])
    nudgers.append((nudger, api))
    return nudger


def test_a_wall_clock_stepped_back_does_not_hold_the_nudge_s_signals_back(nudgers: Any) -> None:
    """NTP steps the node's clock back an hour after a signal: the pacer measured its interval
    on the wall clock, so pods parked by a failed extender call got no signal for that hour
    (kube-scheduler's own flush retries them only every 5 minutes)."""
    wall = [T0]
    api = ParkedPods()
    settings = NudgeSettings(min_interval_seconds=10.0)
    nudger = parked_nudger(nudgers, api, settings, wall)
    assert nudger.pass_once().failed == ("ml/train-0",) and len(api.signals) == 1
    wall[0] -= 3600  # stepped back
    seconds = 0.0
    while not api.signals[1:] and seconds < 3600:  # the pod stays parked; a pass every period
        wall[0] += settings.period_seconds
        seconds += settings.period_seconds
        nudger.pass_once()
    assert seconds <= settings.min_interval_seconds + settings.period_seconds


# ------------------------------------------------------------------ credentials on the bind path


def refreshing(configuration: k8s.Configuration, *, fails_after: int) -> list[str]:
    """Installs a refresh hook (what the kubeconfig and in-cluster loaders install) that hands out
    a new token per refresh, then fails as an exec plugin or an unreadable token file does. The
    list returned grows with each token handed out."""
    handed: list[str] = []

    def refresh(config: k8s.Configuration) -> None:
        if len(handed) >= fails_after:
            raise k8s_config.ConfigException("exec: executable aws-iam-authenticator failed with exit code 1")
        handed.append(f"token-{len(handed)}")
        config.api_key = {"BearerToken": handed[-1]}
        config.api_key_prefix = {"BearerToken": "Bearer"}

    configuration.api_key = {"BearerToken": "as loaded"}  # the loaders set a token, then the hook
    configuration.refresh_api_key_hook = refresh
    return handed


def test_a_failed_credentials_refresh_keeps_the_last_good_token() -> None:
    """The token refreshed every few seconds came from a hook that may fail for a moment (an exec
    plugin's network call): the bind request raised the hook's own exception, which the bind verb
    does not expect, and the pod's reservation was never handed back. A token stays valid long
    after its replacement: the last good one is sent, and the refresh tried again next time."""
    configuration = k8s.Configuration()
    handed = refreshing(configuration, fails_after=1)
    now = [0.0]
    credentials = loop_http.Credentials(configuration, clock=lambda: now[0])
    assert credentials()["authorization"] == "Bearer token-0"
    now[0] += loop_http.CREDENTIALS_REFRESH_SECONDS
    assert credentials()["authorization"] == "Bearer token-0"
    assert handed == ["token-0"]


def test_credentials_that_never_loaded_fail_the_bind_as_an_api_error() -> None:
    """No token yet and the hook fails: the bind fails as an API error (the verb then hands the
    reservation back and kube-scheduler retries), not with the hook's exception."""
    configuration = k8s.Configuration()
    configuration.host = "http://127.0.0.1:9"
    refreshing(configuration, fails_after=0)
    api = KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(), source="test")
    with pytest.raises(KubernetesApiError, match="credentials"):
        asyncio.run(api.create_binding(namespace="ml", name="train-0", uid="uid-train-0", node_name="gpu-a", annotations={}))


class WatchWinsBeforeHandBack(ResourceFitEngine):
    """The real engine; ``watch`` runs just before a reservation is handed back: the watch thread
    took the engine lock between the bind call's failure and the bind verb's hand-back."""

    def __init__(self) -> None:
        super().__init__()
        self.watch: list[Any] = []

    def unreserve(self, pod_uid: str) -> None:
        while self.watch:
            self.watch.pop()()
        super().unreserve(pod_uid)


def test_a_binding_the_watch_shows_made_just_before_the_hand_back_stays_booked() -> None:
    """The bind call failed and the watch had not shown the pod bound yet; the bound pod arrives
    between that look and the bind verb handing the reservation back. Its later events equal the
    record and are skipped: without a second look the node stays free of it."""
    stored = k.pod("train-0", uid="uid-train-0", gpus=8)
    api = ListingApi(nodes=[k.node("gpu-a", gpus=8, cpu="64")], pods=[stored])
    engine, lock = WatchWinsBeforeHandBack(), threading.RLock()
    cache = watched(api, engine, lock)

    async def committed_unanswered(**binding: Any) -> None:
        stored["spec"]["nodeName"] = binding["node_name"]
        engine.watch.append(lambda: cache.pods._apply(wire.POD_DECODER.decode(json.dumps(stored))))
        raise KubernetesApiError("bind pod ml/train-0 to gpu-a: Kubernetes API did not answer within 10s")

    api.create_binding = committed_unanswered  # type: ignore[method-assign]
    service = ExtenderService(engine=engine, lock=lock, metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu",
                              cluster=cache, readiness=AlwaysReady())
    body = json.dumps({"PodName": "train-0", "PodNamespace": "ml", "PodUID": "uid-train-0", "Node": "gpu-a"}).encode()
    asyncio.run(service.bind(body))
    fresh = ResourceFitEngine()
    watched(api, fresh, threading.RLock())
    assert fresh.free_on("gpu-a").gpus == 0  # the list shows it bound
    assert engine.free_on("gpu-a") == fresh.free_on("gpu-a")


# ------------------------------------------------------------------ reads on the webhook's path


def test_an_unreachable_api_leaves_the_resumed_priority_class_unread_not_the_webhook_failing() -> None:
    """The pod-create webhook reads the resumed PriorityClass through the generated client; a
    connection error there was no API error, so it escaped the lookup and failed the whole
    review: the placement rewrite of an AlloX-placed pod was lost with it (or, with failurePolicy
    Fail, the pod was refused)."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    api = KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(request_timeout_seconds=1), source="test")
    with pytest.raises(KubernetesApiError, match="unreachable"):
        api.get_priority_class("cellfit-resumed")
    assert PriorityClassLookup(api, name="cellfit-resumed").get() is None


# ------------------------------------------------------------------ a watch that fails as soon as it starts


class RecordedStop(threading.Event):
    """The reflector's stop event, answering its waits at once and recording them."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()


def watch_failing_at_once(failure: Exception, *, lists: int) -> RecordedStop:
    """A reflector whose every watch fails before delivering anything, run for ``lists`` lists in
    this thread; its stop event, with the waits the reflector made."""
    stop = RecordedStop()
    listed: list[int] = []

    def list_objects() -> tuple[str, list[Any]]:
        listed.append(1)
        if len(listed) >= lists:
            stop.set()
        return "10", []

    def watch(version: str) -> Iterator[bytes]:
        raise failure
        yield b""  # a generator, as the API's watch is

    reflector = Reflector[Any](
        kind="pods", list_objects=list_objects, watch_lines=watch, decode_object=wire.POD_DECODER.decode,
        version_of=lambda obj: obj.metadata.resourceVersion, replace=lambda objects: None,
        apply=lambda obj: None, delete=lambda obj: None, expired=WatchExpired,
    )
    reflector._stop = stop
    reflector._run()
    return stop


@pytest.mark.parametrize("failure", [
    KubernetesApiError('watch pods: pods is forbidden: cannot watch resource "pods" (HTTP 403)', status=403),
    WatchExpired(),
], ids=["watch refused", "expired at once"])
def test_a_watch_that_fails_before_delivering_anything_backs_off_between_lists(failure: Exception) -> None:
    """A list that works and a watch that fails at once (RBAC granting list but not watch, a proxy
    cutting long requests, a 410 for the list's own version): the backoff was reset by every
    list, and an expiry relisted without waiting, so the reflector listed every pod of the
    cluster every half second, or as fast as the API server answered, for as long as it lasted."""
    stop = watch_failing_at_once(failure, lists=8)
    assert len(stop.waits) >= 6
    assert stop.waits == sorted(stop.waits) and stop.waits[-1] >= 8 * stop.waits[0]


class SignalPodsUndeletable(ParkedPods):
    """Signal pods are created but cannot be deleted (RBAC granting create, not delete; the API
    failing between the two calls)."""

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        raise KubernetesApiError(f'delete pod {namespace}/{name}: pods "{name}" is forbidden (HTTP 403)', status=403)


def test_a_signal_pod_that_could_not_be_deleted_counts_as_a_signal_sent(nudgers: Any) -> None:
    """The signal pod was created and its deletion failed: the pass counted no signal, so every
    pass (5 s) created another pod bound to a node that does not exist, past the interval the
    signals keep. The pod garbage collector deletes such a pod, which requeues the parked pods
    just the same: the signal was sent, late."""
    wall = [T0]
    api = SignalPodsUndeletable()
    settings = NudgeSettings(min_interval_seconds=30.0)
    nudger = parked_nudger(nudgers, api, settings, wall)
    for _ in range(int(settings.min_interval_seconds // settings.period_seconds)):
        nudger.pass_once()
        wall[0] += settings.period_seconds
    assert len(api.signals) == 1


# ------------------------------------------------------------------ a watch connection gone silent


class SilentAfterOneEvent(BaseHTTPRequestHandler):
    """Answers a watch, sends one bookmark, then goes silent with the connection open (a
    NAT or load balancer that dropped the flow without a reset: nothing arrives any more)."""

    protocol_version = "HTTP/1.1"
    released = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        event = b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12"}}}\n'
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()
        self.released.wait(60)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_watch_that_goes_silent_past_the_bookmark_interval_ends_and_relists(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API server sends a bookmark on every watch about once a minute; a watch that stays
    silent much longer is a dead connection. It was read with the watch's own timeout (330 s by
    default): for five minutes the cache missed every deletion (pods waited for room already
    free, preemptors for victims already gone) while the verbs served from it."""
    # A bookmark interval a test can wait out (raising=False: the review first ran it before the constant existed).
    monkeypatch.setattr(api_module, "WATCH_SILENCE_SECONDS", 1.0, raising=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), SilentAfterOneEvent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
    api = KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(), source="test")
    read: list[bytes] = []
    ended: list[BaseException] = []

    def follow() -> None:
        try:
            read.extend(api.watch("pods", resource_version="10"))
        except Exception as error:
            ended.append(error)

    watching = threading.Thread(target=follow, daemon=True)
    try:
        watching.start()
        watching.join(30)
        assert not watching.is_alive(), "the watch kept waiting on a silent connection"
        assert len(read) == 1 and ended  # the bookmark, then the end: the reflector relists
    finally:
        SilentAfterOneEvent.released.set()
        server.shutdown()
        server.server_close()
