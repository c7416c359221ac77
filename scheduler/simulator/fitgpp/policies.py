"""The ``fitgpp`` workload's scheduling policies (the *demand* job model), registered in the
simulator's policy registry (:mod:`scheduler.simulator.policy_registry`).

A policy gets one :meth:`Policy.schedule` call per instant, after that instant's events, and
acts through the simulation (what it may read and call is :class:`SimulationView`, which
:class:`~scheduler.simulator.fitgpp.simulation.Simulation` implements):
:meth:`~SimulationView.try_place` starts a job where the served engine places it
(kube-scheduler's cycle), :meth:`~SimulationView.preempt` suspends victims for a TE job. A new
policy implements ``schedule`` and registers a factory for the ``"demand"`` job model::

    register_policy("fifo", FifoPolicy)

The four of arXiv:1902.01613 §4.1 are here. All are FIFO at heart (§3: "built on the FIFO
principle"): a queue head that cannot start blocks the jobs behind it (head-of-line blocking,
the effect §3.1 is about). The preemptive ones serve TE jobs first: a TE job that does not fit
preempts BE jobs at once; a TE job that can neither fit nor make room waits at the head of the
TE queue and holds back the BE queue too, so BE jobs cannot take the room it is waiting for.

* ``fifo`` — one queue in arrival order, never preempts;
* ``lrtp`` — Big-C's Longest Remaining Time Preemption with perfect knowledge: preempt the BE
  job with the most work left, then the next, until one node has room (§4.1, Appendix A);
* ``rand`` — the same with BE jobs in random order;
* ``fitgpp`` — the composed engine's ``select_victims`` (FitGpp's
  :func:`scheduler.preemption.fitgpp.choose_victims` on kube-scheduler's candidate nodes), the
  call the extender's preempt verb makes.

Every preemptive policy respects P (jobs preempted P times are never victims again), as in the
paper's Tables 3 and 4.

One more is what a cluster running cellfit does, not the paper's simulator:

* ``kube`` — kube-scheduler's own queue (:mod:`~scheduler.simulator.kube_queue`: priority,
  then queue time, backoff, pods parked until an event may help them; no head-of-line
  blocking) and, after every failed attempt, its preemption through the engine as ``fitgpp``
  makes it.
"""

from __future__ import annotations

import random
from collections import deque
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol, Sequence, cast

from scheduler.preemption.engine import VictimChoice
from scheduler.simulator.fitgpp.state import JobState, PreemptionPlan, SimJob
from scheduler.simulator.kube_queue import QueuedPod, SchedulingQueue
from scheduler.simulator.policy_registry import PolicyOptions, build_policy, register_policy

if TYPE_CHECKING:
    from scheduler.core.engine import SchedulingEngine
    from scheduler.core.model import PodInfo
    from scheduler.core.resources import Resources


class DecidesPreemption(Protocol):
    """The part of FitGpp's preemption capability the simulation uses: victims with their
    explanation (:class:`~scheduler.preemption.engine.ExplainedPreemption`)."""

    def decide_preemption(
        self, pod: PodInfo, candidates: Mapping[str, Sequence[str]], victim_pods: Mapping[str, PodInfo]
    ) -> VictimChoice: ...


