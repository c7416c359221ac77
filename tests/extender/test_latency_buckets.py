"""The verbs' latency histogram reaches past kube-scheduler's extender timeout: a bind waiting
on a loaded API server (over 1.6 s at the median in a 1,000-pod burst on the development
machine) fell into +Inf when the buckets ended at 1.6 s, and every quantile read 1.6 s."""

from __future__ import annotations

from pathlib import Path

import yaml
from prometheus_client import generate_latest

from scheduler.extender.metrics import LATENCY_BUCKETS, ExtenderMetrics

CHART_VALUES = Path(__file__).resolve().parents[2] / "charts" / "cellfit" / "values.yaml"


def _seconds(duration: str) -> float:
    assert duration.endswith("s"), duration
    return float(duration[:-1])


def test_the_buckets_reach_past_the_charts_extender_timeout() -> None:
    values = yaml.safe_load(CHART_VALUES.read_text())
    timeout = _seconds(values["kubeScheduler"]["extender"]["httpTimeout"])
    assert max(LATENCY_BUCKETS) > timeout


def test_a_bind_of_two_and_a_half_seconds_lands_in_a_finite_bucket() -> None:
    metrics = ExtenderMetrics()
    metrics.request_duration.labels("bind").observe(2.5)
    text = generate_latest(metrics.registry).decode()
    counted = [line for line in text.splitlines()
               if line.startswith('cellfit_extender_request_duration_seconds_bucket{') and 'verb="bind"' in line
               and not line.endswith(" 0.0")]
    first = counted[0]
    assert 'le="+Inf"' not in first
    upper = float(first.split('le="')[1].split('"')[0])
    assert 2.5 <= upper <= 5.0
