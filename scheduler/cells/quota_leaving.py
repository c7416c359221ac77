"""Why a guaranteed pod finds its virtual cluster's quota in use when pods leaving hold it.

Planning refuses a pod whose VC has no cell of its quota with room (planning.QuotaExhausted):
"quota exhausted". When that room is held by pods that are leaving (the watch shows them
terminating, or cellfit handed out their deletion: FitGpp's or the leader's reclaim), the quota
is not exhausted but about to come back, and users read "exhausted" as a problem to fix (user29,
a moment after a GPU was freed). This says instead which pods hold it and that the pod is placed
once they are gone. The answer stays unresolvable for kube-scheduler: a preemption frees nothing
that is not freeing already, and kube-scheduler retries a pod an extender refused on the next
cluster event (the leaving pod's deletion among them) or after its backoff.

It looks only when some pod is leaving (BookingExpiry.any_leaving), and then only at the VC's
own cells of the level searched (freeing.freeing_cell): no scan of all pods on a filter call.
"""

from __future__ import annotations

from typing import Callable, Mapping

from scheduler.cells.booking import Booking
from scheduler.cells.freeing import freeing_cell
from scheduler.cells.planning import QuotaExhausted, level_words

# The most leaving pods a reason names; the rest are counted.
NAMED_LEAVING = 5


def quota_leaving_reason(
    failure: QuotaExhausted,
    *,
    bookings: Mapping[int, Booking],
    leaving: Callable[[int], bool],
    terminating: Callable[[str], bool],
) -> str | None:
    """The refusal's words when pods that are ``leaving`` (booking id -> whether its pod is
    leaving) hold the room the pod needs in its VC's quota: one of the VC's cells of the level
    searched has the pod's GPUs once they are gone. ``terminating``: whether the watch shows a
    pod (UID) terminating; any other leaving pod's deletion was handed out by cellfit. None when
    no such cell exists (the quota is exhausted indeed)."""
    found = freeing_cell(failure.vc, failure.targets, failure.gpus, leaving=leaving)
    if found is None:
        return None
    holders = [bookings[i] for i in found.leaving if i in bookings]
    named = ", ".join(_leaving_words(b, terminating) for b in holders[:NAMED_LEAVING])
    more = f" and {len(holders) - NAMED_LEAVING} more" if len(holders) > NAMED_LEAVING else ""
    cell = found.cell
    return (f"virtual cluster {failure.vc.name!r} quota at level {level_words(cell.cell_type, cell.total)} is held by pods "
            f"that are leaving ({named}{more}): this pod is placed on node {cell.node} once they have gone")


def _leaving_words(booking: Booking, terminating: Callable[[str], bool]) -> str:
    name = booking.pod_key or f"slot {booking.id}"
    if booking.pod_uid is not None and terminating(booking.pod_uid):
        return f"{name} terminating"
    return f"{name} being preempted"
