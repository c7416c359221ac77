"""server.nodeNameFastPath switches the C extension off for the process: the verbs then run
the Python path (and answer the same, which tests/unit/test_names.py checks in depth)."""

from __future__ import annotations

from typing import Iterator

import pytest

from scheduler.config import parse_settings
from scheduler.core.model import NodeInfo
from scheduler.core.resources import Resources
from scheduler.extender.runtime import build_runtime
from scheduler.kube import names
from tests.support import kube_objects as k

pytestmark = pytest.mark.skipif(not names.NATIVE, reason="the C extension was not built here")


@pytest.fixture(autouse=True)
def restore() -> Iterator[None]:
    yield
    names.use_native(True)


def filter_answer(settings_text: str) -> tuple[bytes, object]:
    runtime = build_runtime(parse_settings(settings_text), standalone=True)
    for name in ("gpu-a", "gpu-b"):
        runtime.engine.apply_node(NodeInfo(name=name, allocatable=Resources(64000, 2**38, 8 if name == "gpu-a" else 2)))
    body = k.dumps(k.extender_args(k.pod("train-0", gpus=4), [k.node("gpu-a"), k.node("gpu-b")], node_cache_capable=True))
    return runtime.app.routes["/v1/extender/filter"].handler(body).body, names.native


def test_the_setting_switches_the_extension_off_with_the_same_answer() -> None:
    fast, in_use = filter_answer("policy: {name: resource-fit}\n")
    assert in_use is not None
    slow, in_use = filter_answer("policy: {name: resource-fit}\nserver: {nodeNameFastPath: false}\n")
    assert in_use is None
    assert fast == slow == b'{"Nodes":null,"NodeNames":["gpu-a"],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}'
