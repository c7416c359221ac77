"""JustFreed forgets its entries oldest first, stopping at the first still open (every pod gone
starts one, and the check runs at every opportunistic pod's filter while any is open): an entry
opened again moves behind the others, so one opened later but not again still ends on time."""

from __future__ import annotations

from scheduler.cells.freeing import FREED_CELL_WAIT_SECONDS, JustFreed
from tests.cells.test_no_reclaim_just_after_vc_cells_freed import Clock


def test_an_entry_opened_again_does_not_keep_an_older_one_open() -> None:
    clock = Clock()  # 100 s
    freed = JustFreed(clock=clock)
    freed.left(pod_key="ns/a1", vc="vc-a", node="n-a")
    clock.now += 1
    freed.left(pod_key="ns/b1", vc="vc-a", node="n-b")
    clock.now += 1
    freed.left(pod_key="ns/a2", vc="vc-a", node="n-a")  # n-a's window starts again at 102 s
    assert freed.nodes_of("vc-a") == {"n-a": ["ns/a1", "ns/a2"], "n-b": ["ns/b1"]}
    clock.now = 101 + FREED_CELL_WAIT_SECONDS  # n-b's window is over, not n-a's
    assert freed.nodes_of("vc-a") == {"n-a": ["ns/a1", "ns/a2"]}
    clock.now = 102 + FREED_CELL_WAIT_SECONDS
    assert freed.nodes_of("vc-a") == {} and not freed
