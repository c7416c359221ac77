"""Why a Job or pod is where it is: one short answer from the facts (objects), pure.

The order of the checks is the order a user asks in: is it done; is cellfit still deciding how
to run it (estimating, AlloX's queue); was it preempted; and otherwise what keeps its pending
pod off every node (a resume hold, its gang, its VC's quota, another reason kube-scheduler
reported). Every sentence comes from what cellfit or kube-scheduler recorded; nothing is
guessed beyond naming which record said it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Final, Mapping, Sequence

from estimator.contract import estimate_errors
from scheduler.constants import ANNOTATION_CONFIGURATIONS, ANNOTATION_PREEMPTIONS, LABEL_VIRTUAL_CLUSTER, PRIORITY_GUARANTEED
from scheduler.kubectl.objects import INSUFFICIENT_GPU, NOT_RECLAIMED, PREEMPTING, CellfitView, Condition, Event, Facts, GoneFacts, JobFacts, PodFacts, Preemption, moment
from scheduler.kube.times import timestamp
from scheduler.kubectl.views import free_healthy_cells, opportunistic_gpus, unbound_cells, unhealthy_nodes
from scheduler.kubectl.wording import MAX_NAMED, duration, expected_start, listed, ordinal, times
from scheduler.wording import (
    COUNT,
    DISRUPTION_TARGET,
    FAIL_INDEX,
    FAIL_JOB,
    NOT_IGNORING_DISRUPTION,
    RESUME_RULE,
    SIGNALS_USUALLY,
    fails_on_disruption,
    otherwise_if_exits,
    resumes_unless,
    together_with,
)

# What cellfit's filter says, inside kube-scheduler's FailedScheduling message.
KEPT_FOR = re.compile(r"its free resources are kept for (?P<held>[^,]+),")
QUOTA = re.compile(r"virtual cluster '(?P<vc>[^']+)' quota exhausted at level '(?P<level>[^']+)'")
GANG = re.compile(r"gang (?P<gang>[^\s:]+/[^\s:]+)[: ]")
# HiveD's reason for a gang its VC cannot hold even empty (scheduler/cells/gangs.py): no wait ends it.
GANG_NEVER = re.compile(r"gang \S+ needs \d+ pods x \d+ GPUs but virtual cluster '[^']+' can hold at most \d+ such pods? even when idle")
ESTIMATOR_FAILED = ("InvalidSpec", "SamplingFailed", "NeverRuns")  # NeverRuns: no node could ever run any configuration
CPU = "cpu"  # the kind AlloX's Placed condition names ("running on cpu: ...", placer/controller.py)
# AlloX's Placed condition as its start writes it ("running on cpu: <why>"), and its Placed Event
# ("started on cpu: <why>"); a resume writes the condition again without the reason (placer/controller.py).
STARTED, RUNNING_ON, STARTED_ON = "Started", "running on ", "started on "
NOT_ALLOX_REASONS = ("resumed after a preemption", "its pods are bound again")
# The estimator's word on an interchangeable Job its user started (estimator/controller.py):
# its NotEstimated Event, its view's state.
NOT_ESTIMATED, UNSUSPENDED = "NotEstimated", "unsuspended"
# AlloX's Placed=Queued condition (placer/controller.py): the Job's place and its expected start
# as a time; an older cellfit wrote the wait from when it wrote it ("expected start in ~12 min").
QUEUED_AT = re.compile(r"(?P<place>.+), expected start at (?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) \(AlloX\)")
QUEUED_IN = re.compile(r"(?P<place>.+), expected start in ~(?P<amount>\d+(?:\.\d+)?) (?P<unit>s|min|h) \(AlloX\)")
_UNIT_SECONDS = {"s": 1.0, "min": 60.0, "h": 3600.0}
# What a waiting Job's Placed condition says after why it waits of the kinds AlloX refuses it in
# ("...; not on cpu: <why>", placer/controller.py _refusal_note): told with its place.
REFUSED_NOTE = re.compile(r"; not on [a-z0-9.-]+(?: or [a-z0-9.-]+)*: ")
# The Job controller's FailedCreate Event: "Error creating: <the API server's refusal>".
FAILED_CREATE_PREFIX = "Error creating: "
# client-go's event correlator, past ten Events of one reason with differing messages in ten
# minutes (a quota's refusal names each generated pod): one Event, its message after this.
COMBINED_PREFIX = "(combined from similar events): "


@dataclass(frozen=True, kw_only=True)
class NeverPlaceable:
    """A reason of cellfit's filter that no wait ends: the pod as written can never be placed
    (its virtual cluster, cell type, GPU count or gang is one the configuration can never hold,
    or a cellfit label or annotation does not read). ``reason``: the whole reason, as the filter
    words it (scheduler/cells/planning.py, gangs.py, engine.py, request.py); ``change``: what
    the user changes, said after it (``{group}``: what the reason's named group matched)."""

    reason: re.Pattern[str]
    change: str


NEVER = "never-placeable"  # the answer's reason for them
NEVER_HEAD = "can never be placed as written"  # how their answer says so
_VC = "label cellfit.io/virtual-cluster"
_CELL_TYPE = "annotation cellfit.io/cell-type"
_KEY = r"(?:label|annotation) cellfit\.io/[\w.-]+"  # a field as the request parser names it
# (reason, change): the filter's wording of each, and what its user changes.
_NEVER_PLACEABLE_WORDING: tuple[tuple[str, str], ...] = (
    (r"the pod has no cellfit\.io/virtual-cluster label: set it to one of .+", f"set {_VC} in the Job's pod template"),
    (r"unknown virtual cluster '[^']*' \(known: .*\)", f"set {_VC} to a virtual cluster it may use, one of those known"),
    (r"virtual cluster '[^']*' owns no cell of type '[^']*' or larger",
     f"name in {_CELL_TYPE} a cell type its virtual cluster owns, or set {_VC} to one that owns it"),
    (r"the pod requests \d+ GPUs, more than any cell virtual cluster '[^']*' owns \(.*\)",
     f"ask for fewer GPUs a pod, or set {_VC} to a virtual cluster with larger cells"),
    (r"the pod requests \d+ GPUs, more than any node-level cell holds \(.*\)",
     "ask for fewer GPUs a pod: no node of the cluster has that many"),
    (r"the pod requests \d+ GPUs but a '[^']*' cell holds \d+", f"ask for fewer GPUs a pod, or name a larger cell type in {_CELL_TYPE}"),
    (r"unknown cell type '[^']*' in annotation cellfit\.io/cell-type \(known: .*\)", f"set {_CELL_TYPE} to a known cell type"),
    (r"cell type '[^']*' is above the node level; .*", f"name a cell type at or below the node level in {_CELL_TYPE}"),
    (GANG_NEVER.pattern, "make cellfit.io/gang-size or the GPUs each pod asks for smaller, or its VC's quota larger"),
    # The filter's own advice, "(set it to 2)", is said once: within the change (group ``said``).
    (r"gang \S+: annotation cellfit\.io/gang-size is \d+ but the Job runs at most .*?(?P<said> \(set it to (?P<size>\d+)\))",
     "set cellfit.io/gang-size to {size}, the pods the Job runs at once, or run more at once"),
    (r"gang \S+: annotation cellfit\.io/gang-size is \d+ but the Job runs at most .*",
     "set cellfit.io/gang-size to the pods the Job runs at once, or run more at once"),
    (r"pods of gang \S+ request different GPU counts \(\d+ and \d+\)", "give every pod of the gang the same GPU count"),
    # Several mistakes, each "field: problem", joined by "; " (request.py's InvalidAnnotations).
    (rf"{_KEY}: [^;]+(?:; {_KEY}: [^;]+)+", "give each of {keys} a value it takes"),
    (r"(?P<key>(?:label|annotation) cellfit\.io/[\w.-]+): .+", "give {key} a value it takes"),
)
NEVER_PLACEABLE: Final = tuple(NeverPlaceable(reason=re.compile(reason), change=change) for reason, change in _NEVER_PLACEABLE_WORDING)


@dataclass(frozen=True, kw_only=True)
class Answer:
    """``reason``: a stable tag for scripts (``quota``, ``gang``, ``resume-hold``, ...);
    ``summary``: the one line; ``details``: the facts behind it, one per line."""

    reason: str
    summary: str
    details: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "summary": self.summary, "details": list(self.details)}


def explain(facts: Facts) -> Answer:
    answer = _explain(facts)
    return replace(answer, details=answer.details + facts.notes) if facts.notes else answer


def _explain(facts: Facts) -> Answer:
    if facts.gone is not None:
        return explain_gone(facts.gone)
    if facts.pod is not None:
        answer = explain_pod(facts.pod, facts.cellfit)
        if facts.job is not None and answer.reason in ("pending", "running"):
            # A pod of a preempted Job, or of one AlloX put on CPUs: that is the news, the
            # pod's state the detail.
            preempted = _preempted(facts.job, answer)
            if preempted is not None:
                return preempted
            if facts.job.placement == "cpu":
                return _on_cpu(facts.job, answer)
            return _without_estimate(facts.job, facts.cellfit, answer)
        return answer
    if facts.job is not None:
        return explain_job(facts.job, facts.cellfit, now=facts.now)
    raise ValueError("facts name neither a pod nor a Job")


