"""Which pool of ``estimator.nodesMayJoin`` a pod waits for: the one rule the estimator (which
samples such a configuration though no node of it is up) and the placer (which starts it though
no node of it is up) share, so that a configuration one samples is not one the other refuses.

A pool an autoscaler (cluster-autoscaler, Karpenter) scales up from zero adds a node only for a
pending pod, and sizes that node for it: its nodes up now (none, or a smaller one added for
another pod) say nothing of the node it would add. A pod waits for a listed pool when a node of
it (``allox.nodeSelector``'s labels and the entry's) meets the pod's node selector and required
node affinity and a node of ``allox.nodeSelector``'s pool without the entry's labels does not:
only that pool's nodes run it. A pod any node of the pool meets (no selector naming the pool)
is judged by the nodes there are, as before.

Only the label keys ``allox.nodeSelector`` and the entry itself name are judged for an entry
(another entry's keys are not: listing a second pool changes nothing for the first): a node the
autoscaler adds also carries labels no entry lists (kubernetes.io/os, kubernetes.io/arch,
topology.kubernetes.io/zone, its instance type, its node group's own), so a requirement on any
other key counts as met -- ``nodeSelector: {kubernetes.io/os: linux}`` beside ``pool: cpu-big``
still waits for pool=cpu-big. A pod asking such a key no node of the pool will carry then waits
out ``estimator.pendingLimitSeconds`` rather than being told at once that it never runs.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import msgspec

from scheduler.kube.node_rules import NodeSelector, NodeSelectorTerm, requirement_matches, term_matches


def awaited_pool(
    *, selector: Mapping[str, str], spec: Mapping[str, Any], pool: Mapping[str, str], may_join: Sequence[Mapping[str, str]]
) -> Mapping[str, str] | None:
    """The first entry of ``may_join`` (``estimator.nodesMayJoin``) whose nodes alone run a pod
    of node selector ``selector`` and pod spec ``spec`` (its affinity) within ``pool``
    (``allox.nodeSelector``); None when no listed pool is the only one that runs it."""
    for labels in may_join:
        # Each entry on its own keys and the pool's: another entry's key (an instance type, a
        # zone) is one this pool's node carries with a value no entry lists.
        judged = frozenset(pool).union(labels)
        if _meets(selector=selector, spec=spec, labels={**pool, **labels}, judged=judged) and not _other_node_meets(
                selector=selector, spec=spec, pool=pool, entry=labels, judged=judged):
            return labels
    return None


# A label value no node carries (label values cannot hold a NUL): a node of another value of a key.
_OTHER_VALUE = "\x00other"


def _other_node_meets(
    *, selector: Mapping[str, str], spec: Mapping[str, Any], pool: Mapping[str, str], entry: Mapping[str, str], judged: frozenset[str]
) -> bool:
    """Whether a node of ``pool`` that is not the entry's meets the pod: one without the entry's
    keys, or one carrying them with values no entry lists (a static node group's: ``karpenter.sh/
    nodepool Exists`` is met by any nodepool's node)."""
    other = {key: _OTHER_VALUE for key in entry if key not in pool}
    return any(_meets(selector=selector, spec=spec, labels=labels, judged=judged) for labels in (pool, {**pool, **other}))


def said(labels: Mapping[str, str]) -> str:
    """A pool's labels as users read them: "pool=cpu-big"."""
    return ", ".join(f"{key}={value}" for key, value in sorted(labels.items()))


def judged_terms(spec: Mapping[str, Any]) -> list[NodeSelectorTerm] | None:
    """The pod spec's required node affinity terms, where judged by node labels: None without
    one, one that does not read (the API server's own refusal says what), or a term on node
    fields (a node of any name may join)."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return None
    try:
        terms = msgspec.convert(required, NodeSelector).nodeSelectorTerms
    except msgspec.ValidationError:
        return None
    return None if any(term.matchFields for term in terms) else list(terms)


def affinity_met(spec: Mapping[str, Any], *, labels: Mapping[str, str]) -> bool:
    """Whether a node carrying ``labels`` meets the pod spec's required node affinity, by
    kube-scheduler's rules (true where it is not judged, :func:`judged_terms`)."""
    terms = judged_terms(spec)
    # No term names node fields, so a node's name does not weigh in.
    return terms is None or any(term_matches(term, name="", labels=labels) for term in terms)


def _meets(*, selector: Mapping[str, str], spec: Mapping[str, Any], labels: Mapping[str, str], judged: frozenset[str]) -> bool:
    """Whether a node carrying ``labels`` meets the pod's node selector and required node
    affinity on the ``judged`` keys; a requirement on another key counts as met (a node that
    joins carries labels the entry does not list)."""
    if not all(labels.get(key) == value for key, value in selector.items() if key in judged):
        return False
    terms = judged_terms(spec)
    return terms is None or any(_term_met(term, labels=labels, judged=judged) for term in terms)


def _term_met(term: NodeSelectorTerm, *, labels: Mapping[str, str], judged: frozenset[str]) -> bool:
    # A term with no requirement matches no node (kube-scheduler's rule), judged or not; one
    # whose requirements all name unjudged keys may be met by the node that joins.
    if not term.matchExpressions:
        return False
    return all(requirement_matches(r, labels.get(r.key)) for r in term.matchExpressions if r.key in judged)
