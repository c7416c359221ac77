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
# The actions of a podFailurePolicy rule (batch/v1): Ignore (not a failure: the Job makes a new
# pod), Count (the default: a failed pod against backoffLimit), FailJob (the Job fails at once),
# FailIndex (that index fails at once; Indexed Jobs with backoffLimitPerIndex only).
IGNORE, COUNT, FAIL_JOB, FAIL_INDEX = "Ignore", "Count", "FailJob", "FailIndex"
# What a rule that fails at once fails, and why, for each of the two actions.
FAILS_AT_ONCE = {FAIL_JOB: ("its Job", "the Job"), FAIL_INDEX: ("its index", "the index")}


def failing_rule(action: str) -> str:
    """``fails the Job on DisruptionTarget`` (FailJob), ``fails the index on DisruptionTarget``
    (FailIndex): what such a rule does to a preempted pod's Job."""
    return f"fails {FAILS_AT_ONCE[action][1]} on {DISRUPTION_TARGET}"


def fails_on_disruption(action: str) -> str:
    """``its spec.podFailurePolicy fails the Job on DisruptionTarget`` for a FailJob rule, ``...
    fails the index ...`` for a FailIndex one: why a preempted pod fails its Job, or its index,
    at once."""
    return f"its spec.podFailurePolicy {failing_rule(action)}"


# What a preemption does to a victim that no controller creates again (a bare pod): it is gone.
NO_CONTROLLER_OUTCOME = "it has no controller (a Job) to create it again, so nothing resumes it"
# ... to a victim whose Job is deleted (the garbage collector deletes its pods after it).
DELETED_JOB_OUTCOME = "its Job is deleted, so nothing creates it again"
# ... to a victim whose Job cellfit's watch has not shown yet: whether it resumes is the Job's
# spec.podFailurePolicy's to say, which cellfit has not read.
UNKNOWN_JOB_OUTCOME = (f"cellfit has not read its Job yet, so it does not know whether the Job's spec.podFailurePolicy "
                       f"ignores {DISRUPTION_TARGET}: the Job resumes it only if it does")


def preemption_outcome(action: str | None, limit: tuple[str, int], *, failed: int = 0, with_it: int = 0) -> str:
    """What a preemption does to a Job whose podFailurePolicy does not ignore it, given the action
    of its rule on DisruptionTarget (:func:`disruption_action`; None: no rule), the failed pods
    it tolerates (:func:`backoff_limit`) and those it has had (``status.failed``, with the pods of
    the Job the same decision preempted before this one: the Job's status counts none of them
    yet): what a victim's Preempted Event tells. ``with_it``: the pods of the same Job the
    decision preempts after this one (FitGpp's fallback takes several), each a failed pod more.
    FailJob and FailIndex fail at once, whatever the limit; Count, or no rule, counts a failed
    pod, which fails the Job past its backoffLimit (the Job controller fails it once
    ``status.failed`` exceeds it). A ``backoffLimitPerIndex`` counts each index's failures, which
    ``status.failed`` (the Job's) does not tell."""
    if action in FAILS_AT_ONCE:
        return f"{FAILS_AT_ONCE[action][0]} fails, as {fails_on_disruption(action)}"
    name, count = limit
    if count == 0:
        return f"its Job fails instead of resuming, as {NOT_IGNORING_DISRUPTION} and its {name} is 0"
    counted = f"its Job counts it as a failed pod against its {name} {count}, as {NOT_IGNORING_DISRUPTION}"
    if name != "backoffLimit":
        return counted
    nth = failed + 1
    if nth > count:
        return (f"its Job fails instead of resuming, as {NOT_IGNORING_DISRUPTION} and this is its {ordinal(nth)} failed pod, "
                f"over its {name} {count}")
    last = nth + with_it
    others = ""
    if with_it:
        whose = "the other pod of its Job preempted with it is" if with_it == 1 else f"the {with_it} other pods of its Job preempted with it are"
        then = ordinal(last) if with_it == 1 else f"{ordinal(nth + 1)} {'and' if with_it == 2 else 'to'} {ordinal(last)}"
        others = f", and {whose} its {then}"
    if last > count:
        return f"{counted}: its {ordinal(nth)} failed pod{others}, over its {name} {count}, so its Job fails instead of resuming"
    left = count - last
    return (f"{counted}: its {ordinal(nth)} failed pod{others}, "
            + (f"after which it tolerates {left} more" if left else "so the next one fails the Job"))