def explain_gone(gone: GoneFacts) -> Answer:
    """A deleted pod or Job: its preemption when an event says so, else its last event."""
    details = tuple(line for e in gone.events for line in _seen(e))
    found = gone.preemption
    if found is not None:
        return Answer(reason="preempted", summary=f"deleted: {_preempted_by(found)}", details=details + _unread(found))
    last = gone.events[-1]
    return Answer(reason="deleted", summary=f"deleted; its last event: {last.reason}: {last.message}", details=details)


# ------------------------------------------------------------------------------ Jobs


def explain_job(job: JobFacts, view: CellfitView, *, now: float | None = None) -> Answer:
    """``now``: when the facts were read, which a queued Job's expected start is said from."""
    return _run_as_written(job, _without_estimate(job, view, _job_answer(job, view, now=now)))


def _job_answer(job: JobFacts, view: CellfitView, *, now: float | None) -> Answer:
    finished = _finished(job)
    if finished is not None:
        return finished
    if job.interchangeable and job.suspended:
        return _deciding(job, view, now=now)
    if job.suspended:
        return _suspended(job)
    gang = _gang_of_job(job, view)
    pods_now = _job_pods_now(job, view, now=now) if gang is None else gang
    if _never_placed(pods_now):
        return _never_first(job, pods_now)
    preempted = _preempted(job, pods_now)
    if preempted is not None:
        return preempted
    if job.placement == "cpu":
        return _on_cpu(job, pods_now)
    return pods_now


def _suspended(job: JobFacts) -> Answer:
    """A suspended Job cellfit does not start: one without cellfit.io/configurations, or (what its
    user meant to write) one with it on its pod template, where cellfit never reads it."""
    head = "suspended (spec.suspend: true): nothing runs until it is unsuspended; "
    if not job.template_job_keys:
        return Answer(reason="suspended", summary=head + "cellfit starts only Jobs with cellfit.io/configurations")
    misplaced = f"{_on_template(job)}: move {_them(job)} to metadata.annotations"
    if ANNOTATION_CONFIGURATIONS in job.template_job_keys:
        return Answer(reason="suspended", summary=head + misplaced)
    return Answer(reason="suspended", summary=head + "cellfit starts only Jobs with cellfit.io/configurations; " + misplaced)


def _run_as_written(job: JobFacts, answer: Answer) -> Answer:
    """An unsuspended Job with cellfit's Job-level annotations on its pod template only: its user
    meant an interchangeable Job, which cellfit never saw (it reads them from the Job), so the Job
    runs as its template says; said after the answer (what its pods do, or how it ended), with
    what to write instead."""
    if job.suspended or job.interchangeable or not job.template_job_keys:
        return answer
    missing = "" if ANNOTATION_CONFIGURATIONS in job.template_job_keys else f", and it has no {ANNOTATION_CONFIGURATIONS}"
    with_them = _them(job) if not missing else f"{ANNOTATION_CONFIGURATIONS} and {_them(job)}"
    note = (f"not an interchangeable Job: {_on_template(job)}{missing}, so cellfit treats it as an ordinary Job, run "
            "as its template says, never estimated nor placed by AlloX; for cellfit to choose its configuration, create "
            f"it again with {with_them} in metadata.annotations and spec.suspend: true")
    return replace(answer, summary=f"{answer.summary}; {note}")


def _on_template(job: JobFacts) -> str:
    """``its cellfit.io/configurations is on its pod template (...), where cellfit does not read it``."""
    one = len(job.template_job_keys) == 1
    return (f"its {' and '.join(job.template_job_keys)} {'is' if one else 'are'} on its pod template "
            f"(spec.template.metadata.annotations), where cellfit does not read {_them(job)}")


def _them(job: JobFacts) -> str:
    return "it" if len(job.template_job_keys) == 1 else "them"


def _finished(job: JobFacts) -> Answer | None:
    for kind, reason in (("Complete", "complete"), ("Failed", "failed")):
        found = job.condition(kind)
        if found is not None and found.status == "True":
            said = f": {found.message}" if found.message else (f" ({found.reason})" if found.reason else "")
            answer = Answer(reason=reason, summary=f"{'completed' if kind == 'Complete' else 'failed'}{said}",
                            details=_ran(job))
            return _failed_preempted(job, found, answer) if kind == "Failed" else answer
    return None


def _ran(job: JobFacts) -> tuple[str, ...]:
    """AlloX's Placed condition of a finished Job: where it ran, and why there."""
    placed = job.condition("Placed")
    return (f"Placed: {placed.message}",) if placed is not None and placed.status == "True" and placed.message else ()


# The Job controller's reasons for failing a Job on its count of failed pods (a preempted pod
# counts unless the podFailurePolicy ignores it), and the rule that makes it resume instead.
COUNTED_FAILURES: Final = ("BackoffLimitExceeded", "FailedIndexes", "MaxFailedIndexesExceeded")
# Its reasons for failing a Job whose podFailurePolicy's rule on DisruptionTarget fails the Job
# (FailJob) or the preempted pod's index (FailIndex; the Job fails once its indexes are done).
FAILED_AT_ONCE: Final = {FAIL_JOB: ("PodFailurePolicy",), FAIL_INDEX: ("FailedIndexes", "MaxFailedIndexesExceeded")}


def _failed_preempted(job: JobFacts, failed: Condition, answer: Answer) -> Answer:
    """A failed Job cellfit preempted: its preempted pods were failures to the Job controller
    unless its podFailurePolicy ignores DisruptionTarget (counted against its backoffLimit, or,
    under a FailJob or FailIndex rule, failing the Job or the index at once); told so, and the
    rule that makes the next one resume (user21's ij-4: "failed: Job has reached the specified
    backoff limit" and nothing else, its preemption the cause)."""
    if not job.preemption_count and not job.preemptions:
        return answer
    lines = tuple(_preemption_line(p) for p in job.preemptions) + _preemptions_counted(job)
    counted, pods = _how_often(job)
    action = job.disruption_action
    on_exit_code = _exit_code_cause(job, failed)
    fix_rule: str | None = None
    if on_exit_code is not None:
        caused = True
        cause, at = on_exit_code
        fix_rule = f"{RESUME_RULE} before its spec.podFailurePolicy's rule {at + 1}, on exit codes"
    elif action in FAILED_AT_ONCE:
        # A FailJob rule on exit codes fails the Job with the same reason: its message names the condition or the code.
        caused = failed.reason in FAILED_AT_ONCE[action] and (action != FAIL_JOB or DISRUPTION_TARGET in failed.message)
        failed_what = "the Job" if action == FAIL_JOB else "each preempted pod's index"
        cause = f"Kubernetes failed {failed_what}, as {fails_on_disruption(action)}"
    else:
        caused = not job.ignores_disruption and failed.reason in COUNTED_FAILURES
        limit, count = job.backoff_limit
        cause = f"Kubernetes counted each preempted pod as a failed one against its {limit} {count}, as {NOT_IGNORING_DISRUPTION}"
        if limit == "backoffLimit" and job.failed > count:  # its own failures among them: the user sees the share
            cause += f": {job.failed} failed pod{'s' if job.failed != 1 else ''} in all, over the limit"
    if not caused:
        # Not counted (its policy ignores them), or a failure not on the count: the preemptions are facts, not the cause.
        return replace(answer, details=answer.details + (f"preempted {counted}{f' ({pods})' if pods else ''} by cellfit",) + lines)
    last = job.preemptions[-1] if job.preemptions else None
    said = [pods] if pods else []
    said += [f"last by {last.by}"] if last is not None else []
    by = f" ({'; '.join(said)})" if said else ""
    summary = f"{answer.summary}: cellfit preempted it {counted}{by}, and {cause}"
    rule = fix_rule or (f"spec.podFailurePolicy: {{rules: [{RESUME_RULE}]}}" if action is None
                        else f"{RESUME_RULE} as its spec.podFailurePolicy's rule on {DISRUPTION_TARGET}")
    fix = (f"to have it resume after a preemption instead (its next pod goes first among best-effort pods), create it "
           f"again with {rule} (a Job's podFailurePolicy cannot be changed)")
    return Answer(reason="failed", summary=summary, details=(fix,) + lines + answer.details)


# The Job controller's Failed condition where a FailJob rule on exit codes matched a failed pod
# (pkg/controller/job/pod_failure_policy.go matchPodFailurePolicy).
FAILED_ON_EXIT_CODE: Final = re.compile(
    r"^Container \S+ for pod (?P<pod>\S+/\S+) failed with exit code (?P<code>\d+) matching FailJob rule at index (?P<at>\d+)")


