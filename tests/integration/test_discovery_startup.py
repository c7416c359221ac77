"""Discovery at startup says what it found: with no topology configured, cellfit lists the
Nodes before serving and logs the cells it built from them (GPU product groups, racks from
policy.rackLabel, nodes left out), so an operator can check it without the inspect API."""

from __future__ import annotations

import logging

import pytest

from scheduler.config import parse_settings
from scheduler.errors import ConfigError
from scheduler.extender.runtime import build_runtime
from tests.support import kube_objects as k
from tests.support.api_double import ListingApi

NODES = [
    k.node("a100-0", gpus=8),
    k.node("a100-1", gpus=8),
    k.node("t4-0", gpus=4, product="Tesla-T4"),
    k.node("cpu-0", gpus=0),
]


def test_discovered_cells_are_logged_before_serving(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="scheduler")
    settings = parse_settings("policy: {name: hived, rackLabel: topology.cellfit.io/rack}\n")
    runtime = build_runtime(settings, api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    [record] = [r for r in caplog.records if r.getMessage() == "policy hived"]
    summary = record.cells  # type: ignore[attr-defined]
    assert summary.startswith("topology (discovered): ")
    assert "NVIDIA-A100-SXM4-80GB-NODE (8 GPUs each): 2 nodes, 1 NVIDIA-A100-SXM4-80GB-RACK of 2 nodes" in summary
    assert "Tesla-T4-NODE (4 GPUs each): 1 node," in summary
    assert "1 node without GPUs is not part of any cell" in summary
    assert "virtual clusters: default" in summary
    assert runtime.engine.stats()["gpus"] == 20


def test_a_configured_vc_the_discovered_cells_cannot_hold_is_refused() -> None:
    settings = parse_settings(
        "policy: {name: hived}\ncells:\n  virtualClusters:\n    a: [{cellType: NVIDIA-A100-SXM4-80GB-NODE, count: 3}]\n"
    )
    with pytest.raises(ConfigError, match="NVIDIA-A100-SXM4-80GB-NODE"):
        build_runtime(settings, api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
