"""HiveD's inter-tenant cell exchange (../../../../shared/papers/hived.txt §3.3, Algorithm 2), as a
pure core: offers and requests (``model``), which offers qualify for a request (``qualify``),
the balanced cell exchange arbiter (``arbiter``), the quota move with its feasibility proof and
the plan for the window's start and end (``quota``), refusal of bad input (``validation``), and
the CellOffer / CellRequest objects of charts/cellfit/crds/ read into offers and requests
(``resource``). No I/O, no clock: times are arguments. See "Cell exchange" in ../README.md.
"""

from scheduler.cells.exchange.arbiter import Admit, Match, Matching, Refused, Unmatched, do_matching
from scheduler.cells.exchange.model import CellCatalog, Cells, CellSize, Offer, Request, Window, cells_of, describe_cells
from scheduler.cells.exchange.qualify import disqualification, packing_problem
from scheduler.cells.exchange.quota import (
    DEFAULT_RETURN_GRACE_SECONDS,
    QuotaProof,
    WindowPlan,
    project,
    reconfiguration,
    window_plan,
)
from scheduler.cells.exchange.resource import parse_offer, parse_request, rfc3339
from scheduler.cells.exchange.validation import namespace_virtual_cluster, offer_problems, request_problems

__all__ = [
    "DEFAULT_RETURN_GRACE_SECONDS",
    "Admit",
    "CellCatalog",
    "CellSize",
    "Cells",
    "Match",
    "Matching",
    "Offer",
    "QuotaProof",
    "Refused",
    "Request",
    "Unmatched",
    "Window",
    "WindowPlan",
    "cells_of",
    "describe_cells",
    "disqualification",
    "do_matching",
    "namespace_virtual_cluster",
    "offer_problems",
    "packing_problem",
    "parse_offer",
    "parse_request",
    "project",
    "reconfiguration",
    "request_problems",
    "rfc3339",
    "window_plan",
]
