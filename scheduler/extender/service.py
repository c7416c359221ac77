"""The extender's request flow, independent of the web framework:

    request bytes -> wire structs -> core values -> engine decision -> result bytes / API call

Each verb answers exactly what kube-scheduler expects. Failures are sorted into two kinds:

* a request that cannot be understood (malformed JSON, a missing ``Pod``): :class:`InvalidRequest`,
  which the HTTP layer turns into HTTP 400 — kube-scheduler never sends such a thing, so the
  caller is a person or a broken client who reads the status;
* a well-formed request cellfit cannot act on (an invalid quantity, a node that filled up): the
  verb's ``Error`` field with HTTP 200, because kube-scheduler discards the body of any non-200
  answer and users would never see the reason. Prioritize and preempt have no ``Error`` field,
  so their semantic errors are HTTP 400 too.

The engine is not thread-safe; every call into it holds ``lock``, which the watch cache shares.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Callable, Final, Iterable, Mapping, Protocol, Sequence

import msgspec
import numpy as np

from scheduler.constants import JOB_CLASS_BEST_EFFORT, LABEL_JOB_CLASS
from scheduler.core.engine import FilterDecision, Placement, SchedulingEngine
from scheduler.core.model import JobInfo, NodeInfo, PodInfo
from scheduler.errors import (
    CellfitError,
    ClusterUnavailable,
    InvalidRequest,
    NotReady,
    SchedulingConflict,
    UnknownNode,
)
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.kube import translate, wire
from scheduler.kube.names import (
    ExtenderArgs,
    NamedDecision,
    decode_extender_args,
    filter_offered,
    host_priorities_json,
    names_json,
    prioritize_offered,
)
from scheduler.preemption.engine import ExplainedPreemption, VictimChoice
from scheduler.preemption.resume_records import JobRef

log = logging.getLogger(__name__)


class ClusterGateway(Protocol):
    """What the bind verb needs from the Kubernetes API (implemented by scheduler.cluster).
    ``find_pod`` and ``bind`` are awaited on the event loop that serves kube-scheduler."""

    async def find_pod(self, namespace: str, name: str) -> PodInfo | None:
        """The pod from the watch cache, or fetched from the API; ``None`` if it does not exist."""
        ...

    async def bind(self, *, namespace: str, name: str, uid: str, node_name: str, annotations: dict[str, str]) -> None:
        """Create the pods/binding (with annotations copied onto the pod); raises CellfitError."""
        ...

    def record_preemption(
        self,
        *,
        preemptor: PodInfo,
        preemptor_messages: Sequence[str],
        victims: Sequence[PodInfo],
        victim_message: str,
        job_counts: Sequence[tuple[JobInfo, int]],
        preemptor_record: str | None = None,
        victim_messages: Mapping[str, str] | None = None,
        preempt: Sequence[PodInfo] = (),
        resume_holds: Sequence[tuple[JobRef, Mapping[str, str]]] = (),
    ) -> None:
        """Events on the preemptor and the victims (``victim_messages``' by victim UID where it has
        one, else ``victim_message``), each victim Job's new preemption count
        (``cellfit.io/preemptions``) and the resume holds given it (``cellfit.io/resume-holds``),
        and the preemptor's record of the decision (``cellfit.io/preemptor-hold``); ``preempt``:
        victims kube-scheduler does not delete (on other nodes than the one it picks: a gang's
        other members), marked and deleted here; must not block."""
        ...

    def record_pod_event(self, *, pod: PodInfo, reason: str, message: str, warning: bool) -> None:
        """One Event on the pod, written in the background; must not block."""
        ...

    def remember_victims(self, uids: Iterable[str]) -> None:
        """The pods a preemption takes, whatever chose them, so the watch can tell when they
        have gone (kube-scheduler is then made to retry what it parked); must not block."""
        ...


class PodRecords(Protocol):
    """The cluster's one record of the pods (``Composition.pods``), read under the engine lock."""

    def current(self, uid: str) -> PodInfo | None:
        """The pod as this scheduler assumes it (bound by it), else as the watch showed it."""
        ...


class Readiness(Protocol):
    def ready(self) -> tuple[bool, str]:
        """Whether cellfit may decide (its watch cache has synced), and why not."""
        ...


