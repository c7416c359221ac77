"""``cells.victimExitMarginSeconds``: how long past its leaving victims' grace period HiveD keeps
a guaranteed pod's booking off the offered nodes is the operator's to set, validated, applied on
live reload (expiry.py keeps the booking; engine.booking_limits carries the setting)."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from scheduler.cells import HivedEngine
from scheduler.cells.config import parse_cells_schema
from scheduler.errors import ConfigError
from tests.cells.helpers import pod, rack_cluster, schedule
from tests.cells.test_booking_kept_while_victims_leave import booked_node, booking_with_victim, victim_on
from scheduler.kube.names import filter_offered

GRACE = 120  # the stuck victim's grace period


def full_node_pair(**settings: Any) -> tuple[HivedEngine, list[str]]:
    """Two 8-GPU nodes, each full of one of VC b's opportunistic pods; VCs a and b own one each."""
    vcs = {"a": [{"cellType": "V100-NODE", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 1}]}
    config = rack_cluster(racks=1, nodes_per_rack=2, vcs=vcs)
    config.update(settings)
    engine = HivedEngine.from_config(config)
    names = ["r0n0", "r0n1"]
    for i in range(2):
        running = schedule(engine, pod(f"o{i}", 8, "b", priority="opportunistic"), names)
        assert running is not None
        engine.apply_pod(running)
    return engine, names


def kept_until(engine: HivedEngine, names: list[str]) -> tuple[str, str]:
    """g's booking waits for a victim stuck terminating; the first sweep (at 0) starts its time."""
    g = pod("g", 8, "a")
    booked, other = booking_with_victim(engine, names, g)
    engine.apply_pod(replace(victim_on(engine, booked), grace_period_seconds=GRACE, terminating=True))
    assert not filter_offered(engine, g, [other]).failed
    assert engine.expire_bookings(0.0) == []
    return booked, other


def lapses_at(engine: HivedEngine, names: list[str], *, margin: float) -> None:
    booked, other = kept_until(engine, names)
    engine.expire_bookings(GRACE + margin - 0.5)
    assert not filter_offered(engine, pod("g", 8, "a"), [other]).failed and booked_node(engine, "g") == booked
    engine.expire_bookings(GRACE + margin)
    assert any(f"were kept {GRACE + margin:g} s" in note and "cells.victimExitMarginSeconds" in note
               for note in engine.allocator.anomalies)
    assert list(filter_offered(engine, pod("g", 8, "a"), [other]).failed) == [other]


def test_the_configured_margin_bounds_the_wait():
    engine, names = full_node_pair(victimExitMarginSeconds=5)
    assert engine.expiry.limits.victim_exit_margin_seconds == 5
    lapses_at(engine, names, margin=5)


def test_the_margin_defaults_to_60_seconds():
    engine, names = full_node_pair()
    lapses_at(engine, names, margin=60)


def test_a_live_reload_changes_the_margin():
    engine, names = full_node_pair()
    vcs = {"a": [{"cellType": "V100-NODE", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 1}]}
    engine.reconfigure({"virtualClusters": vcs, "victimExitMarginSeconds": 0})
    lapses_at(engine, names, margin=0)


@pytest.mark.parametrize("value", [-1, "soon", float("inf"), 3601])
def test_a_bad_margin_is_refused_naming_the_field(value: object):
    with pytest.raises(ConfigError) as refused:
        parse_cells_schema({"victimExitMarginSeconds": value}, prefix="cells")
    message = str(refused.value)
    assert message.startswith("cells.victimExitMarginSeconds: ") and "not a known field" not in message
