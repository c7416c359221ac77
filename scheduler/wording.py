"""How cellfit writes quantities in what users read: Events, conditions, ``kubectl cellfit``.
One place, so that the estimator's Event, AlloX's condition and the plugin's answer say
"12 min" and "2nd" the same way. Pure."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``; under a second ``0.4 s`` (not ``0 s``, which reads as
    none: "27 s ± 0 s" said an estimate had no uncertainty when it had 0.36 s)."""
    if 0 < seconds < 0.95:
        return f"{seconds:.1g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``11th``, ``23rd``."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def together_with(position: int, first: int) -> str:
    """Whom a queued Job starts together with: ``the 1st`` for the 2nd of a kind expected to start
    at the 1st's time (machines freeing together), ``the 1st and 2nd``, ``the 2nd to 5th``; ""
    when it starts after every Job before it (``first``, the first position of those expected
    at its time, is its own). "2nd on cpu" alone read as "after the 1st" where three CPU slots
    freed at once (user21's session)."""
    if first >= position:
        return ""
    if position - first == 1:
        return f"the {ordinal(first)}"
    if position - first == 2:
        return f"the {ordinal(first)} and {ordinal(first + 1)}"
    return f"the {ordinal(first)} to {ordinal(position - 1)}"


# The rule of a Job's spec.podFailurePolicy under which Kubernetes does not count a preempted pod
# (kube-scheduler marks it with the DisruptionTarget condition) against the Job's backoffLimit: a
# best-effort Job needs it to resume after cellfit preempts it rather than fail. Written as YAML
# (flow style, one line), as users add it.
RESUME_RULE = "{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}"
DISRUPTION_TARGET = "DisruptionTarget"
# Why a preempted pod of a Job is a failure to it, as a victim's Preempted Event and `kubectl
# cellfit why` of a failed Job both say it.
NOT_IGNORING_DISRUPTION = f"its spec.podFailurePolicy does not ignore {DISRUPTION_TARGET}"


def backoff_limit(*, limit: object, per_index: object) -> tuple[str, int]:
    """The count of failed pods a Job tolerates, named by its field: ``backoffLimitPerIndex`` where
    set, else ``backoffLimit`` (6, the API server's default, where unset)."""
    if isinstance(per_index, int):
        return "backoffLimitPerIndex", per_index
    return "backoffLimit", limit if isinstance(limit, int) else 6


def ignores_disruption(policy: object) -> bool:
    """Whether a Job's ``spec.podFailurePolicy`` (as JSON decodes it) ignores a preempted pod: the
    first of its rules that matches the DisruptionTarget condition (status True, the default)
    has ``action: Ignore`` (the Job controller applies the first rule that matches). Rules on
    exit codes are passed over: a preempted pod's exit code is its workload's."""
    rules = policy.get("rules") if isinstance(policy, dict) else None
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, dict):
            continue
        patterns = rule.get("onPodConditions")
        for pattern in patterns if isinstance(patterns, list) else []:
            if (isinstance(pattern, dict) and pattern.get("type") == DISRUPTION_TARGET
                    and pattern.get("status", "True") == "True"):
                return rule.get("action") == "Ignore"
    return False
