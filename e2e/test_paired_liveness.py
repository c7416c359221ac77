"""kube-scheduler's liveness with several replicas, on a real kube-scheduler (issue: hardening).

A leading kube-scheduler whose cellfit died kept its Lease, and every pod of the profile waited
while the standby, whose cellfit worked, stood by. With ``replicaCount`` above 1 the chart
points kube-scheduler's startup and liveness probes at cellfit's ``/healthz/kube-scheduler``
(metrics listener), and cellfit's configuration at that kube-scheduler's own ``/healthz``
(tests/test_chart_paired_liveness.py checks the render). Here cellfit runs with the chart's
configuration, its ``pairedSchedulerHealthUrl`` moved to the port of the kube-scheduler started
beside it (a free one: this machine is shared), and that kube-scheduler is the real binary with
the chart's KubeSchedulerConfiguration, serving its own certificate. What the kubelet would see
is asked over HTTP as the kubelet asks it: 200 while kube-scheduler is healthy, 503 with the
reason once it is gone, 200 again when it is back. The kubelet itself (it would restart
kube-scheduler, which then releases its Lease) is not part of this control plane: KWOK plays
the nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml

from chart_support import (
    EXTENDER_ONLY_SA,
    CellfitProcess,
    Cluster,
    KubeSchedulerProcess,
    Release,
    ensure_release,
    local_scheduler_config,
    wait_for,
)
from scheduler.constants import PATH_HEALTHZ_KUBE_SCHEDULER
from tests.support.ports import free_port

pytestmark = pytest.mark.e2e


class Pod:
    """The chart's two containers, cellfit told where its kube-scheduler's /healthz is."""

    def __init__(self, cluster: Cluster, release: Release, workdir: Path) -> None:
        scheduler_port = free_port()
        config = yaml.safe_load(release.cellfit_config_text)
        chart_url = config["server"]["pairedSchedulerHealthUrl"]
        assert chart_url.startswith("https://127.0.0.1:") and chart_url.endswith("/healthz"), chart_url
        config["server"]["pairedSchedulerHealthUrl"] = f"https://127.0.0.1:{scheduler_port}/healthz"
        self.cellfit = CellfitProcess(
            yaml.safe_dump(config, sort_keys=False),
            cluster.token_kubeconfig(EXTENDER_ONLY_SA, release.namespace, workdir / "paired-cellfit.kubeconfig"),
            workdir, name="paired-cellfit",
        )
        self.scheduler = KubeSchedulerProcess(
            cluster.env["CELLFIT_E2E_KUBE_SCHEDULER"],
            local_scheduler_config(release, cellfit_port=self.cellfit.port),
            cluster.token_kubeconfig(release.service_account, release.namespace, workdir / "paired-scheduler.kubeconfig"),
            workdir, name="paired-kube-scheduler",
        )
        self.scheduler.secure_port = scheduler_port  # the port cellfit's configuration names

    def probe(self) -> httpx.Response:
        """What the kubelet's probe gets (its timeoutSeconds: 5)."""
        return httpx.get(self.cellfit.metrics_url + PATH_HEALTHZ_KUBE_SCHEDULER, timeout=5)


@pytest.fixture(scope="module")
def pod(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pod]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    paired = Pod(cluster, release, tmp_path_factory.mktemp("paired-liveness"))
    try:
        paired.cellfit.start()
        paired.scheduler.start()
        paired.scheduler.wait_healthy()
        yield paired
    finally:
        paired.scheduler.stop()
        paired.cellfit.stop()


def test_the_probe_passes_while_the_kube_scheduler_beside_cellfit_is_healthy(pod: Pod) -> None:
    answer = pod.probe()
    assert answer.status_code == 200, answer.text
    assert answer.json()["reason"] == f"kube-scheduler's https://127.0.0.1:{pod.scheduler.secure_port}/healthz answered HTTP 200"


def test_the_probe_fails_once_that_kube_scheduler_is_gone_and_passes_when_it_is_back(pod: Pod) -> None:
    pod.scheduler.stop()
    answer = pod.probe()
    assert answer.status_code == 503, answer.text
    assert answer.json()["status"] == "failing" and "cannot be reached" in answer.json()["reason"]
    # cellfit itself keeps serving meanwhile: only the probe of its kube-scheduler fails.
    assert httpx.get(pod.cellfit.metrics_url + "/healthz", timeout=5).status_code == 200
    pod.scheduler.start()
    pod.scheduler.wait_healthy()
    wait_for(lambda: pod.probe().status_code == 200, 30, "the probe to pass again once kube-scheduler is back")
