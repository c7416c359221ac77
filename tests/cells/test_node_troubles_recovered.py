"""user26 #8: cellfit logged a WARNING "virtual cluster vc-a's cells on node N cannot be bound:
the node is cordoned" when a node went bad, and nothing when it came back: an operator reading
the log could not tell the trouble was over. Now, once per VC told, an info line says its cells
there can be bound again, and what the node was."""

from __future__ import annotations

import logging

import pytest

from tests.cells.helpers import node
from tests.cells.test_node_troubles import engine_with_a_half_used_cell

LOGGER = "scheduler.cells.node_troubles"


def said(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def test_a_node_uncordoned_says_its_vcs_cells_can_be_bound_again_once(caplog: pytest.LogCaptureFixture) -> None:
    engine, used = engine_with_a_half_used_cell()
    caplog.set_level(logging.INFO, logger=LOGGER)
    engine.apply_node(node(used, unschedulable=True))
    engine.apply_node(node(used))
    engine.apply_node(node(used))  # a healthy node's next status says nothing more
    assert said(caplog) == [
        ("WARNING", f"virtual cluster vc-a's cells on node {used} cannot be bound: the node is cordoned"),
        ("INFO", f"virtual cluster vc-a's cells on node {used} can be bound again: the node is healthy again (it was cordoned)"),
    ]


def test_a_deleted_node_back_says_so(caplog: pytest.LogCaptureFixture) -> None:
    engine, used = engine_with_a_half_used_cell()
    caplog.set_level(logging.INFO, logger=LOGGER)
    engine.delete_node(used)
    engine.apply_node(node(used))
    assert said(caplog)[-1] == ("INFO", f"virtual cluster vc-a's cells on node {used} can be bound again: the node is back "
                                        "(it was deleted)")


def test_a_node_no_vc_was_told_of_says_nothing_when_it_recovers(caplog: pytest.LogCaptureFixture) -> None:
    engine, used = engine_with_a_half_used_cell()
    other = next(name for name in engine.topology.nodes if name != used)
    caplog.set_level(logging.INFO, logger=LOGGER)
    engine.apply_node(node(other, ready=False))
    engine.apply_node(node(other))
    assert not [line for level, line in said(caplog) if "can be bound again" in line]