class AlwaysReady:
    """Standalone mode: no watch cache, so nothing to wait for."""

    def ready(self) -> tuple[bool, str]:
        return True, "standalone: no watch cache to sync"


# Why the preempt verb took no victims for a pod, told once per pod and reason (kube-scheduler
# asks again on every retry): this many pods remembered, the oldest forgotten first.
REFUSALS_REMEMBERED: Final = 4096
EVENT_PREEMPTION_REFUSED: Final = "PreemptionRefused"
# The pods this replica bound, remembered until the watch has surely shown them bound (a bound
# pod stays bound, so forgetting the oldest only hands their case back to the watch).
BINDINGS_REMEMBERED: Final = 16384


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer: status and JSON body bytes."""

    status: int
    body: bytes


_BOUND: Final = Answer(200, wire.ENCODER.encode(wire.ExtenderBindingResult()))


class ExtenderService:
    def __init__(
        self,
        *,
        engine: SchedulingEngine,
        lock: threading.RLock,
        metrics: ExtenderMetrics,
        gpu_resource: str,
        cluster: ClusterGateway | None,
        readiness: Readiness,
        unplaceable: Callable[[PodInfo], str | None] | None = None,
        preemption: ExplainedPreemption | None = None,
        pods: PodRecords | None = None,
    ) -> None:
        """``pods``: the cluster's record of the pods, which tells a pod already bound (filter
        and preempt place none again). ``unplaceable``: why the placement engine can never place a pod as written (a
        mistake in its labels or annotations, the live configuration's VCs and cell types), or
        ``None``; the preempt verb then takes no victims and says why. ``preemption``: FitGpp's
        inside ``engine``, whose choices come with their explanation (None: the placement
        engine's own victims, unexplained)."""
        self._engine = engine
        self._preemption = preemption
        self._pods = pods
        self._lock = lock
        self._metrics = metrics
        self._gpu_resource = gpu_resource
        self._cluster = cluster
        self._readiness = readiness
        self._ready = False  # latched: a synced watch cache stays synced (relists keep state)
        self._unplaceable = unplaceable
        self._refusals_told: OrderedDict[str, str] = OrderedDict()  # pod UID -> the last reason told
        # Read and written on the event loop only. Pod UID -> the node its binding is being
        # created on; and the node it was bound to, the latest BINDINGS_REMEMBERED of them.
        self._binds_in_flight: dict[str, str] = {}
        self._bound: OrderedDict[str, str] = OrderedDict()

    # ------------------------------------------------------------------ filter

    def filter(self, body: bytes) -> Answer:
        args = decode_extender_args(body)
        try:
            self._require_ready()
            pod = self._pod(args.pod)
            _require_uid(pod)
            names, raw_nodes = self._offered_nodes(args)
            sent = self._sent_nodes(raw_nodes)
        except NotReady as error:  # every call while starting: INFO
            return self._error_answer("filter", wire.ExtenderFilterResult(Error=str(error)), error, level=logging.INFO)
        except InvalidRequest as error:
            return self._error_answer("filter", wire.ExtenderFilterResult(Error=str(error)), error)
        binding_to = self._binds_in_flight.get(pod.uid)
        with self._lock:
            for node in sent:
                self._engine.apply_node(node)
            bound_to = self._bound_node(pod)
            if bound_to is not None:
                decision = _bound_already(pod, names, bound_to)
            elif binding_to is not None:
                decision = _binding_in_flight(pod, names, binding_to)
            else:
                decision = filter_offered(self._engine, pod, names)
        verdicts = self._metrics.verdicts
        verdicts["feasible"].inc(len(decision.feasible))
        verdicts["failed"].inc(decision.failed_count)
        verdicts["unresolvable"].inc(decision.unresolvable_count)
        self._metrics.answered["filter", "ok"].inc()
        # Reasons matter to kube-scheduler only when no node is left: they become the
        # FailedScheduling event and tell preemption which nodes to skip. With a node left it
        # schedules the pod and drops them, so they are neither built nor sent: under HiveD
        # (one node placed, every other one with a reason) that would be most of the answer.
        if decision.feasible:
            failed, unresolvable = {}, {}
        else:
            failed, unresolvable = decision.failed, decision.unresolvable
            _log_no_fit(pod, offered=len(names), failed=failed, unresolvable=unresolvable)
        if raw_nodes is None:
            result = wire.ExtenderFilterAnswer(
                NodeNames=names_json(decision.feasible), FailedNodes=failed, FailedAndUnresolvableNodes=unresolvable
            )
        else:
            result = wire.ExtenderFilterAnswer(
                Nodes=wire.NodeList(items=[raw_nodes[name][0] for name in decision.feasible]),
                FailedNodes=failed,
                FailedAndUnresolvableNodes=unresolvable,
            )
        return Answer(200, wire.ENCODER.encode(result))

    # ------------------------------------------------------------------ prioritize

    def prioritize(self, body: bytes) -> Answer:
        args = decode_extender_args(body)
        self._require_ready()  # no Error field: NotReady is HTTP 503
        pod = self._pod(args.pod)
        names, raw_nodes = self._offered_nodes(args)
        sent = self._sent_nodes(raw_nodes)
        with self._lock:
            for node in sent:
                self._engine.apply_node(node)
            scores = prioritize_offered(self._engine, pod, names)
        self._metrics.answered["prioritize", "ok"].inc()
        return Answer(200, host_priorities_json(names, scores))

    # ------------------------------------------------------------------ preempt

    def preempt(self, body: bytes) -> Answer:
        args = wire.decode(wire.PREEMPTION_ARGS_DECODER, body)
        self._require_ready()  # no Error field: NotReady is HTTP 503
        pod = self._pod(args.Pod)
        candidates, pdb_violations, victim_pods = self._preemption_candidates(args)
        mistake = self._never_placeable(pod)
        binding_to = self._binds_in_flight.get(pod.uid) if pod.uid else None
        with self._lock:
            bound_to = self._bound_node(pod)
        if bound_to is not None:
            # A retry of a pod bound meanwhile (its bind answered late, or a client's copy): its
            # placement is the one it runs on, and preempting for it would book a second.
            accepted: dict[str, list[str]] = {}
            self._tell_refusal(pod, f"cellfit preempts no one for this pod: it is already bound to node {bound_to}", warning=False)
        elif binding_to is not None:
            # kube-scheduler gave up on a bind the API server is still answering (its timeout is
            # shorter than cellfit's): the pod's room is reserved where the binding goes.
            accepted = {}
            self._tell_refusal(pod, f"cellfit preempts no one for this pod: its binding to node {binding_to} is in flight", warning=False)
        elif mistake is not None:
            # On a full cluster kube-scheduler's own checks turn every node away before the
            # filter could say this; its event then reads only "no candidate node for preemption".
            accepted = {}
            self._tell_refusal(pod, f"cellfit cannot place this pod as written, so it preempts no one for it: {mistake}", warning=True)
        else:
            with self._lock:
                if self._preemption is not None:
                    choice = self._preemption.decide_preemption(pod, candidates, victim_pods)
                else:
                    choice = VictimChoice(self._engine.select_victims(pod, candidates, victim_pods), None, chosen_by="placement")
                accepted = _answerable(pod, choice.victims, candidates)
                refusal = self._record_preemption(pod, accepted, choice)
            if refusal is not None:
                self._tell_refusal(pod, f"cellfit preempts no one for this pod: {refusal}", warning=False)
        self._metrics.answered["preempt", "ok"].inc()
        self._metrics.preemption_victims.inc(sum(len(uids) for uids in accepted.values()))
        # PDB violations are kube-scheduler's count for the victims it offered on that node (0
        # when it offered none). cellfit does not read PodDisruptionBudgets, so the node keeps
        # that count whichever victims cellfit chose there; kube-scheduler only ranks nodes by it.
        result = wire.ExtenderPreemptionResult(
            NodeNameToMetaVictims={
                node_name: wire.MetaVictims(
                    Pods=[wire.MetaPod(UID=uid) for uid in uids],
                    NumPDBViolations=pdb_violations.get(node_name, 0),
                )
                for node_name, uids in accepted.items()
            }
        )
        return Answer(200, wire.ENCODER.encode(result))

    def _bound_node(self, pod: PodInfo) -> str | None:
        """The node the pod is bound to already, as sent, as the cluster's record has it, or as
        this replica bound it; None for a pod that waits. kube-scheduler asks only for pods it
        sees pending, but its copy can be late: a retry after a bind whose answer it gave up on.
        Placing such a pod again would hand the cells it runs on to the new placement. Under
        the engine lock."""
        if pod.node_name:
            return pod.node_name
        record = self._pods.current(pod.uid) if self._pods is not None and pod.uid else None
        if record is not None and record.node_name and record.holds_resources:
            return record.node_name
        return self._bound.get(pod.uid) if pod.uid else None

    def _never_placeable(self, pod: PodInfo) -> str | None:
        """Why cellfit can never place the pod as sent, or None."""
        try:
            _require_uid(pod)
        except InvalidRequest as error:
            return str(error)
        return self._unplaceable(pod) if self._unplaceable is not None else None

    def _preemption_candidates(
        self, args: wire.ExtenderPreemptionArgs
    ) -> tuple[dict[str, list[str]], dict[str, int], dict[str, PodInfo]]:
        """kube-scheduler's candidate nodes, each with the UIDs of the victims it offers there,
        their PDB violations, and the victims it sent in full (``nodeCacheCapable: false``).

        kube-scheduler fills one map (``NodeNameToVictims`` with full pods, or
        ``NodeNameToMetaVictims`` with UIDs) and sends the other as ``null``; both are read, a
        node in both counting once. A node may come with no victims at all (``[]``, ``null``, no
        ``Pods``, or a ``null`` entry): it is still a candidate. FitGpp and HiveD choose victims
        from what they know of each node, never from kube-scheduler's list, so they choose
        there too or leave the node out; resource-fit alone (``preemption.policy: placement``)
        only narrows kube-scheduler's list, so it leaves such a node out."""
        candidates: dict[str, list[str]] = {}
        pdb_violations: dict[str, int] = {}
        victim_pods: dict[str, PodInfo] = {}
        for node_name, victims in (args.NodeNameToVictims or {}).items():
            infos = [
                self._pod(victim, field=f"NodeNameToVictims[{node_name}].Pods[{index}]")
                for index, victim in enumerate((victims.Pods or ()) if victims is not None else ())
            ]
            victim_pods.update((info.uid, info) for info in infos)
            candidates[node_name] = [info.uid for info in infos]
            pdb_violations[node_name] = victims.NumPDBViolations if victims is not None else 0
        for node_name, meta in (args.NodeNameToMetaVictims or {}).items():
            if node_name in candidates:
                continue
            candidates[node_name] = [victim.UID for victim in ((meta.Pods or ()) if meta is not None else ())]
            pdb_violations[node_name] = meta.NumPDBViolations if meta is not None else 0
        return candidates, pdb_violations, victim_pods

    # ------------------------------------------------------------------ bind

    async def bind(self, body: bytes) -> Answer:
        """Reserve the node in the engine, then create the binding. Awaited on the event loop:
        the API request is the only wait, and a burst keeps hundreds in flight at once."""
        args = wire.decode(wire.BINDING_ARGS_DECODER, body)
        key = f"{args.PodNamespace}/{args.PodName}"
        context = {"verb": "bind", "pod": key, "node": args.Node}
        if self._cluster is None:
            self._metrics.bindings.labels(result="unavailable").inc()
            error = ClusterUnavailable(
                "cellfit has no Kubernetes API connection (cluster.mode standalone), so it cannot "
                "bind; remove bindVerb from the extender configuration or give cellfit credentials"
            )
            return self._error_answer("bind", wire.ExtenderBindingResult(Error=str(error)), error)
        try:
            _require_names(args)
            self._require_ready()
            pod = await self._cluster.find_pod(args.PodNamespace, args.PodName)
            if pod is None:
                raise SchedulingConflict(f"pod {key} no longer exists")
            if args.PodUID and pod.uid != args.PodUID:
                raise SchedulingConflict(f"pod {key} was recreated (UID {pod.uid}, not {args.PodUID})")
            placement = self._reserve(pod, args.Node)
        except NotReady as error:
            self._metrics.bindings.labels(result="not_ready").inc()
            return self._error_answer("bind", wire.ExtenderBindingResult(Error=str(error)), error, context)
        except (SchedulingConflict, UnknownNode, InvalidRequest) as error:
            self._metrics.bindings.labels(result="conflict").inc()
            return self._error_answer("bind", wire.ExtenderBindingResult(Error=str(error)), error, context)
        except CellfitError as error:
            self._metrics.bindings.labels(result="api_error").inc()
            return self._error_answer("bind", wire.ExtenderBindingResult(Error=str(error)), error, context)
        waiting = time.perf_counter()
        try:
            await self._cluster.bind(
                namespace=args.PodNamespace, name=args.PodName, uid=pod.uid, node_name=args.Node,
                annotations=dict(placement.annotations),
            )
        except CellfitError as error:
            # The API refused: hand the reservation back so nothing leaks. (Only shutdown
            # cancels a request midway; the next start rebuilds the engine from the API.)
            with self._lock:
                self._engine.unreserve(pod.uid)
            self._metrics.bindings.labels(result="api_error").inc()
            return self._error_answer("bind", wire.ExtenderBindingResult(Error=str(error)), error, context)
        except Exception:
            # A defect below (the dispatch answers HTTP 500 and logs it): the reservation goes
            # back as for a refusal, or the node's GPUs would stay held until a restart; a
            # binding made all the same is booked again when the watch shows it.
            with self._lock:
                self._engine.unreserve(pod.uid)
            raise
        finally:
            del self._binds_in_flight[pod.uid]
        self._remember_bound(pod.uid, args.Node)
        self._metrics.binding_wait.observe(time.perf_counter() - waiting)
        self._metrics.bindings_bound.inc()
        self._metrics.answered["bind", "ok"].inc()
        # DEBUG: an INFO line per bind was ~6% of cellfit's CPU in a 1,000-pod burst (py-spy);
        # failures stay at WARNING, and cellfit_bindings_total counts every outcome.
        log.debug("bound", extra=context)
        return _BOUND

    def _reserve(self, pod: PodInfo, node_name: str) -> Placement:
        """The engine's reservation of ``node_name`` for a pod no binding holds yet; the pod's
        binding is then in flight until :meth:`bind` ends it. A pod already bound, or with a
        binding in flight, is refused without asking the engine: its reservation is the one the
        bound pod holds (the engine answers it as reserved already, or moves it), and the API
        refuses the second binding, whose failure would hand that reservation back while the pod
        runs. Bound is what the watch shows, or what this replica bound: the watch shows a
        binding a moment after it is made."""
        bound_to = pod.node_name or self._bound.get(pod.uid)
        if bound_to is not None:
            raise SchedulingConflict(f"pod {pod.key} is already bound to node {bound_to}")
        in_flight = self._binds_in_flight.get(pod.uid)
        if in_flight is not None:
            raise SchedulingConflict(f"a binding of pod {pod.key} to node {in_flight} is already in flight")
        with self._lock:
            placement = self._engine.reserve(pod, node_name)
        self._binds_in_flight[pod.uid] = node_name
        return placement

    def _remember_bound(self, pod_uid: str, node_name: str) -> None:
        bound = self._bound
        bound[pod_uid] = node_name
        if len(bound) > BINDINGS_REMEMBERED:
            bound.popitem(last=False)

    def _record_preemption(self, pod: PodInfo, accepted: dict[str, list[str]], choice: VictimChoice) -> str | None:
        """Explain the choice (log, metric, events) and hand the victims' Job counts to the
        cluster; the reason for taking no victims, if one was given. Called under the engine
        lock: the decision and the counts belong together."""
        context = {"verb": "preempt", "pod": pod.key}
        if choice.refusal is not None:
            return choice.refusal
        if not accepted:
            return None
        # A refusal told before no longer stands: the same refusal after this preemption is
        # told again (kubectl cellfit why shows a refusal only while no preemption came since).
        self._refusals_told.pop(pod.uid, None)
        if self._cluster is not None:
            self._cluster.remember_victims(uid for victims in (accepted, choice.elsewhere) for uids in victims.values() for uid in uids)
        preemptor_class = pod.labels.get(LABEL_JOB_CLASS, JOB_CLASS_BEST_EFFORT)
        rule = choice.rule
        self._metrics.preemptions.labels(preemptor_class=preemptor_class, rule=rule).inc()
        if not choice.explained:
            log.info("preempting", extra={**context, "rule": rule, "victims": accepted})
            if self._cluster is not None and choice.preemptor_record is not None:
                self._cluster.record_preemption(preemptor=pod, preemptor_messages=(), victims=(), victim_message="", job_counts=(),
                                                preemptor_record=choice.preemptor_record)
            return None
        preemption = self._preemption
        assert preemption is not None  # only FitGpp's choices are explained
        messages = choice.preemptor_messages()
        for message in messages:
            log.info(message, extra={**context, "rule": rule})
        if self._cluster is None:
            return None
        victim_uids = choice.victim_uids
        victims = [v for v in (preemption.victim(uid) for uid in victim_uids) if v is not None]
        elsewhere = {uid for uids in choice.elsewhere.values() for uid in uids}  # kube-scheduler deletes these not
        self._cluster.record_preemption(
            preemptor=pod,
            preemptor_messages=messages,
            victims=victims,
            victim_message=choice.victim_message() or "",
            victim_messages=choice.victim_messages(),
            job_counts=preemption.victim_jobs(victim_uids) if choice.counts_jobs else (),
            preemptor_record=choice.preemptor_record,
            preempt=[victim for victim in victims if victim.uid in elsewhere],
            resume_holds=choice.resume_holds,
        )
        return None

    def _tell_refusal(self, pod: PodInfo, message: str, *, warning: bool) -> None:
        """Log why no victim was taken, and put it in an Event on the pod (``kubectl describe``),
        once per pod and reason: kube-scheduler asks again on every retry."""
        log.info("no preemption", extra={"verb": "preempt", "pod": pod.key, "reason": message})
        told = self._refusals_told
        with self._lock:
            if told.get(pod.uid) == message:
                told.move_to_end(pod.uid)
                return
            told[pod.uid] = message
            told.move_to_end(pod.uid)
            while len(told) > REFUSALS_REMEMBERED:
                told.popitem(last=False)
        if self._cluster is not None:
            self._cluster.record_pod_event(pod=pod, reason=EVENT_PREEMPTION_REFUSED, message=message, warning=warning)

    # ------------------------------------------------------------------ helpers

    def _require_ready(self) -> None:
        """Refuse to decide before the watch cache has synced: until every bound pod has been
        listed (and, under HiveD, its cells recovered from its bind-info), the engine would see
        their GPUs as free and could hand them out twice. kube-scheduler does not read /readyz;
        it retries a pod whose attempt failed, with backoff."""
        if self._ready:
            return
        ready, why = self._readiness.ready()
        if not ready:
            raise NotReady(f"cellfit is starting and cannot decide yet ({why}); kube-scheduler will retry")
        self._ready = True

    def _pod(self, pod: wire.Pod, *, field: str = "Pod") -> PodInfo:
        return translate.pod_info(pod, gpu_resource=self._gpu_resource, field=field)

    def _offered_nodes(
        self, args: ExtenderArgs
    ) -> tuple[Sequence[str], dict[str, tuple[msgspec.Raw, wire.Node]] | None]:
        """The offered node names, and in full-Node mode each node's raw JSON and narrow view."""
        if args.names is not None:
            return args.names, None
        items = args.nodes.items if args.nodes is not None and args.nodes.items else []
        raw_nodes: dict[str, tuple[msgspec.Raw, wire.Node]] = {}
        for index, raw in enumerate(items):
            node = wire.decode(wire.NODE_DECODER, raw, field=f"Nodes.items[{index}]")
            if not node.metadata.name:
                raise InvalidRequest("a Node needs metadata.name", field=f"Nodes.items[{index}]")
            raw_nodes[node.metadata.name] = (raw, node)
        return list(raw_nodes), raw_nodes

    def _sent_nodes(self, raw_nodes: dict[str, tuple[msgspec.Raw, wire.Node]] | None) -> list[NodeInfo]:
        """kube-scheduler's Node objects, which the engine is given before deciding: the
        freshest view of capacity cellfit can get without a watch (standalone mode learns the
        cluster from them). Translated before the engine lock is taken, so that a request with
        thousands of them holds the lock only for applying them."""
        return [
            translate.node_info(node, gpu_resource=self._gpu_resource, field=f"Nodes.items[{index}]")
            for index, (_, node) in enumerate((raw_nodes or {}).values())
        ]

    def _error_answer(
        self,
        verb: str,
        result: msgspec.Struct,
        error: Exception,
        context: dict[str, str] | None = None,
        *,
        level: int = logging.WARNING,
    ) -> Answer:
        self._metrics.answered[verb, "error"].inc()
        log.log(level, "request not carried out", extra={"verb": verb, "reason": str(error), **(context or {})})
        return Answer(200, wire.ENCODER.encode(result))


def _require_uid(pod: PodInfo) -> None:
    """kube-scheduler always sends the pod's UID. Bookings, holds and victims are kept by it, so
    pods sent without one would all be one pod to the engine (one's cells another's)."""
    if not pod.uid:
        raise InvalidRequest("a pod needs its UID: cellfit books cells and room by it", field="Pod.metadata.uid")


def _require_names(args: wire.ExtenderBindingArgs) -> None:
    """kube-scheduler always names the pod and the node. An empty name would reach the API as
    another request (``.../pods/`` lists the namespace's pods) and fail there unexplained."""
    for field, value in (("PodName", args.PodName), ("PodNamespace", args.PodNamespace), ("Node", args.Node)):
        if not value:
            raise InvalidRequest("must not be empty: kube-scheduler names the pod and the node it binds", field=field)


def _answerable(
    pod: PodInfo, chosen: dict[str, list[str]], candidates: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """The engine's choice as kube-scheduler can act on it: offered nodes, each with at least
    one victim. kube-scheduler fails the whole preemption when a node it offered with victims
    comes back with none ("expected at least one victim pod on node"), and a node offered with
    none that comes back with none would only nominate the pod to a node cellfit's filter
    refused: such a node is dropped, as is any node kube-scheduler did not offer."""
    answerable = {node: uids for node, uids in chosen.items() if uids and node in candidates}
    if len(answerable) < len(chosen):
        log.info(
            "preemption nodes dropped",
            extra={"verb": "preempt", "pod": pod.key, "nodes": sorted(set(chosen) - set(answerable))},
        )
    return answerable


def _log_no_fit(pod: PodInfo, *, offered: int, failed: dict[str, str], unresolvable: dict[str, str]) -> None:
    """Say why no node took the pod, as the FailedScheduling event does: a WARNING when no
    preemption can help (every node unresolvable: the pod cannot run as written, e.g. an
    unknown virtual cluster), else INFO (waiting for room is normal)."""
    counts = Counter(unresolvable.values())
    counts.update(failed.values())
    common = counts.most_common(3)
    log.log(
        logging.INFO if failed else logging.WARNING,
        "no node fits",
        extra={
            "verb": "filter",
            "pod": pod.key,
            "offered": offered,
            "failed": len(failed),
            "unresolvable": len(unresolvable),
            "reason": common[0][0] if common else "no node was offered",
            "reasons": dict(common),
        },
    )


def _binding_in_flight(pod: PodInfo, names: Sequence[str], node_name: str) -> NamedDecision:
    """Only the node the pod's binding in flight goes to, if offered: its room is reserved there
    (the engine would count that reservation against the pod itself and find every node full,
    and kube-scheduler would preempt for it). kube-scheduler's bind there is then refused as in
    flight, and tried again once this binding is made or failed."""
    reason = f"a binding of pod {pod.key} to node {node_name} is in flight"
    there = np.array([name == node_name for name in names], dtype=bool)
    return NamedDecision(
        FilterDecision(feasible=np.flatnonzero(there)[:1], unresolvable={reason: np.flatnonzero(~there)} if not there.all() else {}),
        names,
    )


def _bound_already(pod: PodInfo, names: Sequence[str], node_name: str) -> NamedDecision:
    """Every offered node refused, for good: the pod runs on ``node_name`` already."""
    reason = f"pod {pod.key} is already bound to node {node_name}"
    return NamedDecision(FilterDecision(unresolvable={reason: np.arange(len(names), dtype=np.int64)} if len(names) else {}), names)
