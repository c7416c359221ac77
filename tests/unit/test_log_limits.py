"""What clients send does not decide how much cellfit writes: RepeatLimiter lets a burst of each
kind of request-caused record through, then a few a minute, and the next that passes says how
many were held back; long context values are cut."""

from __future__ import annotations

import io
import json
import logging

import pytest

from scheduler.logs import MAX_VALUE_CHARS, JsonFormatter, RepeatLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _record(logger: str, msg: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord(logger, logging.WARNING, __file__, 1, msg, None, None)
    record.__dict__.update(extra)
    return record


def test_a_burst_passes_then_a_few_a_minute_and_the_next_says_how_many_were_held_back() -> None:
    clock = Clock()
    limiter = RepeatLimiter(loggers={"scheduler.extender.dispatch": logging.NOTSET}, burst=10, per_minute=6, clock=clock)
    passed = [limiter.filter(_record("scheduler.extender.dispatch", "request rejected")) for _ in range(1000)]
    assert sum(passed) == 10 and all(passed[:10])
    clock.now += 10  # one token at 6 a minute
    again = _record("scheduler.extender.dispatch", "request rejected")
    assert limiter.filter(again) and again.suppressed == 990  # type: ignore[attr-defined]
    assert not limiter.filter(_record("scheduler.extender.dispatch", "request rejected"))
    clock.now += 600  # refilled to the burst, never above it
    assert sum(limiter.filter(_record("scheduler.extender.dispatch", "request rejected")) for _ in range(50)) == 10


def test_kinds_are_limited_apart_and_other_loggers_not_at_all() -> None:
    limiter = RepeatLimiter(loggers={"scheduler.extender.dispatch": logging.NOTSET}, burst=2, per_minute=1, clock=Clock())
    for _ in range(5):
        limiter.filter(_record("scheduler.extender.dispatch", "request rejected"))
    assert limiter.filter(_record("scheduler.extender.dispatch", "request body too large"))
    assert all(limiter.filter(_record("scheduler.cells", "node left out of discovery")) for _ in range(100))


def test_the_kinds_remembered_are_bounded() -> None:
    limiter = RepeatLimiter(loggers={"uvicorn.error": logging.NOTSET}, burst=1, per_minute=1, clock=Clock(), max_kinds=16)
    for n in range(1000):
        limiter.filter(_record("uvicorn.error", f"message {n}"))
    assert len(limiter._kinds) == 16


def test_a_logger_is_limited_from_its_level_up() -> None:
    limiter = RepeatLimiter(loggers={"scheduler.extender.service": logging.WARNING}, burst=1, per_minute=1, clock=Clock())
    decisions = [_record("scheduler.extender.service", "no node fits") for _ in range(20)]
    for record in decisions:
        record.levelno = logging.INFO
    assert all(limiter.filter(record) for record in decisions)  # a decision per pod stays whole
    assert sum(limiter.filter(_record("scheduler.extender.service", "request not carried out")) for _ in range(20)) == 1


def test_limits_must_let_something_through() -> None:
    with pytest.raises(ValueError, match="burst"):
        RepeatLimiter(burst=0)


def test_long_context_values_are_cut_saying_how_much() -> None:
    line = json.loads(JsonFormatter().format(_record("scheduler.extender.dispatch", "request rejected", reason="x" * 50_000)))
    assert len(line["reason"]) < MAX_VALUE_CHARS + 100
    assert line["reason"].endswith(f"({50_000 - MAX_VALUE_CHARS} more characters cut)")


def test_configured_logging_limits_request_records() -> None:
    from scheduler.logs import configure_logging

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging(level="INFO", fmt="json")
        stream = io.StringIO()
        root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        for _ in range(500):
            logging.getLogger("scheduler.extender.listeners").warning("invalid HTTP request", extra={"reason": "x"})
        assert len(stream.getvalue().splitlines()) == 10
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
