"""Running the same call on the matching's C extensions and on NumPy alone, for the tests that
compare them (test_matching_native_*.py): a module's ``native`` is the extension it uses, None
for NumPy."""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any, Callable

import pytest

from scheduler.matching.admission import decide
from scheduler.matching.allox import AlloxScheduler
from tests.matching.test_matching_carry_empty import burst
from tests.matching.test_matching_vacancy import live_state


def both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch, *modules: ModuleType, attribute: str = "native") -> tuple[Any, Any]:
    """``call()`` with ``modules``' extensions in use, then with none of them (``attribute``:
    the name a module reads its extension by, for one step, e.g. allox's ``walk``)."""
    with monkeypatch.context() as patched:
        for module in modules:
            patched.setattr(module, attribute, module._built)
        in_c = call()
    with monkeypatch.context() as patched:
        for module in modules:
            patched.setattr(module, attribute, None)
        in_numpy = call()
    return in_c, in_numpy


def assert_decisions_alike(rng: random.Random, monkeypatch: pytest.MonkeyPatch, *modules: ModuleType, attribute: str = "native") -> None:
    """Algorithm 2's starts on random bursts (α 0.1-0.3, ties in half), then admission's
    decisions on live states with and without pools (α 1 and 0.1, AlloX+), the same both ways."""
    for _ in range(40):
        arguments, alpha = burst(rng)
        in_c, in_numpy = both_ways(lambda: AlloxScheduler(alpha=alpha).on_machine_free(**arguments), monkeypatch, *modules, attribute=attribute)
        assert [(a.job.name, a.machine.name, a.start) for a in in_c] == [(a.job.name, a.machine.name, a.start) for a in in_numpy]
    for pools in (False, True):
        for _ in range(8):
            state = live_state(rng, pools=pools)
            for options in ({"alpha": 1.0}, {"alpha": 0.1}, {"policy": "allox+", "alpha": 0.1}):
                in_c, in_numpy = both_ways(lambda: decide(**state, **options), monkeypatch, *modules,  # type: ignore[arg-type]
                                           attribute=attribute)
                assert in_c == in_numpy
