"""decide()'s inputs and decision through the solver process's msgpack: the child decides on
equal values, and the decision that comes back equals the one made in process."""

from __future__ import annotations

import math
import random

import pytest

from placer.solver_wire import decide_encoded, decode_decision, encode_inputs
from scheduler.matching.admission import RunningJob, WaitingJob, decide
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand


@pytest.mark.parametrize("seed", range(6))
def test_the_decision_through_msgpack_is_the_decision_in_process(seed: int) -> None:
    rng = random.Random(seed)
    now = 1_800_000_000.0
    demand = {"cpu": Demand(cpu=8, memory=16), "gpu": Demand(gpu=1, cpu=1, memory=8)}
    pools = {"vision": rng.randint(0, 3), "nlp": rng.randint(0, 3)} if seed % 2 else None
    waiting = [WaitingJob(key=f"ns/w{j}", user=f"u{j % 3}", arrival=now - rng.uniform(0, 600),
                          seconds={"cpu": rng.uniform(600, 6000), "gpu": rng.uniform(60, 600)}, demand=demand,
                          pods=rng.choice([1, 1, 1, 2]), pool=rng.choice([None, "vision", "nlp"]) if pools else None)
               for j in range(rng.randint(0, 30))]
    running = [RunningJob(key=f"ns/r{j}", user=f"u{j % 3}", kind=rng.choice(["cpu", "gpu"]), started=now - rng.uniform(0, 600),
                          seconds={"cpu": rng.uniform(600, 6000), "gpu": rng.uniform(60, 600)}, demand=demand)
               for j in range(rng.randint(0, 6))]
    inputs = {"now": now, "waiting": waiting, "running": running,
              "free_nodes": [NodeResources(name=f"n{i}", cpu=37.0, gpu=4, memory=512.0) for i in range(2)],
              "capacity": Capacity(cpu=74, gpu=8, memory=1024), "alpha": rng.choice([0.3, 1.0]),
              "policy": rng.choice(["allox", "allox+"]), "reserved_cpu_per_gpu": 1.0, "allox_plus_timeout": math.inf,
              "omega_grid_seconds": rng.choice([0.0, 60.0]), "gpu_pools": pools}
    assert decode_decision(decide_encoded(encode_inputs(inputs))) == decide(**inputs)
