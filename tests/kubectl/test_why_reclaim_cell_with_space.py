"""kubectl cellfit why reads the leader's reclaim Event when the cell's id holds a space (review24
F4). HiveD checks only that a cell type name is not empty ("V100 SOCKET"), and a cell below node
level is named "<node>/<type>#<n>", so the leader's Event reads "... which waits for cell
n-a/V100 SOCKET#0 on node n-a: ...". RECLAIMED_FOR matched the cell as one word: the Event was
not read, and the answer fell back to kube-scheduler's "Preempted by pod <uid>"."""

from __future__ import annotations

from scheduler.cluster.reclaim import Reclaim, victim_message
from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.kubectl.objects import events_from, preempted_event, preemption_from
from tests.kubectl.test_why import event


def test_a_cell_whose_type_name_has_a_space_is_still_read() -> None:
    g = PodInfo(uid="g", namespace="team-a", name="g", requests=Resources(1000, 2**30, 4), priority=100)
    victim = PodInfo(uid="v", namespace="team-b", name="ob-0", requests=Resources(1000, 2**30, 4), priority=100)
    message = victim_message(Reclaim(waiting=g, victim=victim, vc="a", cell="n-a/V100 SOCKET#0", node="n-a"))
    events = events_from([event("Preempted", message, warning=True, name="ob-0"),
                          event("Preempted", "Preempted by pod g on node n-a", name="ob-0", at="2026-11-26T12:00:05Z")])
    preempted = preempted_event(events)
    assert preempted is not None and preempted.message == message
    found = preemption_from(victim="team-b/ob-0", preempted=preempted, preemptor_events=(), unread="")
    assert found is not None and (found.by, found.node) == ("team-a/g", "n-a")
    assert found.breakdown == "HiveD reclaimed cells of virtual cluster a for it"