class SimulationView(Protocol):
    """What a policy reads and calls of the simulation running it
    (:class:`~scheduler.simulator.fitgpp.simulation.Simulation`)."""

    @property
    def now(self) -> float:
        """The current instant, in simulated seconds."""
        ...

    @property
    def version(self) -> int:
        """Bumped whenever resources are released: a queue head blocked at version v need not
        be tried again before it changes."""
        ...

    @property
    def te_queue(self) -> deque[SimJob]:
        """Waiting TE jobs in arrival order; the policy pops the ones it starts or preempts for."""
        ...

    @property
    def be_queue(self) -> deque[SimJob]:
        """Waiting BE jobs in arrival order; the policy pops the ones it starts."""
        ...

    @property
    def running_be(self) -> Mapping[int, SimJob]:
        """Running (not terminating) BE jobs in start order."""
        ...

    @property
    def by_pod(self) -> Mapping[str, SimJob]:
        """The job of each current pod, by pod UID."""
        ...

    @property
    def engine(self) -> SchedulingEngine: ...

    @property
    def preemption(self) -> DecidesPreemption | None: ...

    def try_place(self, job: SimJob) -> bool: ...

    def preempt(self, job: SimJob, plan: PreemptionPlan) -> None: ...

    def free_on(self, node: str) -> Resources: ...

    def preemption_candidates(self, job: SimJob) -> dict[str, list[str]]: ...

    @property
    def rejected_by_extender(self) -> bool:
        """Whether the last failed :meth:`try_place` was the engine's refusal rather than
        kube-scheduler's own filter leaving no node to offer."""
        ...

    def wake_at(self, at: float) -> None:
        """A scheduling pass at ``at`` even if nothing happens then."""
        ...

    def try_nominated(self, job: SimJob) -> bool:
        """Retry a TE job nominated while its victims leave: its node first, then every node."""
        ...


class Policy(Protocol):
    @property
    def name(self) -> str:
        """The name it is registered under, as shown in tables."""
        ...

    @property
    def preemptive(self) -> bool: ...

    def schedule(self, sim: SimulationView) -> None:
        """Start and preempt jobs for the current instant (``sim.now``)."""
        ...


PolicyFactory = Callable[[PolicyOptions], Policy]


def make_policy(name: str, options: PolicyOptions) -> Policy:
    """A policy for the demand model (the ``fitgpp`` workload and traces)."""
    return cast(Policy, build_policy(name, options, model="demand"))


class _Blocked:
    """Remembers that a queue's head could not start at a given resource version: nothing can
    change for it until something is released, so the next instants skip the attempt."""

    __slots__ = ("job", "version")

    def __init__(self) -> None:
        self.job = -1
        self.version = -1

    def still(self, job: SimJob, sim: SimulationView) -> bool:
        return self.job == job.index and self.version == sim.version

    def mark(self, job: SimJob, sim: SimulationView) -> None:
        self.job = job.index
        self.version = sim.version


class FifoPolicy:
    """Non-preemptive FIFO over all jobs in arrival order, TE and BE alike."""

    name = "fifo"
    preemptive = False

    def __init__(self, options: PolicyOptions | None = None) -> None:
        self._blocked = _Blocked()

    def schedule(self, sim: SimulationView) -> None:
        te, be = sim.te_queue, sim.be_queue
        while te or be:
            queue = te if not be or (te and te[0].arrival_seq < be[0].arrival_seq) else be
            head = queue[0]
            if self._blocked.still(head, sim) or not sim.try_place(head):
                self._blocked.mark(head, sim)
                return
            queue.popleft()


class PreemptiveFifo:
    """TE queue first, then the BE queue, each FIFO; a TE job that does not fit asks
    :meth:`plan` for victims. Subclasses choose the victims."""

    name = "preemptive"
    preemptive = True

    def __init__(self, options: PolicyOptions) -> None:
        self.settings = options.settings
        self.seed = options.seed
        self._te_blocked = _Blocked()
        self._be_blocked = _Blocked()

    def plan(self, job: SimJob, sim: SimulationView) -> PreemptionPlan | None:  # pragma: no cover
        raise NotImplementedError

    def schedule(self, sim: SimulationView) -> None:
        te = sim.te_queue
        while te:
            head = te[0]
            if self._te_blocked.still(head, sim):
                return
            if sim.try_place(head):
                te.popleft()
                continue
            plan = self.plan(head, sim) if self.settings.max_preemptions != 0 else None
            if plan is None:
                self._te_blocked.mark(head, sim)
                return  # the BE queue waits behind a TE job that cannot start
            te.popleft()
            sim.preempt(head, plan)
        be = sim.be_queue
        while be:
            head = be[0]
            if self._be_blocked.still(head, sim) or not sim.try_place(head):
                self._be_blocked.mark(head, sim)
                return
            be.popleft()

    def _eligible(self, sim: SimulationView) -> list[SimJob]:
        """Running BE jobs not yet preempted P times, in start order."""
        return [job for job in sim.running_be.values() if self.settings.below_limit(job.preemptions)]


