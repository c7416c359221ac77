"""The cell exchange's examples (deploy/examples/cell-exchange/) are what the chart and the core
accept: the offer and the request pass the CRDs' schemas, and a round over them, in the labelled
namespaces, matches them (a spatial exchange: eight V100 out of one V100-NODE); the tenants'
RoleBindings name the chart's trader ClusterRole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scheduler.cells.config import parse_cells_config
from scheduler.cells.exchange import CellCatalog, Posting, exchange_round
from scheduler.cells.topology import Topology
from tests.cells.helpers import rack_cluster
from tests.cells.test_exchange_crd import schema_errors

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "deploy" / "examples" / "cell-exchange"
RENDERED = ROOT / "deploy" / "rendered" / "cellfit.yaml"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def seconds(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_the_examples_pass_the_schemas_and_match_in_one_round():
    (offer,) = docs("offer.yaml")
    (request,) = docs("request.yaml")
    assert schema_errors("CellOffer", offer) == [] and schema_errors("CellRequest", request) == []
    tenants = docs("tenants.yaml")
    namespaces = {d["metadata"]["name"]: d["metadata"]["labels"] for d in tenants if d["kind"] == "Namespace"}
    config = parse_cells_config(rack_cluster(1, 4, vcs={"vision": [{"cellType": "V100-NODE", "count": 2}],
                                                        "speech": [{"cellType": "V100-NODE", "count": 1}]}))
    posted = seconds(offer["spec"]["window"]["start"]) - 3600
    result = exchange_round(
        offers=[Posting(kind="offer", obj=offer, posted=posted)], requests=[Posting(kind="request", obj=request, posted=posted)],
        namespaces=namespaces, base=config.virtual_clusters, catalog=CellCatalog(config.topology.cell_types),
        topology=Topology(config.topology), entries=[], now=posted, grace_seconds=300,
    )
    (entry,) = result.new_entries
    assert (entry.lender, entry.borrower, entry.gpus) == ("vision", "speech", 8)
    assert {o.phase for o in result.outcomes} == {"Matched"}


def test_the_tenants_bind_the_charts_trader_role_in_their_own_namespace():
    rendered = [d for d in yaml.safe_load_all(RENDERED.read_text()) if d]
    (trader,) = [d["metadata"]["name"] for d in rendered if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-cell-trader")]
    tenants = docs("tenants.yaml")
    labelled = {d["metadata"]["name"] for d in tenants if d["kind"] == "Namespace" and d["metadata"]["labels"].get("cellfit.io/virtual-cluster")}
    bindings = [d for d in tenants if d["kind"] == "RoleBinding"]
    assert {b["metadata"]["namespace"] for b in bindings} == labelled
    assert all(b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": trader} for b in bindings)
