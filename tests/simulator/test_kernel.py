"""The discrete-event kernel all simulator workloads share: instant order, tie-breaking, events
scheduled while an instant is applied, arrivals merged in, and the end of a run."""

from __future__ import annotations

import pytest

from scheduler.simulator.kernel import EventKernel


def _run(kernel: EventKernel[str], arrivals: list[float], log: list[tuple[str, float]]) -> None:
    queue = list(arrivals)

    def next_arrival() -> float | None:
        return queue[0] if queue else None

    def instant(now: float) -> None:
        while queue and queue[0] <= now:
            log.append(("arrive", queue.pop(0)))
        log.append(("pass", now))

    kernel.run(
        next_arrival=next_arrival,
        on_event=lambda event: log.append((event, kernel.now)),
        instant=instant,
        advance=lambda now: log.append(("advance", now)),
    )


def test_events_at_one_instant_go_by_kind_then_order_then_scheduling() -> None:
    kernel: EventKernel[str] = EventKernel()
    kernel.schedule(5.0, "late-kind", kind=2)
    kernel.schedule(5.0, "second", kind=1)
    kernel.schedule(5.0, "first", kind=1)  # scheduled later, but ordered first by its order
    kernel.schedule(5.0, "kind-0", kind=0)
    kernel.schedule(5.0, "ordered-0", kind=1, order=0)
    log: list[tuple[str, float]] = []
    _run(kernel, [], log)
    assert log[0] == ("advance", 5.0) and log[-1] == ("pass", 5.0)
    # default order is the scheduling sequence (1, 2, 3, ...), so order=0 goes before both
    events = [name for name, _ in log if name not in ("advance", "pass")]
    assert events == ["kind-0", "ordered-0", "second", "first", "late-kind"]


def test_an_arrival_no_later_than_the_next_event_makes_the_instant() -> None:
    kernel: EventKernel[str] = EventKernel()
    kernel.schedule(3.0, "done")
    log: list[tuple[str, float]] = []
    _run(kernel, [1.0, 3.0, 7.0], log)
    assert log == [
        ("advance", 1.0), ("arrive", 1.0), ("pass", 1.0),
        # events first, then the arrivals of the same instant, then one pass
        ("advance", 3.0), ("done", 3.0), ("arrive", 3.0), ("pass", 3.0),
        ("advance", 7.0), ("arrive", 7.0), ("pass", 7.0),
    ]
    assert kernel.pending == 0 and kernel.next_time() is None


def test_events_scheduled_for_now_by_a_handler_run_in_the_same_round() -> None:
    kernel: EventKernel[str] = EventKernel()
    log: list[str] = []
    passes: list[float] = []

    def on_event(event: str) -> None:
        log.append(event)
        if event == "a":
            kernel.schedule(kernel.now, "b")  # a zero-length follow-up

    def instant(now: float) -> None:
        passes.append(now)
        if now == 1.0 and len(passes) == 1:
            kernel.schedule(1.0, "c")  # the pass asks for another round at the same time

    kernel.schedule(1.0, "a")
    kernel.run(next_arrival=lambda: None, on_event=on_event, instant=instant)
    assert log == ["a", "b", "c"]
    assert passes == [1.0, 1.0]


def test_a_kernel_runs_once() -> None:
    kernel: EventKernel[str] = EventKernel()
    kernel.run(next_arrival=lambda: None, on_event=lambda _: None, instant=lambda _: None)
    with pytest.raises(RuntimeError):
        kernel.run(next_arrival=lambda: None, on_event=lambda _: None, instant=lambda _: None)
