"""The cells summary (startup log, inspect) when no VC can be served says so, not an empty list
("virtual clusters: ; not served: vc-a", seen live by user23b)."""

from __future__ import annotations

from scheduler.cells import HivedEngine
from tests.cells.test_discovered_names import big


def test_a_summary_with_no_vc_served_says_none_served() -> None:
    engine = HivedEngine.from_config({"virtualClusters": {"vc-a": [{"cellType": "H100-NODE", "count": 1}]}}, nodes=big(1))
    assert "; virtual clusters: none served; not served: vc-a" in engine.summary, engine.summary
