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
    assert "NVIDIA-A100-SXM4-80GB-8GPU-NODE (8 GPUs each): 2 nodes, 1 NVIDIA-A100-SXM4-80GB-8GPU-RACK of 2 nodes" in summary
    assert "Tesla-T4-4GPU-NODE (4 GPUs each): 1 node," in summary
    assert "1 node without GPUs is not part of any cell" in summary
    assert "virtual clusters: default" in summary
    assert runtime.engine.stats()["gpus"] == 20


def test_a_configured_vc_the_discovered_cells_cannot_hold_is_refused() -> None:
    settings = parse_settings(
        "policy: {name: hived}\ncells:\n  virtualClusters:\n    a: [{cellType: NVIDIA-A100-SXM4-80GB-8GPU-NODE, count: 3}]\n"
    )
    with pytest.raises(ConfigError, match="NVIDIA-A100-SXM4-80GB-8GPU-NODE"):
        build_runtime(settings, api=ListingApi(nodes=NODES))  # type: ignore[arg-type]


def test_an_old_unsized_cell_type_name_is_served_with_a_warning_naming_the_stable_one(caplog: pytest.LogCaptureFixture) -> None:
    """Discovered names carry the node size (H4: they changed once a second size joined, and the
    configuration written at install stopped the scheduler at its next restart). The old name
    still works while the product has one size, and the log tells the admin what to write."""
    caplog.set_level(logging.INFO, logger="scheduler")
    settings = parse_settings(
        "policy: {name: hived}\ncells:\n  virtualClusters:\n    a: [{cellType: NVIDIA-A100-SXM4-80GB-NODE, count: 1}]\n"
    )
    build_runtime(settings, api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    [record] = [r for r in caplog.records if r.getMessage() == "cells configuration: a name to change"]
    assert record.levelno == logging.WARNING
    assert record.problem.startswith(  # type: ignore[attr-defined]
        "cells.virtualClusters.a[0].cellType: 'NVIDIA-A100-SXM4-80GB-NODE' is the name discovery gave before")
    assert record.problem.endswith("write 'NVIDIA-A100-SXM4-80GB-8GPU-NODE'")  # type: ignore[attr-defined]


def test_an_old_name_the_cluster_has_in_two_sizes_leaves_that_vc_unserved_naming_the_stable_names(caplog: pytest.LogCaptureFixture) -> None:
    """H4: ``cellfit serve`` exited 2 at the restart after a node pool of a second size joined.
    Now it serves, the VC that names an ambiguous old name left out, and says so at ERROR."""
    caplog.set_level(logging.INFO, logger="scheduler")
    settings = parse_settings(
        "policy: {name: hived}\ncells:\n  virtualClusters:\n    a: [{cellType: NVIDIA-A100-SXM4-80GB-NODE, count: 1}]\n"
        "    t: [{cellType: Tesla-T4-4GPU-NODE, count: 1}]\n"
    )
    nodes = [*NODES, k.node("a100-small", gpus=2)]
    runtime = build_runtime(settings, api=ListingApi(nodes=nodes))  # type: ignore[arg-type]
    [record] = [r for r in caplog.records if r.getMessage() == "virtual cluster not served"]
    assert record.levelno == logging.ERROR and record.vc == "a"  # type: ignore[attr-defined]
    assert record.problem.startswith(  # type: ignore[attr-defined]
        "cells.virtualClusters.a[0].cellType: 'NVIDIA-A100-SXM4-80GB-NODE' is ambiguous: the cluster has its GPU product in 2 "
        "node sizes, and discovered cell-type names carry the size: write one of 'NVIDIA-A100-SXM4-80GB-2GPU-NODE', "
        "'NVIDIA-A100-SXM4-80GB-8GPU-NODE'")
    assert runtime.engine.stats()["gpus"] == 22
