from __future__ import annotations

from typing import Iterator

import httpx
import pytest

from scheduler.config import Settings
from scheduler.extender.runtime import Runtime, build_runtime
from tests.support.server import running_server


@pytest.fixture
def runtime() -> Runtime:
    return build_runtime(Settings(), standalone=True)


@pytest.fixture
def client(runtime: Runtime) -> Iterator[httpx.Client]:
    with running_server(runtime.app) as base_url, httpx.Client(base_url=base_url, timeout=10) as http:
        yield http
