"""The CellOffer and CellRequest CRDs (charts/cellfit/crds/): valid CustomResourceDefinitions for
the Kubernetes releases the e2e suite runs on, and a schema that accepts what the exchange's core
reads and refuses, naming the same field, what it refuses. (Helm renders crds/ only with
--include-crds, so tests/test_chart_offline.py's render checks never see them; this does.)"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from scheduler.cells.config import parse_cells_config
from scheduler.cells.exchange import CellCatalog, offer_problems, parse_offer, parse_request, request_problems
from tests.cells.helpers import rack_cluster

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "charts" / "cellfit" / "crds"


def _e2e_kube_versions() -> tuple[str, ...]:
    found = {}
    for line in (ROOT / "e2e" / "cluster" / "versions.env").read_text().splitlines():
        key, _, value = line.partition("=")
        if key in ("KUBE_VERSION_NEWEST", "KUBE_VERSION_OLDEST"):
            found[key] = value.strip().strip('"').lstrip("v")
    return tuple(found.values())


def crd(kind: str) -> dict[str, Any]:
    (doc,) = [d for path in sorted(CRDS.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d and d["spec"]["names"]["kind"] == kind]
    return doc


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The CRD's schema as the API server applies it to a kubectl apply: unknown fields are
    refused (kubectl's default field validation is Strict), so objects allow no other keys."""
    schema = copy.deepcopy(schema)
    stack = [schema]
    while stack:
        node = stack.pop()
        if node.get("type") == "object" and "properties" in node:
            node["additionalProperties"] = False
        stack.extend(node.get("properties", {}).values())
        if "items" in node:
            stack.append(node["items"])
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def schema_errors(kind: str, obj: dict[str, Any]) -> list[str]:
    schema = _strict(crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    return sorted(".".join(str(p) for p in e.absolute_path) for e in validator.iter_errors(obj))


def resource(kind: str, cells: Any, start: str = "2026-11-26T10:00:00Z", end: str = "2026-11-26T20:00:00Z") -> dict[str, Any]:
    return {
        "apiVersion": "cellfit.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "vision"},
        "spec": {"cells": cells, "window": {"start": start, "end": end}},
    }


CONFIG = parse_cells_config(rack_cluster(1, 4, vcs={"vision": [{"cellType": "V100-NODE", "count": 2}], "nlp": [{"cellType": "V100-NODE", "count": 2}]}))
CATALOG = CellCatalog(CONFIG.topology.cell_types)


def core_problems(kind: str, obj: dict[str, Any]) -> list[str]:
    parse = parse_offer if kind == "CellOffer" else parse_request
    parsed, problems = parse(obj, vc="vision", posted=1_795_684_800.0)  # 2026-11-26T09:20:00Z, before the windows
    if parsed is None:
        return problems
    if kind == "CellOffer":
        return offer_problems(offer=parsed, catalog=CATALOG, virtual_clusters=CONFIG.virtual_clusters, posted_offers=[])
    return request_problems(request=parsed, catalog=CATALOG, virtual_clusters=CONFIG.virtual_clusters)


@pytest.mark.parametrize("version", _e2e_kube_versions())
@pytest.mark.parametrize("path", sorted(CRDS.glob("*.yaml")), ids=lambda p: p.name)
def test_crds_are_valid_custom_resource_definitions(path: Path, version: str):
    import kubernetes_validate

    (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    kubernetes_validate.validate(doc, version, strict=True)
    assert path.name == doc["metadata"]["name"] + ".yaml"


def test_two_namespaced_kinds_with_a_status_subresource():
    kinds = sorted(d["spec"]["names"]["kind"] for path in CRDS.glob("*.yaml") for d in yaml.safe_load_all(path.read_text()) if d)
    assert kinds == ["CellOffer", "CellRequest"]
    for kind, plural in (("CellOffer", "celloffers"), ("CellRequest", "cellrequests")):
        doc = crd(kind)
        assert doc["metadata"]["name"] == f"{plural}.cellfit.io"
        assert (doc["spec"]["group"], doc["spec"]["scope"], doc["spec"]["names"]["plural"]) == ("cellfit.io", "Namespaced", plural)
        (version,) = doc["spec"]["versions"]
        assert version["name"] == "v1alpha1" and version["storage"] and version["subresources"] == {"status": {}}


def _types_everywhere(node: dict[str, Any], path: str) -> list[str]:
    """A structural schema gives every field a type (the API server refuses the CRD otherwise)."""
    missing = [] if "type" in node else [path]
    for name, child in node.get("properties", {}).items():
        missing += _types_everywhere(child, f"{path}.{name}")
    if "items" in node:
        missing += _types_everywhere(node["items"], f"{path}[]")
    return missing


@pytest.mark.parametrize("kind", ["CellOffer", "CellRequest"])
def test_schema_is_structural_and_lists_are_keyed_by_cell_type(kind):
    schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _types_everywhere(schema, "") == []
    cells = schema["properties"]["spec"]["properties"]["cells"]
    assert cells["x-kubernetes-list-type"] == "map" and cells["x-kubernetes-list-map-keys"] == ["cellType"]
    assert cells["items"]["required"] == ["cellType", "count"]  # a list-map key must be required


@pytest.mark.parametrize("kind", ["CellOffer", "CellRequest"])
def test_good_objects_pass_the_schema_and_the_core(kind):
    mixed = [{"cellType": "V100-NODE", "count": 1}] if kind == "CellOffer" else [{"cellType": "V100", "count": 4}, {"cellType": "V100-SWITCH", "count": 2}]
    for cells in ([{"cellType": "V100-NODE", "count": 2}], mixed):
        obj = resource(kind, cells)
        assert schema_errors(kind, obj) == []
        assert core_problems(kind, obj) == []


@pytest.mark.parametrize("kind", ["CellOffer", "CellRequest"])
@pytest.mark.parametrize(
    "cells, start, end, field, schema_path",
    [
        ([{"cellType": "V100-NODE", "count": 0}], "2026-11-26T10:00:00Z", "2026-11-26T20:00:00Z", "spec.cells[0].count", "spec.cells.0.count"),
        ([], "2026-11-26T10:00:00Z", "2026-11-26T20:00:00Z", "spec.cells", "spec.cells"),
        # An unknown field: jsonschema names the object holding it (the API server names the field).
        ([{"cellType": "V100-NODE", "count": 1, "gpus": 8}], "2026-11-26T10:00:00Z", "2026-11-26T20:00:00Z", "spec.cells[0].gpus", "spec.cells.0"),
        ([{"cellType": "V100-NODE", "count": 1}], "today", "2026-11-26T20:00:00Z", "spec.window.start", "spec.window.start"),
    ],
)
def test_bad_objects_are_refused_by_the_schema_and_by_the_core_naming_the_same_field(kind, cells, start, end, field, schema_path):
    obj = resource(kind, cells, start, end)
    assert schema_errors(kind, obj) == [schema_path]
    assert [p.split(":")[0] for p in core_problems(kind, obj)] == [field]


def test_what_only_the_core_can_refuse():
    # The schema cannot know the cell types, the VC's quota or the order of the window's ends.
    for cells, start, end, problem in [
        ([{"cellType": "H100", "count": 1}], "2026-11-26T10:00:00Z", "2026-11-26T20:00:00Z", "spec.cells[0].cellType: unknown cell type 'H100'"),
        ([{"cellType": "V100-NODE", "count": 3}], "2026-11-26T10:00:00Z", "2026-11-26T20:00:00Z", "spec.cells[0].count: virtual cluster 'vision' holds 2"),
        ([{"cellType": "V100-NODE", "count": 1}], "2026-11-26T20:00:00Z", "2026-11-26T10:00:00Z", "spec.window.end: must be after spec.window.start"),
    ]:
        obj = resource("CellOffer", cells, start, end)
        assert schema_errors("CellOffer", obj) == []
        (found,) = core_problems("CellOffer", obj)
        assert found.startswith(problem), found


def test_helm_installs_the_crds_and_the_templates_leave_them_out():
    from tests.test_chart_offline import render

    on_disk = sorted((d["metadata"]["name"], yaml.safe_dump(d)) for p in CRDS.glob("*.yaml") for d in yaml.safe_load_all(p.read_text()) if d)
    installed = sorted((d["metadata"]["name"], yaml.safe_dump(d)) for d in render("--include-crds") if d["kind"] == "CustomResourceDefinition")
    assert installed == on_disk and len(on_disk) == 2
    # helm template without --include-crds (deploy/rendered, upgrades) has none: Helm never upgrades them.
    assert not [d for d in render() if d["kind"] == "CustomResourceDefinition"]