def _exit_code_cause(job: JobFacts, failed: Condition) -> tuple[str, int] | None:
    """Why a failed Job's preemptions failed it where a rule of its podFailurePolicy on exit
    codes, before its rule on DisruptionTarget, took a preempted pod (the first rule that matches
    applies, exit codes and conditions alike; the victims' Events said so), and that rule's
    index: a FailJob rule whose match on a pod cellfit preempted the Failed condition names, or,
    where the rule on DisruptionTarget ignores preempted pods, a Count rule that counts the exit
    code a stopped process usually has (which of the pods exited so no record tells: "may").
    None where no such rule took one."""
    rules = job.disruption_exit_codes
    matched = FAILED_ON_EXIT_CODE.match(failed.message) if failed.reason in FAILED_AT_ONCE[FAIL_JOB] else None
    if matched is not None and any(at == int(matched["at"]) for at, _, _ in rules) and any(
            p.victim == matched["pod"] for p in job.preemptions):
        before = f" before its {job.disruption_action} rule on {DISRUPTION_TARGET} is reached" if job.disruption_action else ""
        return (f"Kubernetes failed the Job, as its spec.podFailurePolicy's rule {int(matched['at']) + 1} fails the Job on exit "
                f"code {matched['code']}, which its preempted pod {matched['pod']} exited with{before}: {SIGNALS_USUALLY}",
                int(matched["at"]))
    counting = [rule for rule in rules if rule[1] == COUNT]
    if job.ignores_disruption and counting and failed.reason in COUNTED_FAILURES:
        return f"a preempted pod may have counted against it: {resumes_unless(tuple(counting), job.backoff_limit)}", counting[0][0]
    return None


def _deciding(job: JobFacts, view: CellfitView, *, now: float | None) -> Answer:
    """A suspended interchangeable Job: cellfit estimates it (unless its user did), then AlloX
    starts it. AlloX's queue and its Placed condition speak first: AlloX holds only Jobs with an
    estimate, whoever wrote it."""
    estimated = job.condition("Estimated")
    if estimated is not None and estimated.status == "False" and estimated.reason in ESTIMATOR_FAILED:
        return Answer(reason="not-estimated", summary=f"not estimated ({estimated.reason}): {estimated.message}",
                      details=_estimator_details(view))
    unread = estimate_errors(json.dumps(job.estimate)) if job.estimate is not None else []
    if unread:  # its user's estimate, which AlloX never admits (the estimator, when running, says InvalidSpec)
        return Answer(reason="not-estimated", summary="not estimated: its own cellfit.io/estimate does not read, so nothing is "
                      f"sampled or started until it is corrected: {'; '.join(map(str, unread))}")
    placed = job.condition("Placed")
    entry = view.allox_entry
    details = _estimate_details(job.estimate)
    if entry is not None:
        kind, position = entry.get("kind", "?"), int(entry.get("position", 0))
        when = expected_start(float(entry.get("expectedStartSeconds", 0.0)))
        together = together_with(position, int(entry.get("startsWith", position)))
        starting = f", starting together with {together}" if together else ""
        return Answer(reason="allox-queue",
                      summary=f"queued by AlloX: {ordinal(position)} on {kind}{starting}, expected start in {when}"
                              f"{_refusal_note(placed)}",
                      details=details + ((f"Placed: {placed.message}",) if placed is not None and placed.message else ()))
    if placed is not None and placed.status == "False" and placed.reason == "Refused":
        # Its pods would run outside AlloX's nodes: AlloX starts it in no kind until its user
        # changes it, and kubectl cellfit queue does not list it.
        return Answer(reason="allox-refused", summary=f"not started by AlloX (Refused): {placed.message}", details=details)
    if placed is not None and placed.status == "False" and placed.reason == "NoMachine" and _never_fits(placed.message):
        return Answer(reason="cannot-run", summary=f"cannot run as configured (AlloX's NoMachine): {placed.message}; "
                      f"change its {ANNOTATION_CONFIGURATIONS}", details=details)
    if placed is not None and placed.status == "False":
        queued = _queued_from_condition(placed, now=now)
        if queued is not None:
            return Answer(reason="allox-queue", summary=f"queued by AlloX: {queued}{_refusal_note(placed)}",
                          details=details + (f"Placed: {placed.message}",))
        return Answer(reason="allox-queue", summary=f"queued by AlloX ({placed.reason}): {placed.message}", details=details)
    has_estimate = (job.estimate is not None or (estimated is not None and estimated.status == "True")
                    or (view.estimator_entry or {}).get("state") in ("estimated", "user-estimate"))
    if not has_estimate:
        return _estimating(job, view, estimated)
    if "allox" in view.unavailable:
        return Answer(reason="allox-off", summary=f"estimated, but not started: {view.unavailable['allox']}", details=details)
    return Answer(reason="allox-queue", summary="estimated; waiting for AlloX's next decision", details=details)


# How AlloX's NoMachine condition (placer/controller.py _no_machine) lists the Job's kinds no node
# holds, each ending NEVER_FITS where no node ever holds one pod of it.
NO_MACHINE_HEAD: Final = "cannot start this Job: "
NEVER_FITS: Final = ": it never fits"


def _never_fits(message: str) -> bool:
    """Whether AlloX's NoMachine ``message`` says no kind of the Job ever fits (user26 #5): each
    kind it lists never fits, and none is left that may (free room later, a kind no node offers
    now)."""
    _, head, kinds = message.partition(NO_MACHINE_HEAD)
    return bool(head) and all(kind.endswith(NEVER_FITS) for kind in kinds.split("; "))


def _queued_from_condition(placed: Condition, *, now: float | None) -> str | None:
    """``2nd on gpu, expected start in ~12 min`` from AlloX's Queued condition, the wait said
    from ``now``; None for another condition, or one whose time does not read."""
    if placed.reason != "Queued" or now is None:
        return None
    found = _queued_start(placed)
    if found is None:
        return None
    place, starts_at = found
    wait = starts_at - now
    return f"{place}, expected start " + (f"in ~{duration(wait)}" if wait >= 0 else f"~{duration(-wait)} ago")


def _queued_start(placed: Condition) -> tuple[str, float] | None:
    """The place and the expected start (seconds since the epoch) a Queued condition says: its
    time, or (an older cellfit's wording) the wait it said added to when it said it."""
    message = _without_refusal_note(placed.message)
    at = QUEUED_AT.fullmatch(message)
    if at is not None:
        starts_at = timestamp(at["at"])
        return None if starts_at is None else (at["place"], starts_at)
    wait = QUEUED_IN.fullmatch(message)
    said = timestamp(placed.since)
    if wait is None or said is None:
        return None
    return wait["place"], said + float(wait["amount"]) * _UNIT_SECONDS[wait["unit"]]


def _refusal_note(placed: Condition | None) -> str:
    """``; not on cpu: <why>`` of a waiting Job's Placed condition ("" for none): AlloX's queue
    entry gives its place, the condition alone the kinds it is refused in."""
    if placed is None or placed.status != "False" or not placed.message:
        return ""
    found = REFUSED_NOTE.search(placed.message)
    return placed.message[found.start():] if found is not None else ""


def _without_refusal_note(message: str) -> str:
    found = REFUSED_NOTE.search(message)
    return message[:found.start()] if found is not None else message


def _estimating(job: JobFacts, view: CellfitView, estimated: Condition | None) -> Answer:
    entry = view.estimator_entry
    if entry is None:
        why = view.unavailable.get("estimates")
        if why is not None:
            return Answer(reason="not-estimated", summary=f"suspended, waiting for an estimate, but {why}")
        said = f": {estimated.message}" if estimated is not None and estimated.message else ""
        return _sampling_kept_off(job, view, Answer(reason="estimating", summary=f"waiting for cellfit's estimator{said}"))
    samples = [s for s in entry.get("samples") or [] if isinstance(s, Mapping)]
    done = sum(1 for s in samples if s.get("state") in ("succeeded", "stopped"))
    running = [_sample(s) for s in samples if s.get("state") not in ("succeeded", "stopped", "failed", "pending")]
    pending = [_sample(s) for s in samples if s.get("state") == "pending"]  # not yet placed: no run under way
    failed = [_sample(s) for s in samples if s.get("state") == "failed"]
    state = str(entry.get("state", "sampling"))
    if state == "waiting-for-capacity":
        head = "estimating: waiting for room for its sampling pods (estimator.maxClusterShare)"
    else:
        head = f"estimating: {done} of {len(samples)} samples done" if samples else "estimating: no sample started yet"
    tail = f"; running {', '.join(running)}" if running else ""
    tail += f"; pending {', '.join(pending)}" if pending else ""
    tail += f"; failed {', '.join(failed)}" if failed else ""
    message = str(entry.get("message") or "")
    return _sampling_kept_off(job, view, Answer(reason="estimating", summary=head + tail,
                                                details=((message,) if message else ()) + _never_sampled(job, samples)
                                                + _estimator_details(view)))


