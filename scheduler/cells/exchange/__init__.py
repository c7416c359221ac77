"""HiveD's inter-tenant cell exchange (../../../../shared/papers/hived.txt §3.3, Algorithm 2), as a
pure core: offers and requests (``model``), which offers qualify for a request (``qualify``),
the balanced cell exchange arbiter (``arbiter``), the quota move with its feasibility proof and
the plan for the window's start and end (``quota``), refusal of bad input (``validation``), and
the CellOffer / CellRequest objects of charts/cellfit/crds/ read into offers and requests
(``resource``), the durable record of matches and surplus (``ledger``), which matches count in the surplus
(``charges``), what a round holds while
the ledger does not read whole (``holds``), the matches a lost ledger took rebuilt from the
objects' statuses (``rebuild``), one round over the posted
objects with each one's status (``board``), and the pods to preempt when a drain's grace ends
(``preemption``). No I/O, no clock: times are arguments. See "Cell exchange" in ../README.md.
"""

from scheduler.cells.exchange import ledger
from scheduler.cells.exchange.arbiter import Admit, Match, Matching, Refused, Unmatched, do_matching
from scheduler.cells.exchange.board import Outcome, Round, exchange_round, phase_of
from scheduler.cells.exchange.ledger import Entry
from scheduler.cells.exchange.posting import Posting
from scheduler.cells.exchange.model import CellCatalog, Cells, CellSize, Offer, Request, Window, cells_of, describe_cells
from scheduler.cells.exchange.qualify import disqualification, packing_problem
from scheduler.cells.exchange.quota import (
    DEFAULT_RETURN_GRACE_SECONDS,
    Applicable,
    QuotaProof,
    WindowPlan,
    applicable,
    project,
    reconfiguration,
    schedule_problems,
    window_plan,
)
from scheduler.cells.exchange.preemption import Preemption, draining_pods, due_preemptions
from scheduler.cells.exchange.resource import parse_offer, parse_request, rfc3339
from scheduler.cells.exchange.validation import namespace_virtual_cluster, offer_problems, request_problems

__all__ = [
    "DEFAULT_RETURN_GRACE_SECONDS",
    "Admit",
    "Applicable",
    "CellCatalog",
    "CellSize",
    "Entry",
    "Cells",
    "Match",
    "Matching",
    "Offer",
    "Outcome",
    "Posting",
    "Preemption",
    "QuotaProof",
    "Refused",
    "Request",
    "Round",
    "Unmatched",
    "Window",
    "WindowPlan",
    "cells_of",
    "describe_cells",
    "disqualification",
    "applicable",
    "draining_pods",
    "due_preemptions",
    "exchange_round",
    "ledger",
    "do_matching",
    "namespace_virtual_cluster",
    "offer_problems",
    "packing_problem",
    "parse_offer",
    "parse_request",
    "phase_of",
    "project",
    "reconfiguration",
    "request_problems",
    "rfc3339",
    "schedule_problems",
    "window_plan",
]
