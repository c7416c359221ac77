"""Where a preempted best-effort Job resumes: at the head of the best-effort queue (§2).

FitGpp suspends a BE job so that a TE job starts at once; the suspended job must not then wait
behind every BE job that arrived while it ran, or preemption would cost it its place as well as
its progress. kube-scheduler orders its queue by pod priority, then by the time a pod entered
the queue, and a Job's pod template (its ``priorityClassName``) cannot change while it runs. So
the pods the Job controller creates after a preemption are given, at admission, a "resumed"
PriorityClass whose value lies between the trial and best-effort classes: kube-scheduler then
takes them before every other BE pod, and a TE pod still preempts them like any BE pod.

Only the priority moves. The pod keeps its ``cellfit.io/job-class`` label, so FitGpp still
treats it as best-effort: it never preempts others for its priority, and P still protects it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from scheduler.errors import InvalidAnnotation
from scheduler.preemption.errors import InvalidPreemptionSettings
from scheduler.preemption.model import JobClass, job_class_of

PREEMPTION_POLICIES = frozenset({"PreemptLowerPriority", "Never"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumedPriorityClass:
    """The PriorityClass object resumed pods get, as the API server holds it.

    All three fields are copied onto the pod together: the API server's Priority admission
    plugin refuses a pod whose ``priority`` or ``preemptionPolicy`` differs from its class's.
    ``value`` is the class's integer priority; ``preemption_policy`` its ``preemptionPolicy``.
    """

    name: str
    value: int
    preemption_policy: str = "PreemptLowerPriority"

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidPreemptionSettings("a PriorityClass needs a name", field="name")
        if self.preemption_policy not in PREEMPTION_POLICIES:
            raise InvalidPreemptionSettings(
                f"{self.preemption_policy!r} is not a preemption policy (use one of {sorted(PREEMPTION_POLICIES)})",
                field="preemptionPolicy",
            )


def resumed_pod_patch(
    *,
    labels: Mapping[str, str],
    priority: int | None,
    job_preemptions: int,
    resumed: ResumedPriorityClass,
) -> list[dict[str, object]]:
    """JSON Patch operations (RFC 6902) that move a new pod of a preempted Job to the head of
    the BE queue, or none.

    ``priority`` is what the Priority admission plugin has already set from the pod's own class
    (admission webhooks run after it); ``job_preemptions`` the owning Job's
    ``cellfit.io/preemptions``. A pod is moved only when it is best-effort, its Job has been
    preempted, and the move raises its priority: a pod on a class above "resumed" keeps it.
    """
    if job_preemptions <= 0:
        return []
    try:
        if job_class_of(labels) is not JobClass.BEST_EFFORT:
            return []
    except InvalidAnnotation:
        return []  # the filter verb reports the bad label; admission must not refuse the pod
    if priority is not None and priority >= resumed.value:
        return []
    # "add" replaces a member that exists (RFC 6902 §4.1), so one op serves both cases.
    return [
        {"op": "add", "path": "/spec/priorityClassName", "value": resumed.name},
        {"op": "add", "path": "/spec/priority", "value": resumed.value},
        {"op": "add", "path": "/spec/preemptionPolicy", "value": resumed.preemption_policy},
    ]
