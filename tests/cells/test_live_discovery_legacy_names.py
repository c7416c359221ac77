"""A VC naming a discovered cell type by its old unsized name (``A100-NODE``, taken while the
product has one node size) is told at the join of a node of another size of that product, at
WARNING, naming the field and the stable name to write: from then on the old name is ambiguous,
and the next restart leaves the VC unserved (strand23). The live discovery harness of
tests/cells/test_live_discovery.py."""

from __future__ import annotations

import logging

import pytest

from scheduler.cells import HivedEngine
from tests.cells.helpers import node
from tests.cells.test_live_discovery import A100, a100

ENGINE_LOG = "scheduler.cells.engine"


def problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(getattr(r, "problem", "")) for r in caplog.records
            if r.name == ENGINE_LOG and r.levelno == logging.WARNING and r.getMessage() == "cells configuration: a name to change"]


def test_a_node_of_another_size_joining_warns_of_the_old_name_once(caplog: pytest.LogCaptureFixture) -> None:
    config = {"virtualClusters": {"a": [{"cellType": "A100-NODE", "count": 1}],
                                  "b": [{"cellType": "A100-8GPU-NODE", "count": 1}]}}
    engine = HivedEngine.from_config(config, nodes=[a100("a0"), a100("a1")], prefix="cells")
    with caplog.at_level(logging.WARNING, logger=ENGINE_LOG):
        engine.apply_node(a100("a2"))  # the same size: the old name still means one type
        assert problems(caplog) == []
        engine.apply_node(node("s0", 2, labels=A100))
        engine.apply_node(node("s1", 2, labels=A100))  # said once
    (said,) = problems(caplog)
    assert said.startswith("cells.virtualClusters.a[0].cellType: 'A100-NODE' "), said
    assert "names nothing after a restart" in said and said.endswith("write 'A100-8GPU-NODE'"), said
    # It still serves the VC now; the restart would not.
    assert engine.allocator.vcs["a"].quota == {"A100-8GPU-NODE": 1}
    restarted = HivedEngine.from_config(config, nodes=[a100("a0"), a100("a1"), a100("a2"), node("s0", 2, labels=A100)],
                                        prefix="cells")
    assert "a" in restarted.allocator.virtual_clusters.unserved


def test_a_reload_that_writes_the_stable_name_is_not_warned(caplog: pytest.LogCaptureFixture) -> None:
    engine = HivedEngine.from_config({"virtualClusters": {"a": [{"cellType": "A100-NODE", "count": 1}]}},
                                     nodes=[a100("a0")], prefix="cells")
    engine.reconfigure({"virtualClusters": {"a": [{"cellType": "A100-8GPU-NODE", "count": 1}]}}, prefix="cells")
    with caplog.at_level(logging.WARNING, logger=ENGINE_LOG):
        engine.apply_node(node("s0", 2, labels=A100))
    assert problems(caplog) == []


def test_a_reload_that_keeps_the_old_name_is_warned_at_the_join(caplog: pytest.LogCaptureFixture) -> None:
    engine = HivedEngine.from_config({"virtualClusters": {"a": [{"cellType": "A100-8GPU-NODE", "count": 1}]}},
                                     nodes=[a100("a0")], prefix="cells")
    engine.reconfigure({"virtualClusters": {"a": [{"cellType": "A100-NODE", "count": 1}]}}, prefix="cells")
    with caplog.at_level(logging.WARNING, logger=ENGINE_LOG):
        engine.apply_node(node("s0", 2, labels=A100))
    (said,) = problems(caplog)
    assert said.startswith("cells.virtualClusters.a[0].cellType: 'A100-NODE' ") and said.endswith("write 'A100-8GPU-NODE'")