def _greedy(job: SimJob, sim: SimulationView, order: Iterable[SimJob], rule: str) -> PreemptionPlan | None:
    """Preempt jobs in ``order`` until one node has room for ``job`` (LRTP and RAND, §4.1:
    "continue the preemption process until they can prepare enough resource"). Victims on other
    nodes stay preempted, as in the paper. Nothing is preempted when no node can get there."""
    need = job.demand.as_tuple()
    candidates = list(order)
    freed: dict[str, list[int]] = {}
    for victim in candidates:
        assert victim.node is not None
        total = freed.setdefault(victim.node, [0, 0, 0])
        for d, amount in enumerate(victim.demand.as_tuple()):
            total[d] += amount
    free_cache: dict[str, tuple[int, int, int]] = {}

    def room(node: str, extra: list[int]) -> bool:
        free = free_cache.get(node)
        if free is None:
            free = free_cache[node] = sim.free_on(node).as_tuple()
        return all(f + e >= n for f, e, n in zip(free, extra, need))

    if not any(room(node, extra) for node, extra in freed.items()):
        return None
    released: dict[str, list[int]] = {}
    victims: list[SimJob] = []
    for victim in candidates:
        assert victim.node is not None
        victims.append(victim)
        total = released.setdefault(victim.node, [0, 0, 0])
        for d, amount in enumerate(victim.demand.as_tuple()):
            total[d] += amount
        if room(victim.node, total):
            return PreemptionPlan(node=victim.node, victims=victims, rule=rule)
    raise AssertionError("a node that could reach room never did")  # pragma: no cover


class LrtpPolicy(PreemptiveFifo):
    """Longest Remaining Time Preemption (Big-C), with perfect knowledge of remaining work."""

    name = "lrtp"

    def plan(self, job: SimJob, sim: SimulationView) -> PreemptionPlan | None:
        now = sim.now
        order = sorted(self._eligible(sim), key=lambda victim: (-victim.remaining(now), victim.index))
        return _greedy(job, sim, order, "lrtp")


class RandPolicy(PreemptiveFifo):
    """Preempt running BE jobs in random order (seeded)."""

    name = "rand"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        self._rng = random.Random(f"rand/{options.seed}")

    def plan(self, job: SimJob, sim: SimulationView) -> PreemptionPlan | None:
        order = sorted(self._eligible(sim), key=lambda victim: victim.index)
        self._rng.shuffle(order)
        return _greedy(job, sim, order, "rand")


def engine_plan(job: SimJob, sim: SimulationView) -> tuple[PreemptionPlan | None, VictimChoice | None]:
    """kube-scheduler's preemption for ``job``'s pod through the served engine: its dry run's
    candidate nodes go to the engine's preemption (the call the extender's preempt verb makes),
    and the engine's choice is the plan. ``(None, None)`` when the dry run finds no candidate
    (kube-scheduler then does not call the extender)."""
    candidates = sim.preemption_candidates(job)
    if not candidates:
        return None, None
    if sim.preemption is not None:
        choice = sim.preemption.decide_preemption(job.pod, candidates, {})
    else:  # an engine without the capability (the live service): its victims, unexplained
        choice = VictimChoice(victims=sim.engine.select_victims(job.pod, candidates, {}), decision=None, chosen_by="unexplained")
    if not choice.victims:
        return None, choice
    ((node, victims),) = choice.victims.items()
    return PreemptionPlan(node=node, victims=[sim.by_pod[uid] for uid in victims], rule=choice.rule), choice


class FitGppPolicy(PreemptiveFifo):
    """FitGpp through the production engine (:func:`engine_plan`), on the paper's FIFO queues."""

    name = "fitgpp"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        self.last_choice: VictimChoice | None = None

    def plan(self, job: SimJob, sim: SimulationView) -> PreemptionPlan | None:
        plan, choice = engine_plan(job, sim)
        if choice is not None:
            self.last_choice = choice
        return plan