def _never_sampled(job: JobFacts, samples: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The configurations the estimator will not sample while it samples the others (no node could
    ever run them), from their ConfigurationNeverRuns Events: the samples alone read "0 of 1
    samples done", as if the Job had one configuration. An Event whose configurations are all
    sampled now is left out: it stays an hour, and a node that runs them may have joined since."""
    sampled = {str(s.get("configuration")) for s in samples}
    said = dict.fromkeys(e.message for e in job.events if e.reason == "ConfigurationNeverRuns")
    return tuple(message for message in said if not _named_never_sampled(message) <= sampled)


def _named_never_sampled(message: str) -> frozenset[str]:
    """The configurations a ConfigurationNeverRuns Event names; where it does not read so, the
    message itself, which no sample names (so it is told as it is)."""
    lead = _NEVER_SAMPLED.match(message)
    return frozenset(lead.group(1).split(" and ")) if lead is not None else frozenset({message})


# The lead of a ConfigurationNeverRuns Event (estimator/controller.py): "cpu is not sampled: ...",
# "big and cpu are not sampled: ...".
_NEVER_SAMPLED: Final = re.compile(r"(.+?) (?:is|are) not sampled: ")


def _sampling_kept_off(job: JobFacts, view: CellfitView, answer: Answer) -> Answer:
    """``answer`` led by a sampling pod of the Job that waits for its VC's cells opportunistic
    pods hold, which cellfit does not reclaim for it (:func:`_not_reclaimed`): what the estimator
    waits for, which the sample's row tells only as kube-scheduler's "Insufficient nvidia.com/gpu"."""
    for pod in job.sampling_pods:
        waiting = explain_pod(pod, view)
        if waiting.summary.startswith(NOT_RECLAIMED_LEAD):
            rest = answer.summary.removeprefix("estimating: ")
            return replace(answer, summary=f"estimating: its sampling pod {pod.name} {waiting.summary.removeprefix('pending: ')}; {rest}",
                           details=waiting.details + answer.details)
    return answer


def _sample(row: Mapping[str, Any]) -> str:
    """``cpu short (pod: failure)``: the estimator's sample row (configuration, length short or long);
    a pending sample's ``reason``, the scheduler's, in place of a failure."""
    length = f" {row['length']}" if row.get("length") else ""
    said = row.get("failure") or row.get("reason")
    failure = f": {said}" if said else ""
    return f"{row.get('configuration', '?')}{length} ({row.get('pod', '?')}{failure})"


def _estimator_details(view: CellfitView) -> tuple[str, ...]:
    entry = view.estimator_entry or {}
    return tuple(f"sample {_sample(s)}: {s.get('state')}" for s in entry.get("samples") or [] if isinstance(s, Mapping))


def _estimate_details(estimate: Mapping[str, Any] | None) -> tuple[str, ...]:
    rows = []
    for kind in ("cpu", "gpu"):
        entry = (estimate or {}).get(kind)
        if isinstance(entry, Mapping) and isinstance(entry.get("seconds"), (int, float)):
            spread = entry.get("uncertaintySeconds")
            plus = f" ± {duration(float(spread))}" if isinstance(spread, (int, float)) and spread > 0 else ""
            method = f" ({entry['method']})" if entry.get("method") else ""
            rows.append(f"estimate {kind}: {duration(float(entry['seconds']))}{plus}{method}")
    return tuple(rows)


def _on_cpu(job: JobFacts, now: Answer) -> Answer:
    """AlloX's reason for CPU after "on CPU instead of GPU", without its own "running on cpu: "
    (the placer's condition says the kind first; the summary has just said it). A Placed
    condition that a later one wrote over (its pods elsewhere or never bound, preempted) is a
    fact of its own, in the details: AlloX's reason is then its Placed Event's (live session M6:
    "on CPU instead of GPU: its pods run on nodes outside AlloX's" where the Event said "no GPU of
    virtual cluster 'vc-a' was free...")."""
    placed = job.condition("Placed")
    started = placed is not None and placed.reason == STARTED
    said = placed.message.removeprefix(f"{RUNNING_ON}{CPU}").removeprefix(": ") if placed is not None and started else ""
    if said in NOT_ALLOX_REASONS:
        said = ""
    told = [e for e in job.events if e.reason == "Placed" and e.message.startswith(f"{STARTED_ON}{CPU}: ")]
    why = said or (told[-1].message.removeprefix(f"{STARTED_ON}{CPU}: ") if told else "") or "AlloX chose cpu"
    later = (f"Placed ({placed.reason}): {placed.message}",) if placed is not None and not started and placed.message else ()
    estimates = _estimate_details(job.estimate)
    return Answer(reason="cpu-instead-of-gpu", summary=f"on CPU instead of GPU: {why}",
                  details=estimates + later + (f"now: {now.summary}",))


def _without_estimate(job: JobFacts, view: CellfitView, answer: Answer) -> Answer:
    """An interchangeable Job its user started (created without spec.suspend: true, or
    unsuspended before its sampling ended): the estimator's word on it, that it runs unestimated
    and AlloX does not choose its kind, after what its pods do (live session M5: "running: 1 pod
    on ax-gpu-0" and nothing else). From the estimator's view, else its NotEstimated Event."""
    if not job.interchangeable or job.suspended or answer.reason in ("complete", "failed"):
        return answer
    entry = view.estimator_entry
    event = _last(job.events, NOT_ESTIMATED)
    if entry is not None:  # the live view decides
        said = str(entry.get("message") or "") if entry.get("state") == UNSUSPENDED else ""
    else:
        said = event.message if event is not None else ""
    if not said:
        return answer
    return replace(answer, summary=f"{answer.summary}; {said}", details=answer.details + (_seen(event) if event is not None else ()))


def _never_first(job: JobFacts, never: Answer) -> Answer:
    """A Job whose pod cellfit can never place as written: that first, as no wait ends it (README,
    the ``why`` row), and its earlier preemptions and its kind after it, as facts."""
    lesser = ("on CPU instead of GPU (AlloX's choice)",) if job.placement == "cpu" else ()
    preempted = _preemption_facts(job)
    return replace(never, details=never.details + lesser + (() if preempted is None else (preempted[0], *preempted[1])))


def _never_placed(answer: Answer) -> bool:
    """Whether ``answer`` says a pod (or its gang) can never be placed as written (:func:`_never`)."""
    return answer.reason in (NEVER, "gang") and NEVER_HEAD in answer.summary


def _preempted(job: JobFacts, now: Answer) -> Answer | None:
    found = _preemption_facts(job)
    if found is None:
        return None
    head, lines = found
    return Answer(reason="preempted", summary=f"{head}; now {now.summary}", details=lines + (f"now: {now.summary}",) + now.details)


def _preemption_facts(job: JobFacts) -> tuple[str, tuple[str, ...]] | None:
    """``preempted 1 time, last by ns/pod on node N (score ...)`` and the lines behind it: each
    preemption, what its cellfit.io/preemptions counts, its failed pods so far; None when the
    Job was never preempted."""
    if not job.preemptions and job.preemption_count == 0:
        return None
    counted, pods = _how_often(job)
    head = f"preempted {counted}" + (f" ({pods})" if pods else "")
    last = job.preemptions[-1] if job.preemptions else None
    if last is not None:
        head += f", last by {last.by}"
        if last.node is not None:
            head += f" on node {last.node}"
        if last.breakdown is not None:
            head += f" ({last.breakdown})"
    return head, tuple(_preemption_line(p) for p in job.preemptions) + _preemptions_counted(job) + _counted_failures(job)


def _how_often(job: JobFacts) -> tuple[str, str]:
    """(``1 time``, ``2 pods``): the preemption decisions that took pods of the Job (one FitGpp
    decision may take several: its fallback), as its cellfit.io/preemptions counts them, or as
    many as its pods' Preempted Events tell apart (by preemptor and node) where that says more;
    and its pods preempted where they are more ("" else). Live, one decision taking two pods
    read "preempted 2 times" beside a cellfit.io/preemptions of 1."""
    decisions = max(job.preemption_count, len({(p.by, p.node) for p in job.preemptions}))
    pods = len(job.preemptions)
    return times(decisions), f"{pods} pods" if pods > decisions else ""


def _preemptions_counted(job: JobFacts) -> tuple[str, ...]:
    """What preemption.maxPreemptions counts: the Job's cellfit.io/preemptions, its decisions, not its pods."""
    if not job.preemption_count:
        return ()
    return (f"its {ANNOTATION_PREEMPTIONS} is {job.preemption_count}: FitGpp's decisions that preempted it, which "
            "preemption.maxPreemptions limits (a decision taking several of its pods counts once)",)


def _counted_failures(job: JobFacts) -> tuple[str, ...]:
    """A preempted Job whose podFailurePolicy does not ignore DisruptionTarget: each preempted pod
    was a failed one to it, and how many more it tolerates (``status.failed`` against its
    backoffLimit), as each victim's Event told it then. Under a FailJob or FailIndex rule a
    preempted pod fails the Job, or its index (the failed Job's answer says so), unless a rule on
    exit codes before it took the pod. A rule on exit codes before the rule on DisruptionTarget
    that takes a preempted pod exiting as a stopped process usually does (137, 143) is told as the
    victims' Events tell it, the Ignore, FailJob and FailIndex rules' Jobs included."""
    rules, limits = job.disruption_exit_codes, job.backoff_limit
    if job.ignores_disruption:
        # Unless a rule on exit codes takes it first (137 after SIGKILL, 143 after SIGTERM), as its Event said.
        if not rules:
            return ()
        counts = any(action == COUNT for _, action, _ in rules)
        return (f"each preempted pod: {resumes_unless(rules, limits)}" + (_so_far(job) if counts else ""),)
    if job.disruption_action in FAILED_AT_ONCE:
        failing = "the Job" if job.disruption_action == FAIL_JOB else "its index"
        fails = f"each preempted pod fails {failing}, as {fails_on_disruption(job.disruption_action)}"
        said = otherwise_if_exits(fails, rules, job.disruption_action, limits)
        if said == fails:
            return ()  # no rule on exit codes takes a preempted pod first
        counts = any(action == COUNT for _, action, _ in rules)
        return (said + (_so_far(job) if counts else ""),)
    limit, count = limits
    counted = f"the Job counts each preempted pod as a failed one against its {limit} {count}, as {NOT_IGNORING_DISRUPTION}"
    return (otherwise_if_exits(counted + _so_far(job), rules, job.disruption_action, limits),)


def _so_far(job: JobFacts) -> str:
    """``: 1 failed pod so far of the 2 it tolerates``, and whether the next one fails the Job;
    "" for a ``backoffLimitPerIndex``, an index's count, which the Job's status does not hold."""
    limit, count = job.backoff_limit
    if limit != "backoffLimit":
        return ""
    last = ": the next one fails the Job" if job.failed >= count else ""
    return f": {job.failed or 'no'} failed pod{'s' if job.failed != 1 else ''} so far of the {count} it tolerates{last}"


def _preempted_by(found: Preemption) -> str:
    """``preempted by ns/pod on node N (score ...)``, as far as it is known."""
    where = f" on node {found.node}" if found.node else ""
    why = f" ({found.breakdown})" if found.breakdown else ""
    return f"preempted by {found.by}{where}{why}"


def _unread(found: Preemption) -> tuple[str, ...]:
    return (found.unread,) if found.unread else ()


def _preemption_line(found: Preemption) -> str:
    when = f" at {found.when}" if found.when else ""
    unread = f" ({found.unread})" if found.unread else ""
    return f"{found.victim} {_preempted_by(found)}{when}{unread}"


def _job_pods_now(job: JobFacts, view: CellfitView, *, now: float | None = None) -> Answer:
    active = [p for p in job.pods if not p.deleting and p.phase not in ("Succeeded", "Failed")]
    pending = [p for p in active if p.node is None]
    if pending:
        answer = explain_pod(pending[0], view)
        others = f" (and {len(pending) - 1} more pending pod{'s' if len(pending) > 2 else ''})" if len(pending) > 1 else ""
        return Answer(reason=answer.reason, summary=f"pod {pending[0].name}: {answer.summary}{others}", details=answer.details)
    if active:
        nodes = sorted({p.node for p in active if p.node})
        return Answer(reason="running", summary=f"running: {len(active)} pod{'s' if len(active) != 1 else ''} on "
                      f"{listed(nodes, noun='node')}")
    leaving = _leaving(job)
    if leaving is not None:
        return leaving
    refused = _pods_refused(job)
    if refused is not None:
        return refused
    backing_off = _backing_off(job, now=now)
    if backing_off is not None:
        return backing_off
    return Answer(reason="pending", summary="no pod yet: the Job controller has not created one (or all have ended)")


# The Job controller's wait before a pod after failed ones (pkg/controller/job/backoff_utils.go):
# 10 s after the first, doubled per failed pod since the last success, at most 10 min
# (DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff; the Job documentation says six minutes).
JOB_BACKOFF_FIRST_SECONDS: Final = 10.0
JOB_BACKOFF_MAX_SECONDS: Final = 600.0
JOB_BACKOFF: Final = "10 s after the first, doubled per failed pod since the last success, at most 10 min"


def _backing_off(job: JobFacts, *, now: float | None) -> Answer | None:
    """A Job with failed pods and none now (user25 #11: after 6 preemptions, no pod for ~7 min,
    told "no pod yet"): the Job controller's back-off. When its next pod comes is said only
    where the objects show it: no success since (which resets the count), and the last failure
    seen, a failed pod's finish or a preemption (a preempted pod fails once it has exited, so
    the next pod comes then at the earliest), and one count for the whole Job (no
    backoffLimitPerIndex). None for a Job without failed pods."""
    if job.failed == 0:
        return None
    plural = "s" if job.failed != 1 else ""
    said = (f"no pod: the Job controller waits before its next pod after {job.failed} failed pod{plural} (its back-off: "
            f"{JOB_BACKOFF})")
    seen = [moment(p.finished_at) for p in job.pods if p.phase == "Failed" and p.finished_at]
    seen += [moment(p.when) for p in job.preemptions if p.when]
    last = max(seen, default=None)
    # A per-index limit backs off each index on its own count, which the Job's status does not hold.
    if job.succeeded == 0 and job.backoff_limit[0] == "backoffLimit" and last is not None and last.year > 1:
        wait = min(JOB_BACKOFF_FIRST_SECONDS * 2 ** (job.failed - 1), JOB_BACKOFF_MAX_SECONDS)
        at = last + timedelta(seconds=wait)
        left = f" (in ~{duration(at.timestamp() - now)})" if now is not None and at.timestamp() > now else ""
        said += (f"; the last failure seen was at {_rfc3339(last)}: its next pod comes {duration(wait)} after, at {_rfc3339(at)} "
                 f"at the earliest{left}")
    if (job.preemptions or job.preemption_count) and not job.ignores_disruption:
        said += f"; its pods cellfit preempted count among the failed ones, as {NOT_IGNORING_DISRUPTION}"
    return Answer(reason="backoff", summary=said)


def _rfc3339(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _leaving(job: JobFacts) -> Answer | None:
    """A Job whose only pod left is exiting (deleted, in its grace period: a preempted one
    checkpoints there): the Job controller makes the next once it has exited. Not "no pod yet"."""
    leaving = [p for p in job.pods if p.deleting and p.phase not in ("Succeeded", "Failed")]
    if not leaving:
        return None
    pod = leaving[0]
    preempted = pod.preemption is not None or any(p.victim == pod.key for p in job.preemptions)
    how = "is exiting after its preemption (in its grace period)" if preempted else "is terminating (deleted, in its grace period)"
    others = f" (and {len(leaving) - 1} more exiting)" if len(leaving) > 1 else ""
    return Answer(reason="terminating", summary=f"pod {pod.name} {how}{others}; its next pod is made once it has exited")


def _pods_refused(job: JobFacts) -> Answer | None:
    """A Job with no pod because the API server refuses each it creates (an admission webhook's
    or policy's refusal, cellfit's pod-create webhook among them): the Job controller's last
    word on creating one was ``FailedCreate``, which says why."""
    said = [e for e in job.events if e.reason in ("FailedCreate", "SuccessfulCreate")]
    if not said or said[-1].reason != "FailedCreate":
        return None
    refusal = said[-1].message.removeprefix(COMBINED_PREFIX).removeprefix(FAILED_CREATE_PREFIX)
    return Answer(reason="pods-refused", summary=f"no pod: the API server refuses each pod the Job controller creates: {refusal}",
                  details=_seen(said[-1]))


# ------------------------------------------------------------------------------ gangs


def _gang_entry(view: CellfitView, gang: str) -> Mapping[str, Any] | None:
    for entry in (view.virtual_cluster or {}).get("gangs") or []:
        if isinstance(entry, Mapping) and entry.get("name") == gang:
            return entry
    return None


def _gang_of_job(job: JobFacts, view: CellfitView) -> Answer | None:
    """A gang whose slots wait for pods, or whose pods wait to be placed together. Pods whose
    gang-size does not read are no gang to cellfit (its filter refuses them for the annotation):
    their own answer names the mistake."""
    members = [p for p in job.pods if p.gang and p.gang_size and not p.deleting and p.phase not in ("Succeeded", "Failed")]
    if not members:
        return None
    pending = [p for p in members if p.node is None]
    if not pending:
        return None
    answer = explain_pod(pending[0], view)
    if answer.reason in ("gang", NEVER):  # a gang that can never be placed waits for nothing
        return answer
    entry = _gang_entry(view, job.key)
    size = int(entry["size"]) if entry is not None else (members[0].gang_size or len(members))
    placed = int(entry["podsPlaced"]) if entry is not None else sum(1 for p in members if p.node)
    waiting = ", ".join(p.name for p in pending[:MAX_NAMED]) + (f" and {len(pending) - MAX_NAMED} more" if len(pending) > MAX_NAMED else "")
    booked = "its other slots are booked" if entry is not None and placed > 0 else "nothing is booked yet"
    return Answer(reason="gang", summary=f"waiting for its gang {job.key}: {placed} of {size} pods placed, {booked}; "
                  f"waiting for {waiting}: {answer.summary}", details=answer.details)


# ------------------------------------------------------------------------------ pods


def explain_pod(pod: PodFacts, view: CellfitView) -> Answer:
    if pod.phase in ("Succeeded", "Failed"):
        return Answer(reason="complete" if pod.phase == "Succeeded" else "failed", summary=f"ended: phase {pod.phase}")
    if pod.deleting:
        preempted = tuple(f"{e.reason}: {e.message}" for e in pod.events if e.reason == "Preempted")
        if pod.preemption is not None:
            return Answer(reason="preempted", summary=f"terminating: {_preempted_by(pod.preemption)}",
                          details=preempted + _unread(pod.preemption))
        return Answer(reason="terminating", summary="terminating (deleted, in its grace period)", details=preempted)
    if pod.node is not None:
        return Answer(reason="running", summary=f"running on node {pod.node}" if pod.phase == "Running"
                      else f"bound to node {pod.node} ({pod.phase})")
    if pod.scheduling_gates:
        return Answer(reason="gated", summary=f"waiting for its scheduling gates to be removed: {', '.join(pod.scheduling_gates)} "
                      "(kube-scheduler does not try it before)")
    preempting = _preempting(pod)
    if preempting is not None:
        return preempting
    answer = _refused(pod, _pending(pod, view))
    if pod.nominated_node is None:
        return answer
    if answer.reason == "pending" and answer.summary.startswith("pending: "):
        # kube-scheduler nominates a pod it could not place to the node where it preempted for it.
        return replace(answer, reason="preempting", summary=f"nominated to node {pod.nominated_node} by kube-scheduler, which "
                       "preempted pods there for it: it is placed there once its victims have left (their grace period); "
                       f"its last attempt: {answer.summary.removeprefix('pending: ')}",
                       details=answer.details + (f"nominated to node {pod.nominated_node} by kube-scheduler",))
    return replace(answer, details=answer.details + (f"nominated to node {pod.nominated_node} by kube-scheduler",))


def _preempting(pod: PodFacts) -> Answer | None:
    """A pod FitGpp preempted for, nominated to the node while its victims leave: its last
    FailedScheduling is the attempt that preempted, the news is the preemption under way."""
    node = pod.nominated_node
    found = [(e, m) for e in pod.events if e.reason == "Preempting" and (m := PREEMPTING.match(e.message)) and m.group("node") == node]
    if node is None or not found:
        return None
    victims = sorted({m.group("victim") for _, m in found})
    failed = _last(pod.events, "FailedScheduling")
    # HiveD's reclaim of the pod's VC's cells writes the same Event (scheduler/preemption/reclaimed.py).
    reclaimed = all(m.group("why").startswith(RECLAIMING) for _, m in found)
    how = (f"HiveD reclaimed its virtual cluster's cells from {listed(victims, noun='opportunistic pod')}" if reclaimed
           else f"FitGpp preempted {listed(victims, noun='pod')}")
    return Answer(
        reason="preempting",
        summary=f"nominated to node {node}, where {how} for it: it is placed there once its victims have left (their grace period)",
        details=tuple(line for e, _ in found for line in _seen(e)) + (_seen(failed) if failed else ()),
    )


RECLAIMING = "reclaiming cells of virtual cluster "  # the why of a Preempting Event of HiveD's reclaim
NEVER_REFUSED = "cellfit cannot place this pod as written"  # the preempt verb's refusal of such a pod (extender/service.py)
NEVER_REFUSED_REASON = ", so it preempts no one for it: "  # before the mistake, in that refusal


def _refused(pod: PodFacts, answer: Answer) -> Answer:
    """``answer`` with cellfit's last refusal to preempt for the pod (its ``PreemptionRefused``
    Event, the preempt verb's reason: FitGpp's, HiveD's): kube-scheduler's FailedScheduling says
    why no node fits, the refusal why nothing was preempted to make one fit. A pod never
    placeable as written is told that already where kube-scheduler's last attempt asked
    cellfit's filter (the refusal says the same); where kube-scheduler's own filters turned
    every node away, cellfit's was never asked and only the refusal tells that the pod can
    never be placed as written. A refusal that no longer stands is not told
    (:func:`_refusal_stands`)."""
    refused = _last(pod.events, "PreemptionRefused")
    if refused is None or answer.reason == NEVER:
        return answer
    if refused.message.startswith(NEVER_REFUSED):
        mistake = refused.message.partition(NEVER_REFUSED_REASON)[2].strip().removesuffix(".")
        if not mistake or mistake in answer.summary:
            return answer
    if not _refusal_stands(refused, pod.events):
        return answer
    if answer.reason == "quota" and QUOTA.search(refused.message):
        return replace(answer, details=answer.details + _seen(refused))  # the answer says it already
    return replace(answer, summary=f"{answer.summary}; {refused.message}", details=answer.details + _seen(refused))


# The preemptor's Events that tell a preemption made for it: cellfit's FitGpp (Preempting),
# kube-scheduler's nomination to the node where it preempted.
PREEMPTED_FOR: Final = ("Preempting", "Nominated")
# How far past the refusal's whole second a FailedScheduling may be seen and still be the
# refusal's own attempt (:func:`_refusal_stands`): the second's resolution and a margin.
REFUSAL_SAME_ATTEMPT: Final = timedelta(seconds=2)


def _refusal_stands(refused: Event, events: Sequence[Event]) -> bool:
    """Whether the pod's last ``PreemptionRefused`` Event still answers why nothing is preempted
    for it. The preempt verb writes a refusal once per pod and reason, not on each retry, so its
    Event may be older than the attempt it explains; it stands unless a later Event shows the
    pod's story moved on since: a preemption for it (a Preempting or Nominated Event seen at or
    after the refusal: the latest preemption outcome is that one), or a failure to schedule other
    than its last one. That is, a FailedScheduling of another message seen at or after the
    refusal (the attempt the refusal came with) than the latest, or a latest FailedScheduling
    seen once only, after the refusal (one attempt, later than the refusal's, whose own
    FailedScheduling is another or gone). Where it cannot tell, it says nothing of the refusal."""
    since = moment(refused.last_seen)
    later = [e for e in events if moment(e.last_seen) >= since]
    if any(e.reason in PREEMPTED_FOR for e in later):
        return False
    latest = _last(events, "FailedScheduling")
    if latest is None:
        return True
    # The refusal's lastTimestamp is whole seconds (truncated), the FailedScheduling's eventTime
    # microseconds: the FailedScheduling of the refusal's own attempt follows the preempt call by
    # milliseconds yet reads later (08.670317Z after 08Z). kube-scheduler's next attempt comes at
    # least its initial backoff (1 s) after, so only one past the refusal's second, its
    # resolution, by more than a margin (REFUSAL_SAME_ATTEMPT) is an attempt of its own.
    if latest.count == 1 and moment(latest.last_seen) > since.replace(microsecond=0) + REFUSAL_SAME_ATTEMPT:
        return False
    return all(e.message == latest.message for e in later if e.reason == "FailedScheduling")


def _pending(pod: PodFacts, view: CellfitView) -> Answer:
    failed = _whole(_last(pod.events, "FailedScheduling"), pod.unschedulable)
    if failed is None:
        if pod.scheduler_name == "default-scheduler":
            return Answer(reason="not-cellfit", summary="not scheduled by cellfit: spec.schedulerName is default-scheduler")
        return Answer(reason="pending", summary=f"pending; {pod.scheduler_name} has not reported an attempt yet")
    message = failed.message
    never = _never_placeable(message) or _more_gpus_than_any_node(pod, message, view)
    if never is not None:
        return _never(pod, never, failed, view)
    not_reclaimed = _not_reclaimed(pod, failed, view)
    if not_reclaimed is not None:
        return not_reclaimed
    held = KEPT_FOR.search(message)
    if held is not None:
        return _resume_hold(pod, held.group("held"), failed, view)
    gang = GANG.search(message)
    if pod.gang and gang is not None:
        return _gang_pod(pod, gang.group("gang"), failed, view)
    quota = QUOTA.search(message) or _quota_refused(pod, failed)
    if quota is not None:
        return _with_unusable_cells(pod, view, _quota(pod, quota.group("vc"), quota.group("level"), failed, view))
    freeing = _freeing_cells(pod, failed, view)
    if freeing is not None:
        return freeing
    return _with_unusable_cells(pod, view, Answer(reason="pending", summary=f"pending: {_scheduler_sentence(message)}",
                                                  details=_seen(failed)))


def _quota_refused(pod: PodFacts, failed: Event) -> re.Match[str] | None:
    """The quota its standing preempt refusal names, for a pod kube-scheduler's own filter found
    too few GPUs for everywhere: cellfit's filter, which says "quota exhausted", was not asked,
    and the refusal is where cellfit says it (user26 #1). None else."""
    refused = _last(pod.events, "PreemptionRefused")
    if refused is None or INSUFFICIENT_GPU not in failed.message or not _refusal_stands(refused, pod.events):
        return None
    return QUOTA.search(refused.message)


def _freeing_cells(pod: PodFacts, failed: Event, view: CellfitView) -> Answer | None:
    """A guaranteed pod kube-scheduler found too few GPUs for everywhere while pods leaving one
    of its VC's cells free room for it there (the VC's inspect view, ``freeing``): HiveD's filter
    and preempt verb say it waits for that cell, but where kube-scheduler's own filter turned
    every node away (the leaving pod still counted) and its dry run found no victim, neither was
    asked (user26 #2). The first such cell of the VC's, told as HiveD tells it; None where there
    is none, or a standing preempt refusal says why already (the verb was asked)."""
    vc = view.virtual_cluster
    if (pod.priority != PRIORITY_GUARANTEED or pod.gpus <= 0 or INSUFFICIENT_GPU not in failed.message
            or vc is None or vc.get("name") != pod.vc):
        return None
    refused = _last(pod.events, "PreemptionRefused")
    if refused is not None and _refusal_stands(refused, pod.events):
        return None
    if any(placed.get("pod") == pod.key for placed in vc.get("placements") or []):
        return None  # cells are booked for it: it waits for them, not for a cell being freed
    for cell in vc.get("vcCells") or []:
        freeing = cell.get("freeing") or {}
        idle = int((cell.get("gpus") or {}).get("idle", 0))
        if cell.get("state") == "draining" or not freeing.get("gpus") or not idle < pod.gpus <= idle + int(freeing["gpus"]):
            continue
        nodes = [str(n) for n in cell.get("nodes") or [] if n]
        where = f" on node {nodes[0]}" if len(nodes) == 1 else (f" on nodes {', '.join(nodes)}" if nodes else "")
        return Answer(
            reason="freeing",
            summary=f"pending: HiveD waits for cell {cell.get('id')} of virtual cluster {pod.vc!r}{where}, which pods leaving free "
            f"({', '.join(freeing.get('pods') or [])}): no opportunistic pod is preempted for this pod while its virtual "
            "cluster's own cells are being freed; kube-scheduler places it there once they are gone; "
            f"kube-scheduler's last attempt: {_scheduler_sentence(failed.message)}",
            details=_seen(failed),
        )
    return None


# The leader's CellsNotReclaimed Event (scheduler/cluster/stranded.py): "<head><why>", and the
# why it gives a pod that asks kube-scheduler to preempt nobody.
NOT_RECLAIMED_HEAD: Final = "cellfit does not reclaim its virtual cluster's cells from the opportunistic pods on them for this pod: "
NEVER_PREEMPTS: Final = "its preemptionPolicy is Never"
NOT_RECLAIMED_LEAD: Final = "pending: waits for cells of virtual cluster "  # how :func:`_not_reclaimed`'s answer starts


def _not_reclaimed(pod: PodFacts, failed: Event, view: CellfitView) -> Answer | None:
    """A guaranteed pod waiting for its VC's cells that opportunistic pods hold, which cellfit
    does not reclaim for it (the leader's CellsNotReclaimed Event; user25 #5: an estimating Job's
    GPU sampling pod, preemptionPolicy Never, told only kube-scheduler's "Insufficient
    nvidia.com/gpu ... not eligible due to preemptionPolicy=Never"). Said first while it stands:
    kube-scheduler still finds too few GPUs, and the VC's cells still hold opportunistic pods
    where its view was read (the Event is told once and outlives them). None else."""
    told = _last(pod.events, NOT_RECLAIMED)
    if told is None or INSUFFICIENT_GPU not in failed.message:
        return None
    vc = view.virtual_cluster
    held = opportunistic_gpus(vc, view.cell_tree) if vc is not None and vc.get("name") == pod.vc else None
    if held == 0:
        return None
    why = told.message.removeprefix(NOT_RECLAIMED_HEAD)
    if why.startswith(NEVER_PREEMPTS):
        sample = " (cellfit's estimator creates its sampling pods so)" if pod.sample else ""
        why = f"cellfit does not reclaim them for a pod whose preemptionPolicy is Never{sample}, nor does kube-scheduler preempt for it"
    else:
        why = f"cellfit does not reclaim them for it: {why}"
    now = f" ({held} GPU{'s' if held != 1 else ''} of the cells it may use)" if held else ""
    return Answer(reason="pending",
                  summary=f"{NOT_RECLAIMED_LEAD}{pod.vc!r} that opportunistic pods hold{now}: {why}; "
                  f"they free when those pods end, or delete them; kube-scheduler's last attempt: {_scheduler_sentence(failed.message)}",
                  details=_seen(told) + _seen(failed))


# What to do of a node HiveD counts bad, by what its Node object says (facts.py node_states).
_BAD_NODE_ADVICE: Final = {
    "cordoned": "uncordon it, or wait",
    "not ready": "wait for it to be Ready",
    "deleted": "it serves again only if it comes back",
}
_BAD_UNKNOWN: Final = "cordoned, not ready, deleted or short of GPUs"


def _with_unusable_cells(pod: PodFacts, view: CellfitView, answer: Answer) -> Answer:
    """``answer`` with what keeps the guaranteed pod's VC from its own guarantee now, which
    neither kube-scheduler's counts nor the quota's say: its free GPUs in cells on bad nodes
    (user24 F13: "quota used (2 of 2 cells)" while its free GPUs sat on cordoned gpu-2), and
    quota it cannot bind, no free healthy cell being left (F8: GPU nodes deleted below what the
    VCs reserve, and the pod told "Insufficient nvidia.com/gpu" alone)."""
    vc = view.virtual_cluster
    if pod.priority != PRIORITY_GUARANTEED or vc is None or vc.get("name") != pod.vc:
        return answer
    said = []
    for cell in vc.get("vcCells") or []:
        gpus = cell.get("gpus") or {}
        unused = int(gpus.get("total") or 0) - int(gpus.get("guaranteed") or 0)
        if int(gpus.get("bad") or 0) > 0 and unused > 0:
            nodes = [str(n) for n in cell.get("nodes") or []]
            known = cell.get("badNodes") or {}  # the engine's own cause, for a user who may not read Nodes
            states = {view.node_states.get(n) or known.get(n) for n in nodes}
            state = states.pop() if len(states) == 1 else None
            where = (f"{state} node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}" if state
                     else f"node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)} ({_BAD_UNKNOWN})")
            advice = _BAD_NODE_ADVICE.get(state or "", "cellfit places nothing there until it is healthy")
            said.append(f"{unused} of its free GPUs are in its cell {cell.get('id')} on {where}: {advice}")
    tree = view.cell_tree
    if tree is not None:
        free = free_healthy_cells(tree)
        for kind, missing in unbound_cells(vc).items():
            have = free.get(kind, 0)
            if have < missing:
                bad = [f"{n} ({view.node_states[n]})" if n in view.node_states else n for n in unhealthy_nodes(tree)]
                cells = f"{missing} {kind!r} cell{'s' if missing > 1 else ''} of its quota {'are' if missing > 1 else 'is'}"
                left = f"only {have} free healthy one{'s are' if have > 1 else ' is'}" if have else "no free healthy one is"
                named = f"; bad nodes: {listed(bad, noun='node')}" if bad else ""
                said.append(f"its guarantee cannot be met now: {cells} not bound and {left} left to bind (GPU nodes deleted "
                            f"or bad{named}); it is met again once nodes return")
    if not said:
        return answer
    return replace(answer, summary=f"{answer.summary}; virtual cluster {pod.vc!r}: {'; '.join(said)}")


def _resume_hold(pod: PodFacts, held: str, failed: Event, view: CellfitView) -> Answer:
    """Kept off by a hold: a preemptor's (the pod FitGpp preempted for) or a resuming Job's. The
    live view decides: a hold its last attempt met that cellfit no longer keeps (given up, or
    ended with that pod's binding, a restart between) is said to be gone, not to keep it off."""
    holds = [h for h in view.resume_holds or () if held in (h.get("pods") or [])]
    nodes = sorted({str(h.get("node")) for h in holds})
    where = f"node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}" if nodes else "the node it fits"
    details = tuple(f"hold on {h.get('node')}: {h.get('requests')} for {', '.join(h.get('pods') or [])}" for h in holds)
    preemptor = any(h.get("kind") == "preemptor" for h in holds) or f"{held}, for which FitGpp preempted" in failed.message
    kind = "preemptor" if preemptor else "resume"
    if view.resume_holds is not None and not holds and view.replicas == 1:
        return Answer(
            reason="pending",
            summary=f"pending: the {kind} hold that kept it off the node it fits at its "
            f"last attempt (its free resources kept for {held}) is gone now: cellfit keeps no hold for {held}, so none "
            "keeps this pod off; kube-scheduler's next attempt says what does, if anything",
            details=_seen(failed),
        )
    if view.resume_holds is not None and not holds:
        return _hold_unseen(kind, held, failed, view)
    if preemptor:
        return Answer(
            reason="preemptor-hold",
            summary=f"kept off {where} by a preemptor hold: its free resources are kept for {held}, for which FitGpp "
            "preempted pods there (until that pod is bound, at most preemption.resumeHoldSeconds)",
            details=details + _seen(failed),
        )
    job = f" of Job {holds[0]['job']}" if holds and holds[0].get("job") else ""
    return Answer(
        reason="resume-hold",
        summary=f"kept off {where} by a resume hold: its free resources are kept for {held}{job}, a preempted "
        "best-effort Job resuming (until that pod is bound, at most preemption.resumeHoldSeconds)",
        details=details + _seen(failed),
    )


def _hold_unseen(kind: str, held: str, failed: Event, view: CellfitView) -> Answer:
    """A hold the last attempt met that the replica which answered does not keep, where that
    replica may not be the one beside the active kube-scheduler: each keeps holds of its own,
    and the service proxy tells not which answered. Not said to be gone: another may keep it."""
    behind = (f"{view.replicas} cellfit replicas stand behind its Service" if view.replicas is not None
              else "how many cellfit replicas stand behind its Service is not known: you may not list its EndpointSlices")
    return Answer(
        reason="pending",
        summary=f"pending: the {kind} hold that kept it off the node it fits at its last attempt (its free resources kept "
        f"for {held}) is not kept by the cellfit replica that answered: it keeps no hold for {held}; the last attempt "
        "named one: another replica may still keep it; kube-scheduler's next attempt says what does, if anything",
        details=(f"holds live in each replica's memory and only the one beside the active kube-scheduler keeps pods off; "
                 f"the service proxy reaches any ready replica and says not which answered; {behind}",) + _seen(failed),
    )


def _gang_pod(pod: PodFacts, gang: str, failed: Event, view: CellfitView) -> Answer:
    entry = _gang_entry(view, gang)
    problem = _scheduler_sentence(failed.message)
    if entry is not None:
        count = f"{entry.get('podsPlaced', 0)} of {entry.get('size', pod.gang_size)} pods placed"
    else:
        count = f"none of {pod.gang_size} pods placed" if pod.gang_size else "no pod placed"
    return Answer(reason="gang", summary=f"waiting for its gang {gang} ({count}): all its pods are placed together or "
                  f"none: {problem}", details=_seen(failed))


@dataclass(frozen=True, kw_only=True)
class _Found:
    """A never-placeable reason found in a FailedScheduling message, and the message's other counts."""

    reason: str
    change: str
    others: str  # kube-scheduler's other counts ("8 Insufficient nvidia.com/gpu"), "" when none
    # How ``others`` is introduced: the nodes cellfit's filter did not refuse, or kube-scheduler's
    # counts where cellfit's filter was not asked (the mistake found from cellfit's cells).
    others_head: str = "the other nodes"


def _never(pod: PodFacts, found: _Found, failed: Event, view: CellfitView) -> Answer:
    """Put first, whatever the counts of the ordinary reasons beside it: however many nodes free
    up, cellfit refuses the pod on each until its user changes it. The filter names the first
    mistake it meets (a bad cellfit.io/priority before the VC is looked up); a VC that cellfit
    does not know (its view answered so) is named too, so the user fixes both at once."""
    gang = GANG.match(found.reason)
    whose = f"its gang {gang.group('gang')}" if pod.gang and gang is not None and GANG_NEVER.fullmatch(found.reason) else ""
    head = f"{whose} {NEVER_HEAD}" if whose else NEVER_HEAD
    others = f"; {found.others_head}: {found.others}" if found.others else ""
    return Answer(reason="gang" if whose else NEVER,
                  summary=f"{head}: {found.reason} ({found.change}){_unknown_vc_too(pod, found, view)}{others}",
                  details=_seen(failed))


# cellfit's inspect API's answer for a VC it does not know (scheduler/extender/inspect.py).
NO_SUCH_VC: Final = re.compile(r"no virtual cluster named '(?P<vc>[^']*)'")


def _unknown_vc_too(pod: PodFacts, found: _Found, view: CellfitView) -> str:
    """``; and label cellfit.io/virtual-cluster: ...`` where the pod's VC is unknown to cellfit and
    the filter's reason is another mistake, which hid it; "" else."""
    unknown = NO_SUCH_VC.search(view.unavailable.get("virtual-cluster", ""))
    # A reason about the label already (its VC unknown, or no label: then pod.vc is the implicit
    # 'default', which the pod never named, and "unknown virtual cluster 'default'" contradicted it).
    about_the_label = _VC in found.reason or "virtual cluster" in found.reason or LABEL_VIRTUAL_CLUSTER in found.reason
    if unknown is None or not pod.vc or unknown["vc"] != pod.vc or about_the_label:
        return ""
    return (f"; and {_VC}: unknown virtual cluster {pod.vc!r} (set it to a virtual cluster it may use: "
            "kubectl cellfit vcs lists them)")


def _never_placeable(message: str) -> _Found | None:
    """The first of cellfit's never-placeable reasons among a FailedScheduling message's counts
    (kube-scheduler sorts them as text: "12 Insufficient cpu" before "4 <cellfit's>"), with the
    other counts as written."""
    counts = _counts(message)
    for at, (_, reason) in enumerate(counts):
        for known in NEVER_PLACEABLE:
            matched = known.reason.fullmatch(reason)
            if matched is not None:
                others = ", ".join(f"{n} {r}" for n, r in counts[:at] + counts[at + 1:])
                told = reason[:matched.start("said")] + reason[matched.end("said"):] if matched.groupdict().get("said") else reason
                keys = " and ".join(re.findall(rf"(?:^|; )({_KEY}): ", reason))
                return _Found(reason=told, change=known.change.format(**matched.groupdict(), keys=keys), others=others)
    return None


def _more_gpus_than_any_node(pod: PodFacts, message: str, view: CellfitView) -> _Found | None:
    """The pod asks more GPUs than any node-level cell holds (user25 #6): kube-scheduler's own
    filter (``Insufficient nvidia.com/gpu``) turns every node away before cellfit's is asked, so
    its message reads as a wait for GPUs that no node frees. Worded as HiveD's filter words it
    (scheduler/cells/planning.py), with its change; None where the cell tree was not read (no
    HiveD, or the view refused) or the pod fits some node."""
    largest = view.largest_node_cell
    if largest is None or pod.gpus <= largest[1] or INSUFFICIENT_GPU not in message:
        return None
    cell_type, gpus = largest
    reason = f"the pod requests {pod.gpus} GPUs, more than any node-level cell holds (largest: {cell_type!r} with {gpus})"
    change = next(known.change for known in NEVER_PLACEABLE if known.reason.fullmatch(reason))
    counts = ", ".join(f"{n} {r}" for n, r in _counts(message))
    return _Found(reason=reason, change=change, others=counts, others_head="kube-scheduler's own filters")


def _counts(message: str) -> list[tuple[int, str]]:
    """kube-scheduler's "0/12 nodes are available: 4 <reason>, 8 <reason>." as (count, reason),
    in its order; [] for another message (a PreFilter's, which counts no nodes)."""
    line = " ".join(message.split())
    framed = SCHEDULER_PREFIX.match(line)
    if framed is None:
        return []
    histogram = PREEMPTION_SUFFIX.sub("", line[framed.start("count"):]).removesuffix(".")
    # Items are joined with ", " and each starts with its count; cellfit's reasons hold ", " but
    # never ", <digits> " (a list of VC or cell type names has no space after a name).
    items = [ITEM.fullmatch(item) for item in NEXT_ITEM.split(histogram)]
    return [(int(item["count"]), item["reason"].removesuffix(".")) for item in items if item is not None]


def _quota(pod: PodFacts, vc: str, level: str, failed: Event, view: CellfitView) -> Answer:
    found = view.virtual_cluster
    if found is None or found.get("name") != vc:
        why = view.unavailable.get("virtual-cluster")
        return Answer(reason="quota", summary=f"pending: virtual cluster {vc!r} has used its quota at level {level!r}"
                      + (f" ({why})" if why else ""), details=_seen(failed))
    row = next((c for c in found.get("cells") or [] if c.get("cellType") == level), None)
    holders = sorted({p for cell in found.get("vcCells") or [] if cell.get("cellType") == level for p in cell.get("pods") or []})
    if not holders:  # the level's cells hold pods of other levels' requests: every guaranteed pod counts
        holders = sorted({str(p["pod"]) for p in found.get("placements") or [] if p.get("pod") and p.get("priority") == "guaranteed"})
    used = f"{row['bound']} of {row['quota']} {level!r} cells" if row is not None else f"its {level!r} cells"
    held = f", held by {listed(holders, noun='pod')}" if holders else ""
    return Answer(
        reason="quota",
        summary=f"pending: virtual cluster {vc!r} has used its quota at level {level!r} ({used} bound{held})",
        details=tuple(f"{c['id']}: {', '.join(c.get('pods') or []) or 'no pod'}" for c in found.get("vcCells") or []
                      if c.get("cellType") == level) + _seen(failed),
    )


# ------------------------------------------------------------------------------ wording


def _whole(failed: Event | None, unschedulable: Condition | None) -> Event | None:
    """``failed`` with the whole message where kube-scheduler cut it (its Events hold 1024 bytes,
    the last ending " ..."): the pod's PodScheduled condition has it all, the counts sorted last
    (cellfit's, often) included."""
    if failed is None or unschedulable is None or not failed.message.endswith(EVENT_CUT):
        return failed
    kept = failed.message.removesuffix(EVENT_CUT)
    if len(unschedulable.message) <= len(kept) or not unschedulable.message.startswith(kept):
        return failed
    return replace(failed, message=unschedulable.message)


def _last(events: Sequence[Event], reason: str) -> Event | None:
    found = [e for e in events if e.reason == reason]
    return found[-1] if found else None


def _seen(event: Event) -> tuple[str, ...]:
    times = f" ({event.count} times)" if event.count > 1 else ""
    return (f"{event.reason}{times}, last {event.last_seen or 'seen'}: {event.message}",)


# kube-scheduler's FailedScheduling frame around the extender's reasons:
# "0/8 nodes are available: 8 <reason>. preemption: 0/8 nodes are available: ...".
SCHEDULER_PREFIX = re.compile(r"^\d+/(?P<nodes>\d+) nodes are available: (?P<count>\d+) (?=\D)")
PREEMPTION_SUFFIX = re.compile(r"\.? preemption: .*$")
NEXT_ITEM = re.compile(r", (?=\d+ \D)")
EVENT_CUT = " ..."  # what ends a message kube-scheduler cut to fit an Event (NoteLengthLimit)
ITEM = re.compile(r"(?P<count>\d+) (?P<reason>\D.*)")


def _scheduler_sentence(message: str) -> str:
    """A FailedScheduling message as the end of an answer: one line, without kube-scheduler's
    node counts and its preemption attempt when they frame one reason."""
    line = PREEMPTION_SUFFIX.sub("", " ".join(message.split()))
    framed = SCHEDULER_PREFIX.match(line)
    # Every node, one reason: the counts say nothing more. With several ("6 Insufficient cpu, 6
    # Insufficient nvidia.com/gpu") each count is kept, the frame that gives them their sense too.
    if framed is not None and framed.group("nodes") == framed.group("count") and len(_counts(message)) == 1:
        line = line[framed.end():]
    return line.rstrip(".")