def backoff_limit(*, limit: object, per_index: object) -> tuple[str, int]:
    """The count of failed pods a Job tolerates, named by its field: ``backoffLimitPerIndex`` where
    set, else ``backoffLimit`` (6, the API server's default, where unset)."""
    if isinstance(per_index, int):
        return "backoffLimitPerIndex", per_index
    return "backoffLimit", limit if isinstance(limit, int) else 6


def disruption_action(policy: object) -> str | None:
    """The action of the rule of a Job's ``spec.podFailurePolicy`` (as JSON decodes it) that
    applies to a preempted pod: the first of its rules that matches the DisruptionTarget
    condition (status True, the default; the Job controller applies the first rule that
    matches), as written (``Ignore``, ``Count``, ``FailJob``, ``FailIndex``); None where no rule
    matches (the Job counts the pod against its limit, as ``Count``). Rules on exit codes are
    passed over: a preempted pod's exit code is its workload's."""
    rules = policy.get("rules") if isinstance(policy, dict) else None
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, dict):
            continue
        patterns = rule.get("onPodConditions")
        for pattern in patterns if isinstance(patterns, list) else []:
            if (isinstance(pattern, dict) and pattern.get("type") == DISRUPTION_TARGET
                    and pattern.get("status", "True") == "True"):
                action = rule.get("action")
                return action if isinstance(action, str) else None
    return None


def ignores_disruption(policy: object) -> bool:
    """Whether a Job's ``spec.podFailurePolicy`` ignores a preempted pod: its rule on
    DisruptionTarget (:func:`disruption_action`) has ``action: Ignore``."""
    return disruption_action(policy) == IGNORE


# What a process stopped by a signal usually exits with (128 + the signal): SIGTERM, which a
# preempted pod's containers get first, and SIGKILL, at the end of its grace period.
SIGNAL_EXIT_CODES = {143: "SIGTERM", 137: "SIGKILL"}
# A podFailurePolicy rule on exit codes that applies to a preempted pod before its rule on
# DisruptionTarget: (its index among the rules, its action, the signal exit codes it matches).
ExitCodeRule = tuple[int, str, tuple[int, ...]]


def _on_disruption(rule: object) -> bool:
    """Whether a podFailurePolicy rule matches the DisruptionTarget condition (status True, the
    default), as a preempted pod has it."""
    patterns = rule.get("onPodConditions") if isinstance(rule, dict) else None
    return any(isinstance(p, dict) and p.get("type") == DISRUPTION_TARGET and p.get("status", "True") == "True"
               for p in (patterns if isinstance(patterns, list) else []))


def disruption_rule_at(policy: object) -> int | None:
    """The index of a Job's ``spec.podFailurePolicy``'s first rule on DisruptionTarget (the one
    :func:`disruption_action` reads); None: none."""
    rules = policy.get("rules") if isinstance(policy, dict) else None
    return next((at for at, rule in enumerate(rules if isinstance(rules, list) else []) if _on_disruption(rule)), None)


