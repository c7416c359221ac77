"""The chart's kube-scheduler probes with several replicas (charts/cellfit; helm from
tests/test_chart_offline.py): a kube-scheduler whose cellfit died must not keep the Lease, so its
probes ask cellfit's /healthz/kube-scheduler, which cellfit's configuration points at that very
kube-scheduler's /healthz; with one replica (restarting it would only add the kubelet's backoff)
or without the metrics listener (the kubelet cannot reach cellfit then), its own /healthz."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from scheduler.config import parse_settings
from scheduler.constants import PATH_HEALTHZ_KUBE_SCHEDULER
from tests.test_chart_offline import cellfit_config_text, containers, render

OWN_HEALTHZ = {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
PAIRED_HEALTHZ = {"path": PATH_HEALTHZ_KUBE_SCHEDULER, "port": "metrics"}


def kube_scheduler(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return containers(docs)["kube-scheduler"]


def test_with_two_replicas_kube_scheduler_lives_and_starts_by_cellfits_paired_check() -> None:
    docs = render("--set", "replicaCount=2")
    scheduler = kube_scheduler(docs)
    assert scheduler["livenessProbe"]["httpGet"] == PAIRED_HEALTHZ
    assert scheduler["startupProbe"]["httpGet"] == PAIRED_HEALTHZ
    # As long as cellfit's own start may take (HiveD discovery while the API is away).
    cellfit = containers(docs)["cellfit"]
    startup = scheduler["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= cellfit["startupProbe"]["periodSeconds"] * cellfit["startupProbe"]["failureThreshold"]
    # cellfit's answer comes within its own check's timeout, before the probe's.
    assert scheduler["livenessProbe"]["timeoutSeconds"] > 3


def test_cellfit_asks_the_kube_scheduler_of_its_own_pod_on_the_port_it_serves() -> None:
    docs = render("--set", "replicaCount=2", "--set", "kubeScheduler.securePort=10300")
    settings = parse_settings(cellfit_config_text(docs))
    assert settings.server.paired_scheduler_health_url == "https://127.0.0.1:10300/healthz"
    assert "--secure-port=10300" in kube_scheduler(docs)["command"]
    metrics_port = next(p["containerPort"] for p in containers(docs)["cellfit"]["ports"] if p["name"] == "metrics")
    assert settings.server.metrics_port == metrics_port


@pytest.mark.parametrize(
    "values",
    [
        ("--set", "replicaCount=1"),
        ("--set", "replicaCount=2", "--set", "kubeScheduler.livenessFollowsCellfit=false"),
        ("--set", "replicaCount=2", "--set", "cellfit.metrics.enabled=false"),
    ],
    ids=["one replica", "switched off", "no metrics listener"],
)
def test_otherwise_kube_scheduler_keeps_its_own_healthz(values: tuple[str, ...]) -> None:
    scheduler = kube_scheduler(render(*values))
    assert scheduler["livenessProbe"]["httpGet"] == OWN_HEALTHZ
    assert "startupProbe" not in scheduler


def test_without_the_metrics_listener_cellfits_config_names_no_paired_url() -> None:
    server = yaml.safe_load(cellfit_config_text(render("--set", "cellfit.metrics.enabled=false")))["server"]
    assert "pairedSchedulerHealthUrl" not in server
