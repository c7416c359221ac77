"""decide()'s inputs and its decision as msgpack, for the solver process (``allox.solverProcess``).

Pickling them was as costly as deciding: at 1,000 queued Jobs the round trip of a pass's inputs
(the waiting and running Jobs, frozen dataclasses with their demands) and its decision took
22 ms of CPU with a fifth of the machines busy and 43 ms on a full cluster, beside 16-19 and
35-50 ms for decide itself. msgspec writes and reads the same values in 7 and 11 ms, and the
child's ``decide`` gets equal values (tests/placer/test_controller.py compares the decisions).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import msgspec

from scheduler.matching.admission import AdmissionDecision, AdmissionPolicy, RunningJob, WaitingJob, decide
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity


class DecideInputs(msgspec.Struct, frozen=True, kw_only=True):
    """The keyword arguments the placer controller gives :func:`decide`."""

    now: float
    waiting: list[WaitingJob]
    running: list[RunningJob]
    free_nodes: list[NodeResources]
    capacity: Capacity
    alpha: float
    policy: AdmissionPolicy
    reserved_cpu_per_gpu: float
    allox_plus_timeout: float = math.inf
    omega_grid_seconds: float = 60.0
    gpu_pools: dict[str, int] | None = None


_ENCODER = msgspec.msgpack.Encoder()
_INPUTS = msgspec.msgpack.Decoder(DecideInputs)
_DECISION = msgspec.msgpack.Decoder(AdmissionDecision)


def encode_inputs(inputs: Mapping[str, Any]) -> bytes:
    return _ENCODER.encode(DecideInputs(**inputs))


def decide_encoded(payload: bytes) -> bytes:
    """In the solver process: the inputs read, decided, the decision written."""
    inputs = _INPUTS.decode(payload)
    return _ENCODER.encode(decide(**{name: getattr(inputs, name) for name in inputs.__struct_fields__}))


def decode_decision(payload: bytes) -> AdmissionDecision:
    return _DECISION.decode(payload)
