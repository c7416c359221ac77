"""helper-70's review of the cell exchange's safety: the pods preempted when a drain's grace ends."""

from __future__ import annotations

from scheduler.cells.exchange.preemption import due_preemptions
from tests.cells.test_exchange_board import T0, posting, run, view


def test_two_exchanges_lending_the_same_type_each_empty_a_draining_cell_of_their_own():
    # Tenant a lends one node to b and another to c for the same hour. Both of a's node cells
    # still run a pod when the windows open, so both drain. Each exchange took "one draining
    # cell of the type" in id order, the same one for both, so a's pod on the second cell was
    # never preempted and c's guaranteed pods waited for it for as long as it ran.
    offers = [posting("offer", "team-a", name, {"V100-NODE": 1}, T0, T0 + 3600) for name in ("to-b", "to-c")]
    requests = [posting("request", ns, "burst", {"V100-NODE": 1}, T0, T0 + 3600) for ns in ("team-b", "team-c")]
    entries = run(offers, requests).new_entries
    assert {(e.lender, e.borrower) for e in entries} == {("a", "b"), ("a", "c")}
    views = {"a": view("a", [("n1", "draining", ["team-a/one"]), ("n2", "draining", ["team-a/two"])])}
    due = due_preemptions(entries=entries, now=T0 + 300, grace_seconds=300, views=views)
    assert sorted(p.pod for p in due) == ["team-a/one", "team-a/two"]
