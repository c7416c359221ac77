"""deploy/priority-classes.yaml, which the estimator's refusal message names for a cluster without
the chart, holds the chart's PriorityClasses as the chart renders them (deploy/rendered), only
without Helm's labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def priority_classes(path: Path) -> dict[str, dict[str, Any]]:
    classes = {}
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "PriorityClass":
            doc["metadata"].pop("labels", None)
            classes[doc["metadata"]["name"]] = doc
    return classes


def test_the_manifest_holds_the_chart_s_classes() -> None:
    manifest = priority_classes(ROOT / "deploy" / "priority-classes.yaml")
    assert manifest == priority_classes(ROOT / "deploy" / "rendered" / "cellfit.yaml")
    assert {"cellfit-trial", "cellfit-best-effort", "cellfit-opportunistic", "cellfit-resumed", "cellfit-sampling"} <= set(manifest)
