"""HiveD's reclaim as the preempt verb answers it, told as FitGpp's decisions are: a guaranteed
pod of a virtual cluster takes back the cells of its VC that opportunistic pods run on
(scheduler/cells: an opportunistic pod borrows free cells and gives them back), and
kube-scheduler deletes those pods. Without this the victims read only kube-scheduler's
"Preempted by pod <uid> on node <node>", and nothing of why, nor of what the preemption does to
their Job, which a victim of FitGpp's is told. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.constants import LABEL_PRIORITY, PRIORITY_OPPORTUNISTIC
from scheduler.core.model import PodInfo
from scheduler.preemption.model import vc_of

# What happens to a victim whose controller creates it again as it was (a Job that ignores
# DisruptionTarget, a ReplicaSet): no cells are kept for it, unlike a FitGpp victim's Job.
CREATED_AGAIN = "its controller creates it again, and it runs where cells are free"
OPPORTUNISTIC = f"{LABEL_PRIORITY}: {PRIORITY_OPPORTUNISTIC}"


def reclaimed_job_outcome(not_resumed: str | None) -> str:
    """What reclaiming a pod does to its Job, as its Event ends: ``not_resumed``, the outcome
    FitGpp's victims are told where their Job does not resume them (``FitGppEngine.victim_outcomes``,
    scheduler/wording.py), or, where it does, that its controller creates it again. The preempt
    verb's reclaim and the leader's (scheduler/cluster/reclaim.py) both say it so."""
    return not_resumed or CREATED_AGAIN


@dataclass(frozen=True, slots=True, kw_only=True)
class ReclaimedPod:
    uid: str
    key: str
    vc: str  # the virtual cluster it names (cellfit.io/virtual-cluster): not the cells' owner

    @classmethod
    def of(cls, pod: PodInfo) -> ReclaimedPod:
        return cls(uid=pod.uid, key=pod.key, vc=vc_of(pod))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReclaimDecision:
    """Opportunistic pods ``victims`` (all on ``node``) deleted so that ``preemptor``, a
    guaranteed pod of virtual cluster ``vc``, gets the cells of ``vc`` they run on."""

    preemptor_key: str
    vc: str
    node: str
    victims: tuple[ReclaimedPod, ...]

    @classmethod
    def of(cls, *, preemptor: PodInfo, node: str, victims: tuple[PodInfo, ...]) -> ReclaimDecision:
        return cls(preemptor_key=preemptor.key, vc=vc_of(preemptor), node=node, victims=tuple(ReclaimedPod.of(v) for v in victims))

    @property
    def victim_uids(self) -> tuple[str, ...]:
        return tuple(victim.uid for victim in self.victims)

    def preemptor_messages(self) -> tuple[str, ...]:
        """One Event message per victim for the preemptor, shaped as FitGpp's (``preempting
        ns/pod on node X (why)``, no parentheses inside: ``kubectl cellfit why`` reads the why
        from there, scheduler/kubectl/objects.py PREEMPTING)."""
        return tuple(
            f"preempting {victim.key} on node {self.node} (reclaiming cells of virtual cluster {self.vc} for this guaranteed "
            f"pod: {victim.key}{self._whose(victim)} ran on them opportunistically)"
            for victim in self.victims
        )

    def victim_message(self, victim_uid: str, *, not_resumed: str | None = None) -> str:
        """The Event message for one victim, read in ``kubectl describe pod`` by its user, who may
        not read the preemptor's Events: who reclaims, for which virtual cluster, that the victim
        held those cells only as an opportunistic pod, and what the preemption does to its Job
        (``not_resumed``: scheduler/wording.py's outcome, as a FitGpp victim is told it; None:
        its controller creates it again)."""
        victim = next(v for v in self.victims if v.uid == victim_uid)
        borrowed = (
            f"on cells its own virtual cluster {victim.vc} is not guaranteed"
            if victim.vc != self.vc
            else "which keeps no cells from its virtual cluster's guaranteed pods"
        )
        return (
            f"preempted by {self.preemptor_key} on node {self.node}: HiveD reclaims the cells this pod ran on for "
            f"{self.preemptor_key}, a guaranteed pod of virtual cluster {self.vc}, whose cells they are; this pod ran there "
            f"opportunistically ({OPPORTUNISTIC}), {borrowed}; {reclaimed_job_outcome(not_resumed)}"
        )

    def _whose(self, victim: ReclaimedPod) -> str:
        return f", of virtual cluster {victim.vc}," if victim.vc != self.vc else ""
