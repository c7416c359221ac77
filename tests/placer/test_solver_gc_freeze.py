"""The AlloX solver process freezes what its first decision loaded out of garbage collections
(placer/solver_wire.py, scheduler/extender/gc_tuning.py says why), once; a process that is not a
child (the parent deciding in process, tests) freezes nothing."""

from __future__ import annotations

import gc
import multiprocessing
import random
from concurrent.futures import ProcessPoolExecutor
from typing import Iterator

import pytest

from placer.solver_wire import ChildInputs, SolverSession, decide_encoded
from tests.placer.test_solver_wire import random_inputs


@pytest.fixture
def child() -> Iterator[ProcessPoolExecutor]:
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


def test_the_solver_process_freezes_once_after_its_first_decision(child: ProcessPoolExecutor):
    session = SolverSession()
    rng = random.Random(7)
    frozen_at_start = child.submit(gc.get_freeze_count).result()
    assert session.answer(child.submit(decide_encoded, session.request(random_inputs(rng))).result()) is not None
    frozen_after_first = child.submit(gc.get_freeze_count).result()
    session.answer(child.submit(decide_encoded, session.request(random_inputs(rng))).result())
    frozen_after_second = child.submit(gc.get_freeze_count).result()
    assert frozen_at_start == 0
    assert frozen_after_first > 0
    assert frozen_after_second <= frozen_after_first  # not frozen again: what later passes make stays collectable


def test_deciding_outside_a_child_freezes_nothing():
    gc.unfreeze()
    session = SolverSession()
    decide_encoded(session.request(random_inputs(random.Random(7))), ChildInputs())
    assert gc.get_freeze_count() == 0