class KubeSchedulerPolicy:
    """FitGpp as a cluster running cellfit applies it: kube-scheduler's own queue
    (:mod:`~scheduler.simulator.kube_queue`: priority, then queue time; backoff; pods parked
    until an event may help them) instead of the paper's FIFO queues, and on every failed
    attempt kube-scheduler's preemption through the engine (:func:`engine_plan`). No
    head-of-line blocking: a pod that does not fit waits while the pods behind it are tried,
    and the room a preemptor or a resumed Job is owed is kept by kube-scheduler's nominations
    and the engine's holds, not by the queue."""

    name = "kube"
    preemptive = True

    # Flushes in a row that placed nothing, with nothing else happening, for this long: time
    # alone changes the engine's answers only as its holds lapse (minutes), so later flushes
    # cannot do better and the queue stops asking for them (the run then ends, or stalls).
    _FUTILE_FLUSH_SECONDS = 24 * 3600.0

    def __init__(self, options: PolicyOptions) -> None:
        self.settings = options.settings
        self.queue: SchedulingQueue[SimJob] = SchedulingQueue()
        self._version = 0
        self._events = 0  # binds and victims marked for deletion: what moves extender-rejected pods
        self._progress = 0  # binds and preemptions
        self._flush_at: float | None = None
        self._futile_since: float | None = None

    def schedule(self, sim: SimulationView) -> None:
        now, queue = sim.now, self.queue
        eventful = False
        # Pods the simulation queued since the last pass: new, a preempted Job's next pod, a
        # preemptor whose nominated node lost its room.
        for waiting in (sim.te_queue, sim.be_queue):
            while waiting:
                job = waiting.popleft()
                queue.add(job, key=job.index, now=now)
                eventful = True
        if sim.version != self._version:
            self._version = sim.version
            queue.pod_deleted()
            eventful = True
        flushing = self._flush_at is not None and now >= self._flush_at
        if flushing:
            queue.flush_leftover(now)
        progress = self._progress
        while True:
            for pod in queue.take(now):
                self._attempt(pod, sim)
            if not queue.assigned_pod_changed(self._events):
                break
        if eventful or self._progress != progress:
            self._futile_since = None
        elif flushing and self._futile_since is None:
            self._futile_since = now
        futile = self._futile_since is not None and now - self._futile_since >= self._FUTILE_FLUSH_SECONDS
        self._flush_at = None if futile else queue.next_flush()
        if self._flush_at is not None and self._flush_at > now:
            sim.wake_at(self._flush_at)

    def _attempt(self, pod: QueuedPod[SimJob], sim: SimulationView) -> None:
        job = pod.item
        if job.pod.uid != pod.uid or job.state not in (JobState.QUEUED, JobState.RESERVED):
            return  # bound meanwhile (a nominated pod whose victims are gone), or done
        if job.state is JobState.RESERVED:
            # Nominated, its victims still leaving: kube-scheduler retries it all the same.
            if sim.try_nominated(job):
                self._bound()
            else:
                self.queue.failed(pod, now=sim.now, by_extender=sim.rejected_by_extender, events=self._events)
            return
        if sim.try_place(job):
            self._bound()
            return
        by_extender = sim.rejected_by_extender
        if self.settings.max_preemptions != 0:
            plan, _ = engine_plan(job, sim)
            if plan is not None:
                sim.preempt(job, plan)  # nominated; the victims' deletion is an event for the parked
                self._events += 1
                self._progress += 1
                self.queue.failed(pod, now=sim.now, by_extender=by_extender, events=self._events)
                return
        self.queue.failed(pod, now=sim.now, by_extender=by_extender, events=self._events)

    def _bound(self) -> None:
        self._events += 1
        self._progress += 1


register_policy("fifo", FifoPolicy)
register_policy("lrtp", LrtpPolicy)
register_policy("rand", RandPolicy)
register_policy("fitgpp", FitGppPolicy)
register_policy("kube", KubeSchedulerPolicy)