def exit_code_rules_before_disruption(policy: object) -> tuple[ExitCodeRule, ...]:
    """The rules of a Job's ``spec.podFailurePolicy`` (as JSON decodes it) on exit codes, before
    its first rule on DisruptionTarget, that count a preempted pod exiting as a stopped process
    usually does (143 after SIGTERM, 137 after SIGKILL) or fail its Job or index: the Job
    controller applies the first rule that matches, exit codes and conditions alike, so such a
    rule takes the pod before the rule on DisruptionTarget is reached. cellfit cannot know the
    exit code before the pod exits (the workload's: one that exits 0 once it has checkpointed
    matches no rule, code 0 being left out of every requirement), only which of the usual codes
    the rule matches: ``In`` those it lists, ``NotIn`` those it does not; an unknown operator
    matches nothing, and an Ignore rule, or one of an unknown action, takes nothing from it."""
    rules = policy.get("rules") if isinstance(policy, dict) else None
    found: list[ExitCodeRule] = []
    for at, rule in enumerate(rules if isinstance(rules, list) else []):
        if not isinstance(rule, dict):
            continue
        if _on_disruption(rule):
            break
        codes = rule.get("onExitCodes")
        action = rule.get("action")
        if not isinstance(codes, dict) or action not in (COUNT, FAIL_JOB, FAIL_INDEX):
            continue
        listed = codes.get("values")
        values = listed if isinstance(listed, list) else []
        operator = codes.get("operator")
        if operator not in ("In", "NotIn"):
            continue
        matched = tuple(code for code in SIGNAL_EXIT_CODES if (code in values) == (operator == "In"))
        if matched:
            found.append((at, action, matched))
    return tuple(found)


def exit_codes(codes: tuple[int, ...]) -> str:
    """``143``, ``143 or 137``."""
    return " or ".join(str(code) for code in codes)


def exit_code_action(action: str, limit: tuple[str, int]) -> str:
    """What a rule on exit codes of ``action`` does to the pod it matches, as a verb phrase:
    ``counts it against its backoffLimit 2``, ``fails the Job``, ``fails the index``."""
    if action in FAILS_AT_ONCE:
        return f"fails {FAILS_AT_ONCE[action][1]}"
    name, count = limit
    return f"counts it against its {name} {count}"


SIGNALS_USUALLY = "a process stopped by SIGTERM usually exits with 143, by SIGKILL with 137"


def resumes_unless(rules: tuple[ExitCodeRule, ...], limit: tuple[str, int]) -> str:
    """What a preemption does to a Job that ignores DisruptionTarget after ``rules`` on exit codes
    (:func:`exit_code_rules_before_disruption`; at least one): ``its Job resumes it unless it exits
    with 143, on which its spec.podFailurePolicy's rule 1 counts it against its backoffLimit 2 before
    its Ignore rule on DisruptionTarget is reached: a process stopped by SIGTERM ...``."""
    unless = "; or with ".join(f"{exit_codes(codes)}, on which its spec.podFailurePolicy's rule {at + 1} {exit_code_action(action, limit)}"
                               for at, action, codes in rules)
    return f"its Job resumes it unless it exits with {unless} before its Ignore rule on {DISRUPTION_TARGET} is reached: {SIGNALS_USUALLY}"


def otherwise_if_exits(outcome: str, rules: tuple[ExitCodeRule, ...], action: str | None, limit: tuple[str, int]) -> str:
    """``outcome`` (:func:`preemption_outcome` of a Job whose rule on DisruptionTarget has
    ``action``; None: it has none) with what ``rules`` on exit codes before it do instead where it
    differs (:func:`exit_code_rules_before_disruption`): ``...; but if it exits with 143, its
    spec.podFailurePolicy's rule 1 fails the Job first: a process stopped by SIGTERM ...``."""
    same = COUNT if action in (None, COUNT) else action
    differ = [(at, does, codes) for at, does, codes in rules if does != same]
    if not differ:
        return outcome
    said = "; or with ".join(f"{exit_codes(codes)}, its spec.podFailurePolicy's rule {at + 1} {exit_code_action(does, limit)} first"
                             for at, does, codes in differ)
    return f"{outcome}; but if it exits with {said}: {SIGNALS_USUALLY}"
