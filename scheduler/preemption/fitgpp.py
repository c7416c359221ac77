"""Fitting Grace Period Preemption (FitGpp, arXiv:1902.01613 §3.2): which best-effort (BE)
pod to suspend so that an arriving trial-and-error (TE) pod starts now.

* eq. 1 — ``Size(D) = ||(C/C_cap, R/R_cap, G/G_cap)||₂`` with the capacities of the node the
  job runs on, so the measure does not depend on units (4 CPUs vs 64 GB);
* eq. 3 — ``Score(j) = Size(D_j)/max_J Size + s · GP_j/max_J GP`` over J, every running BE job;
* eq. 2/4 — the victim is ``argmin Score(j)`` over the BE jobs whose release *alone* lets the
  TE pod fit on their node (``D_TE <= D_j + N`` element-wise, N = the node's free resources)
  and whose ``PreemptionCount_j < P``;
* fallback (§3.2, "preempts a random BE job") — when no single job qualifies, BE jobs under
  the limit are suspended in random order until one node has room.

:func:`choose_victims` is the one entry point: the extender's preempt verb and the simulator's
``fitgpp`` policy both call it. It is pure and deterministic: the fallback's random order is
seeded by ``seed`` and the preemptor's UID, so the same request in the same state always gets
the same answer (kube-scheduler retries preemption; a retry must not pick other victims).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Collection, Final, Literal

import numpy as np
import numpy.typing as npt

from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption.gang_victims import GangVictim, preempted_elsewhere
from scheduler.preemption.model import FitGppSettings, JobClass, job_class_of
from scheduler.preemption.table import CandidateTable
from scheduler.wording import duration

Rule = Literal["fitgpp", "fallback"]
RULE_FITGPP: Final[Rule] = "fitgpp"
RULE_FALLBACK: Final[Rule] = "fallback"
MAX_NAMED: Final = 3  # the pods a refusal names; "and N more" after


def resource_size(requests: Resources, capacity: Resources) -> float:  # eq. 1
    """Eq. 1 for one job: the Euclidean norm of its demand as fractions of ``capacity``. A
    resource the node does not have (capacity 0) adds nothing: no job there can request it."""
    total = 0.0
    for amount, whole in zip(requests.as_tuple(), capacity.as_tuple()):
        if whole > 0:
            total += (amount / whole) ** 2
    return math.sqrt(total)


@dataclass(frozen=True, slots=True, kw_only=True)
class Normalisers:
    """The denominators of eq. 3: the largest size (eq. 1) and the longest GP (seconds) among J,
    the running BE jobs. By default they are taken over the table's valid rows; a driver whose
    table holds only some nodes (kube-scheduler's candidates) passes the cluster-wide values so
    scores mean the same thing in every request."""

    max_size: float
    max_grace_seconds: float

    @classmethod
    def of(cls, table: CandidateTable) -> Normalisers:
        if not table.valid.any():
            return Normalisers(max_size=0.0, max_grace_seconds=0.0)
        return Normalisers(
            max_size=float(table.sizes[table.valid].max()),
            max_grace_seconds=float(table.grace_seconds[table.valid].max()),
        )

    def terms(self, *, size: float, grace_seconds: float) -> tuple[float, float]:
        """The two normalised terms of eq. 3 (0 where J's maximum is 0: nothing to compare)."""
        return (
            size / self.max_size if self.max_size > 0 else 0.0,
            grace_seconds / self.max_grace_seconds if self.max_grace_seconds > 0 else 0.0,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class VictimScore:
    """One victim and the terms of its eq. 3 score, for events and logs."""

    uid: str
    key: str
    node: str
    size: float
    size_term: float
    grace_period_seconds: float
    grace_term: float
    score: float
    preemptions: int
    # Eq. 3's denominators (:class:`Normalisers`): what the two terms are fractions of.
    largest_size: float
    longest_grace_seconds: float
    # The gang taken whole with this pod (gang_victims.py): the score is the gang's.
    gang: GangVictim | None = None

    @property
    def uids_on_node(self) -> tuple[str, ...]:
        """The victim's pods on its node: the pod, or its gang's members there."""
        return self.gang.on(self.node) if self.gang is not None else (self.uid,)

    def explain(self, *, grace_period_weight: float) -> str:
        """Eq. 3's score, its two terms and what each is a fraction of, in words and units:
        ``score 0.63 = size 0.50 + 4.0 x grace 0.03: its share of its node's CPU, memory and
        GPUs is 50% of the largest best-effort pod's, and its grace period to checkpoint, 18 s,
        is 3% of the longest, 10 min``. Without parentheses: ``kubectl cellfit why`` reads it
        from the victim's Event up to that Event's closing one (scheduler/kubectl/objects.py)."""
        share, longest = ("its share of its node's", "its grace period") if self.gang is None else (
            "the gang's share of its nodes'", "the longest grace period of its pods")
        if self.largest_size > 0:
            size = (f"{share} CPU, memory and GPUs is {_percent(self.size_term)} "
                    "of the largest best-effort pod's")
        else:
            size = "no best-effort pod requests CPU, memory or GPUs"
        if self.longest_grace_seconds > 0:
            grace = (f"{longest} to checkpoint, {duration(self.grace_period_seconds)}, is "
                     f"{_percent(self.grace_term)} of the longest, {duration(self.longest_grace_seconds)}")
        else:
            grace = "no best-effort pod has a grace period to checkpoint"
        return (
            f"score {self.score:.2f} = size {self.size_term:.2f} + "
            f"{format_weight(grace_period_weight)} x grace {self.grace_term:.2f}: {size}, and {grace}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PreemptionDecision:
    """Suspend ``victims`` (all on ``node``) so that ``preemptor`` fits there.

    ``rule`` says how they were chosen: ``fitgpp`` (eq. 4, always exactly one victim) or
    ``fallback`` (random BE pods until the node had room). The preemptor should be placed on
    ``node`` once the victims' grace periods are over.
    """

    preemptor_uid: str
    preemptor_key: str
    node: str
    victims: tuple[VictimScore, ...]
    rule: Rule
    settings: FitGppSettings

    found: bool = True

    @property
    def victim_uids(self) -> tuple[str, ...]:
        """The pods on :attr:`node` to delete: each victim, or every member there of a gang taken."""
        return tuple(uid for victim in self.victims for uid in victim.uids_on_node)

    @property
    def elsewhere(self) -> dict[str, list[str]]:
        """The members of the gangs taken that run on other nodes, by node: kube-scheduler deletes
        the victims of the one node it picks, so the driver deletes these itself."""
        by_node: dict[str, list[str]] = {}
        for victim in self.victims:
            if victim.gang is not None:
                for node, uids in victim.gang.elsewhere(self.node).items():
                    by_node.setdefault(node, []).extend(uids)
        return by_node

    def preemptor_messages(self) -> tuple[str, ...]:
        """One event message per victim for the preemptor, e.g. ``preempting ns/pod on node X
        (score 0.63 = size 0.50 + 4.0 x grace 0.03: its share of ...)`` (:meth:`VictimScore.explain`);
        a gang taken whole is one victim: ``preempting the gang ns/job (2 pods, 16 GPUs) on node X
        and its pods on node Y, which cellfit deletes itself (score ...: the gang's share ...)``."""
        weight = self.settings.grace_period_weight
        prefix = "" if self.rule == RULE_FITGPP else "random fallback, no single best-effort pod frees enough; "
        return tuple(
            f"preempting {self._named(victim)} on node {self.node}{_rest_of_gang(victim, self.node)} "
            f"({prefix}{victim.explain(grace_period_weight=weight)})"
            for victim in self.victims
        )

    @staticmethod
    def _named(victim: VictimScore) -> str:
        return victim.key if victim.gang is None else victim.gang.describe()

    def victim_message(self, *, not_resumed: str | None = None, uid: str | None = None) -> str:
        """The event message for each victim, which its user reads in ``kubectl describe pod``
        without the right to read the preemptor's events: who, where and why, e.g. ``preempted
        by ns/pod on node X: the best-effort pod there cheapest to suspend and quickest to resume
        (FitGpp score 0.63 = size 0.50 + 4.0 x grace 0.03: its share of ...)``. The FitGpp rule takes exactly one
        victim, so its score is this victim's; the fallback's victims share one message, each
        followed by its own ``not_resumed``.

        ``not_resumed``: where the victim's Job does not resume the preempted pod (its
        podFailurePolicy does not ignore DisruptionTarget), what the preemption does to it instead
        (scheduler/wording.py ``preemption_outcome``: counted against its backoffLimit, or its
        Job or index failed at once); its Event then says so instead of promising a resume. None:
        the Job resumes it. The score stays last, in parentheses: ``kubectl cellfit why`` reads
        it there. ``uid``: the victim's, whose gang taken whole the message names; a member of
        it on another node than :attr:`node` is told its own node, and :attr:`node` as its
        gang's (:func:`~scheduler.preemption.gang_victims.preempted_elsewhere`)."""
        gang = next((v.gang for v in self.victims if v.gang is not None and any(m.uid == uid for m in v.gang.members)), None)
        ran_on = next((m.node for m in gang.members if m.uid == uid), self.node) if gang is not None else self.node
        if gang is not None and ran_on != self.node:
            return self._elsewhere_message(gang, ran_on=ran_on, not_resumed=not_resumed)
        head = f"preempted by {self.preemptor_key} on node {self.node}"
        if self.rule == RULE_FITGPP and len(self.victims) == 1:
            (victim,) = self.victims
            score = victim.explain(grace_period_weight=self.settings.grace_period_weight)
            chosen = _chosen(not_resumed)
            if victim.gang is not None:
                return f"{head}: {_whole_gang(victim.gang)}; the gang {chosen} (FitGpp {score})"
            return f"{head}: the best-effort pod there {chosen} (FitGpp {score})"
        fallback = f"{head}: no single best-effort pod there freed enough, so FitGpp took best-effort pods at random until it did"
        if gang is not None:
            fallback = f"{fallback}, this one {_whole_gang(gang)}"
        return fallback if not_resumed is None else f"{fallback}; {not_resumed}"

    def _elsewhere_message(self, gang: GangVictim, *, ran_on: str, not_resumed: str | None) -> str:
        """:meth:`victim_message` for a member of ``gang`` that ran on ``ran_on``, not on :attr:`node`:
        cellfit deletes it itself, and the preemptor takes its gang's room on :attr:`node`."""
        head = preempted_elsewhere(gang=gang.name, preemptor=self.preemptor_key, node=self.node, ran_on=ran_on)
        head = f"{head} and goes {_whole_gang(gang)}"
        if self.rule == RULE_FITGPP and len(self.victims) == 1:
            score = self.victims[0].explain(grace_period_weight=self.settings.grace_period_weight)
            return f"{head}; the gang {_chosen(not_resumed)} (FitGpp {score})"
        fallback = f"{head}; no single best-effort pod on node {self.node} freed enough, so FitGpp took best-effort pods at random until it did"
        return fallback if not_resumed is None else f"{fallback}; {not_resumed}"


@dataclass(frozen=True, slots=True, kw_only=True)
class NoVictims:
    """Nothing to preempt; ``reason`` is one sentence for a FailedScheduling event."""

    reason: str

    found: bool = False


def _chosen(not_resumed: str | None) -> str:
    """Why the victim was the one taken, and what that does to its Job where it does not resume."""
    return "cheapest to suspend and quickest to resume" if not_resumed is None else f"cheapest to suspend; {not_resumed}"


def _whole_gang(gang: GangVictim) -> str:
    """``with every pod of the gang ns/job (2 pods, 16 GPUs), on nodes a, b, as a gang runs whole or not at all``."""
    nodes = sorted({member.node for member in gang.members})
    return (f"with every pod of {gang.describe()}, on node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}, "
            "as a gang runs whole or not at all")


def _rest_of_gang(victim: VictimScore, node: str) -> str:
    """`` and its pods on nodes a, b, which cellfit deletes itself`` for a gang spread over nodes."""
    others = victim.gang.other_nodes(node) if victim.gang is not None else []
    if not others:
        return ""
    return f" and its pods on node{'s' if len(others) > 1 else ''} {', '.join(others)}, which cellfit deletes itself"


def _percent(fraction: float) -> str:
    """``50%``; ``<1%`` for a fraction above 0 that rounds to none (0% reads as nothing)."""
    return "<1%" if 0 < fraction < 0.005 else f"{fraction * 100:.0f}%"


def format_weight(weight: float) -> str:
    """``4.0``, ``0.5``, ``2.25``: s as written in explanations (at least one decimal)."""
    return f"{weight:.1f}" if round(weight, 1) == weight else f"{weight:g}"


def choose_victims(
    *,
    preemptor: PodInfo,
    table: CandidateTable,
    settings: FitGppSettings,
    nodes: Collection[str] | None = None,
    normalisers: Normalisers | None = None,
    seed: int = 0,
) -> PreemptionDecision | NoVictims:
    """The victims FitGpp suspends so that ``preemptor`` can run.

    ``table`` holds the cluster's nodes (capacity, free *N*) and running pods; ``nodes``, when
    given, restricts victims to those nodes (kube-scheduler's candidate nodes) while the
    normalisation of eq. 3 still covers every valid row, or ``normalisers`` when given.

    Only a TE preemptor preempts, and only BE pods are victims: a BE preemptor, or a TE pod
    with no BE pod to take from, gets :class:`NoVictims`. A label that is neither class raises
    :class:`~scheduler.errors.InvalidAnnotation`.
    """
    if job_class_of(preemptor.labels) is not JobClass.TRIAL:
        return NoVictims(reason=f"{preemptor.key} is best-effort; only trial pods preempt")
    if settings.max_preemptions == 0:
        return NoVictims(reason="preemption is disabled (P = 0)")
    need = preemptor.requests.as_tuple()
    valid = table.valid
    allowed = valid if nodes is None else valid & _node_mask(table, nodes)[_safe(table.node_of)]
    if not allowed.any():
        return NoVictims(reason="no best-effort pod runs on the nodes offered for preemption")
    if table.priorities is not None:  # kube-scheduler's rule: never a pod of a higher priority
        allowed = allowed & (table.priorities <= preemptor.priority)
        if not allowed.any():
            return NoVictims(
                reason=f"every best-effort pod on the offered nodes has a higher priority than this pod's "
                f"({preemptor.priority}); give trial pods a PriorityClass above best-effort ones"
            )
    under_limit = allowed
    if settings.max_preemptions is not None:
        under_limit = allowed & (table.preemptions < settings.max_preemptions)
    rows = np.flatnonzero(under_limit)
    if not len(rows):
        return NoVictims(
            reason=f"every best-effort pod on the offered nodes was already preempted P = "
            f"{settings.max_preemptions} times" + _kept_by_limit(table, settings, np.flatnonzero(allowed), need)
        )
    scale = normalisers if normalisers is not None else Normalisers.of(table)
    node_of = table.node_of[rows]
    # Eq. 2, one contiguous vector per dimension: the pod's release alone makes room.
    alone = (table.demand[0, rows] + table.node_free[0, node_of]) >= need[0]
    alone &= (table.demand[1, rows] + table.node_free[1, node_of]) >= need[1]
    alone &= (table.demand[2, rows] + table.node_free[2, node_of]) >= need[2]
    fitting = rows[alone]
    if len(fitting):
        # Eq. 3 only where eq. 4 looks; the normalisation covers all of J all the same.
        size_terms = table.sizes[fitting] / scale.max_size if scale.max_size > 0 else np.zeros(len(fitting))
        grace_terms = (
            table.grace_seconds[fitting] / scale.max_grace_seconds
            if scale.max_grace_seconds > 0
            else np.zeros(len(fitting))
        )
        scores = size_terms + settings.grace_period_weight * grace_terms
        best = scores.min()
        tied = fitting[scores == best].tolist()
        row = min(tied, key=lambda r: (table.node_names[int(table.node_of[r])] or "", table.uids[r] or ""))
        return _decision(preemptor, table, settings, scale, [row], RULE_FITGPP)
    fallback = _fallback(preemptor, table, settings, scale, rows, need, seed)
    if isinstance(fallback, NoVictims):
        return NoVictims(reason=fallback.reason + _kept_by_limit(table, settings, np.flatnonzero(allowed), need))
    return fallback


def _reachable(table: CandidateTable, rows: npt.NDArray[np.intp], need: tuple[int, int, int]) -> npt.NDArray[np.bool_]:
    """By node slot: whether suspending every pod of ``rows`` on the node makes room for ``need``."""
    node_of = table.node_of[rows]
    released = np.zeros_like(table.node_free)
    for dimension in range(3):
        np.add.at(released[dimension], node_of, table.demand[dimension, rows])
    room = table.node_free + released
    reachable: npt.NDArray[np.bool_] = (room[0] >= need[0]) & (room[1] >= need[1]) & (room[2] >= need[2])
    return reachable


def _kept_by_limit(table: CandidateTable, settings: FitGppSettings, allowed: npt.NDArray[np.intp], need: tuple[int, int, int]) -> str:
    """What FitGpp's refusal adds where P kept it from pods that would have made room (on a node
    where suspending them with the others there frees enough, which the pods under P alone do
    not: it refused): ``; preemption.maxPreemptions (P = 2) kept out the best-effort pods that
    would have made room: ns/be-3 was preempted 2 times, its limit`` (the first three by key,
    then how many more), so that a user knows why nothing was preempted. "" where none would
    have."""
    limit = settings.max_preemptions
    if limit is None or not len(allowed):
        return ""
    reachable = _reachable(table, allowed, need)
    helpers = allowed[(table.preemptions[allowed] >= limit) & reachable[table.node_of[allowed]]].tolist()
    if not helpers:
        return ""
    said = []
    for row in sorted(helpers, key=lambda r: str(table.keys[r]))[:MAX_NAMED]:
        count = int(table.preemptions[row])
        said.append(f"{table.keys[row]} was preempted {count} time{'s' if count != 1 else ''}, "
                    + ("its limit" if count == limit else f"over its limit {limit}"))
    more = f"; and {len(helpers) - MAX_NAMED} more" if len(helpers) > MAX_NAMED else ""
    return (f"; preemption.maxPreemptions (P = {limit}) kept out the best-effort pods that would have made room: "
            + "; ".join(said) + more)


def _fallback(
    preemptor: PodInfo,
    table: CandidateTable,
    settings: FitGppSettings,
    scale: Normalisers,
    rows: npt.NDArray[np.intp],
    need: tuple[int, int, int],
    seed: int,
) -> PreemptionDecision | NoVictims:
    """§3.2's "preempts a random BE job", repeated until one node has room, as LRTP and RAND
    do. Victims drawn on a node that never reaches room would free nothing the preemptor can
    use (it runs on one node), so the draw is over the nodes where room can be made, and only
    the victims on the node that gets there first are returned."""
    rows = rows[_reachable(table, rows, need)[table.node_of[rows]]]
    if not len(rows):
        return NoVictims(
            reason="suspending every eligible best-effort pod on any one offered node would still "
            "leave too little room"
        )
    # A canonical order before shuffling: the choice must not depend on table slot order.
    ordered = sorted(rows.tolist(), key=lambda r: table.uids[r] or "")
    random.Random(f"fitgpp-fallback/{seed}/{preemptor.uid}").shuffle(ordered)
    gathered: dict[int, list[int]] = {}
    free_now: dict[int, list[int]] = {}
    for row in ordered:
        node = int(table.node_of[row])
        free = free_now.get(node)
        if free is None:
            free = table.node_free[:, node].tolist()
        free = [have + extra for have, extra in zip(free, table.demand[:, row].tolist())]
        free_now[node] = free
        gathered.setdefault(node, []).append(row)
        if all(have >= wanted for have, wanted in zip(free, need)):
            return _decision(preemptor, table, settings, scale, gathered[node], RULE_FALLBACK)
    raise AssertionError("a reachable node never reached room")  # pragma: no cover


def _decision(
    preemptor: PodInfo,
    table: CandidateTable,
    settings: FitGppSettings,
    scale: Normalisers,
    rows: list[int],
    rule: Rule,
) -> PreemptionDecision:
    node_name = table.node_names[int(table.node_of[rows[0]])]
    assert node_name is not None
    victims = []
    for row in rows:
        size = float(table.sizes[row])
        grace = float(table.grace_seconds[row])
        size_term, grace_term = scale.terms(size=size, grace_seconds=grace)
        victims.append(
            VictimScore(
                uid=str(table.uids[row]),
                key=str(table.keys[row]),
                node=node_name,
                size=size,
                size_term=size_term,
                grace_period_seconds=grace,
                grace_term=grace_term,
                score=size_term + settings.grace_period_weight * grace_term,
                preemptions=int(table.preemptions[row]),
                largest_size=scale.max_size,
                longest_grace_seconds=scale.max_grace_seconds,
            )
        )
    return PreemptionDecision(
        preemptor_uid=preemptor.uid,
        preemptor_key=preemptor.key,
        node=node_name,
        victims=tuple(victims),
        rule=rule,
        settings=settings,
    )


def _safe(node_of: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    # Rows without a node are never valid; index them at 0 so fancy indexing stays in range.
    return np.where(node_of >= 0, node_of, 0)


def _node_mask(table: CandidateTable, nodes: Collection[str]) -> npt.NDArray[np.bool_]:
    mask = np.zeros(max(1, len(table.node_names)), dtype=np.bool_)
    for name in nodes:
        slot = table.node_index.get(name)
        if slot is not None:
            mask[slot] = True
    return mask
