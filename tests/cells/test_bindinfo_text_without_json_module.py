"""The bind-info annotation is written by msgspec, not by the json module, whenever json would
escape nothing (one a binding, ~1/15 of json.dumps' time), and its text is json.dumps' exactly,
whatever the names hold."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from scheduler.cells import HivedEngine, bindinfo
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

_ALPHABET = "az09-./_:@#" + '"\\' + "\x00\x1f\x7f" + "é€\u2028\U0001f600"


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _name(rng: random.Random) -> str:
    plain = rng.random() < 0.5
    return "".join(rng.choice(_ALPHABET[:11] if plain else _ALPHABET) for _ in range(rng.randint(1, 12)))


def _data(rng: random.Random) -> dict[str, Any]:
    """A bind-info's shape: its slot, names and numbers, and perhaps a gang's placements."""
    def slot() -> dict[str, Any]:
        return {"node": _name(rng), "gpuIndices": tuple(rng.sample(range(8), rng.randint(1, 8))),
                "vcCell": rng.choice([None, _name(rng)])}

    data: dict[str, Any] = {"version": 1, **slot(), "vc": _name(rng), "priority": rng.choice(["guaranteed", "opportunistic"]),
                            "cellType": _name(rng), "cell": rng.choice([None, _name(rng)]), "cells": [_name(rng) for _ in range(3)]}
    if rng.random() < 0.5:
        data["gang"] = {"key": _name(rng), "name": _name(rng), "size": rng.randint(1, 64),
                        "placements": [slot() for _ in range(rng.randint(1, 4))]}
    return data


@pytest.mark.parametrize("seed", range(200))
def test_the_text_is_json_dumps_text(seed: int) -> None:
    data = _data(random.Random(seed))
    assert bindinfo._compact_sorted_json(data) == _json_text(data)


def test_a_binding_is_encoded_without_the_json_module(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = HivedEngine.from_config(rack_cluster(2, 4, vcs={"a": [{"cellType": "V100-RACK", "count": 2}]}))
    for name in node_names(2, 4):
        engine.apply_node(node(name))
    assert schedule(engine, pod("p0", 2), node_names(2, 4)) is not None
    booking = engine.allocator.by_pod["p0"]
    expected = bindinfo.encode(booking)

    def refused(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("json.dumps called")

    monkeypatch.setattr(json, "dumps", refused)  # the module bindinfo calls it in
    assert bindinfo.encode(booking) == expected
    assert bindinfo.decode(expected).node == booking.node
