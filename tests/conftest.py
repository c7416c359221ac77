"""What every test under tests/ shares."""

from __future__ import annotations

import logging
from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def _process_logging_restored() -> Iterator[None]:
    """A test that runs ``cellfit serve`` (cli.main) configures the process's root logger, as the
    service does once at startup: the handlers and levels it set stay with that test, not with
    the rest of the run (log29: they outlived it, writing every later record twice)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    access = logging.getLogger("uvicorn.access")
    access_level = access.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    access.setLevel(access_level)
