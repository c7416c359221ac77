"""review26 #10 (1b42bba, LOW): AskedLately measures its 300 s window on the placer's clock, the wall
clock (time.time) live. A step back of the wall clock (NTP correcting a drifted node, a VM
restored) leaves a gone pod's ask "seen in the future" and kept for the step's length plus the
window: an hour's step keeps 448 GiB beside every free GPU for an hour after the pod left,
starving CPU runs that long. The estimator measures its windows on a monotonic clock for that
reason (estimator README, NODE_RETURN_SECONDS)."""

from __future__ import annotations

from placer.guarantee import AskedLately
from scheduler.matching.model import Demand


def test_a_wall_clock_step_back_does_not_keep_a_gone_pods_ask_past_the_window() -> None:
    lately = AskedLately(window_seconds=300)
    lately.note(Demand(cpu=8.0, memory=448.0), now=10_000.0)
    # The pod is gone; the wall clock steps back an hour; passes go on for 301 s after the step.
    assert lately.note(Demand(), now=10_000.0 - 3600 + 301) == Demand(), "kept an hour past the window"
