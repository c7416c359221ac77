"""cellfit's logging writes to the sys.stderr of the moment (log29): ``cellfit serve`` called
under pytest's capsys (tests/integration/test_serve_refusal_names_file.py) configured the root
logger with a handler holding capsys's stream, which capsys closed after the test; every record
any later thread wrote (a VictimRequeue outliving its test) then printed "--- Logging error ---
ValueError: I/O operation on closed file" through the rest of the run."""

from __future__ import annotations

import io
import logging
import sys
from typing import Iterator

import pytest

from scheduler.logs import configure_logging


@pytest.fixture
def root_logging() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved_stderr = sys.stderr
    try:
        yield root
    finally:
        sys.stderr = saved_stderr
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


def test_a_record_after_the_configured_stderr_was_closed_and_replaced_goes_to_the_new_one(
        root_logging: logging.Logger) -> None:
    first = io.StringIO()
    sys.stderr = first
    configure_logging(level="INFO", fmt="json")
    first.close()  # capsys closes its stream at the test's end, and puts back the one before
    second = io.StringIO()
    sys.stderr = second
    logging.getLogger("scheduler.cluster.nudge").info("requeue signal sent")
    written = second.getvalue()
    assert "Logging error" not in written, written
    assert '"msg": "requeue signal sent"' in written


def test_a_stream_set_on_the_handler_is_held(root_logging: logging.Logger) -> None:
    configure_logging(level="INFO", fmt="json")
    chosen = io.StringIO()
    root_logging.handlers[0].setStream(chosen)  # type: ignore[attr-defined]
    sys.stderr = io.StringIO()
    logging.getLogger("scheduler.cluster.nudge").info("kept")
    assert '"msg": "kept"' in chosen.getvalue()
    assert sys.stderr.getvalue() == ""
