"""The validating webhook in the real process, over HTTPS on the admission listener, with
AdmissionReviews as kube-apiserver writes them: warnings by default, refusals naming the field
with admission.rejectInvalid, and the virtual clusters of the configuration running now (a live
reload of the file is seen by the next review)."""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml

from scheduler.constants import ADMISSION_PODS_PATH, ADMISSION_VALIDATE_JOBS_PATH, ADMISSION_VALIDATE_PODS_PATH
from tests.integration.test_config_reload import RELOAD_SECONDS, TOPOLOGY, eventually
from tests.integration.test_metrics_listener import ROOT, _wait_ok
from tests.support.ports import free_port
from tests.support import kube_objects as k
from tests.support.admission_reviews import job, validating_review
from tests.support.configmap import MountedConfigMap
from tests.support.tls import make_serving_certificate

VISION = {"cellfit.io/virtual-cluster": "vision"}
ABC = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"}


def config_text(*, port: int, admission_port: int, tls: Any, reject: bool, vcs: tuple[str, ...]) -> str:
    return yaml.safe_dump({
        "server": {"port": port, "configReloadSeconds": RELOAD_SECONDS},
        "logging": {"format": "text"},
        "cells": {"topology": TOPOLOGY, "virtualClusters": {vc: [{"cellType": "A100-NODE", "count": 1}] for vc in vcs}},
        "admission": {"enabled": True, "host": "127.0.0.1", "port": admission_port, "certFile": str(tls.cert_file),
                      "keyFile": str(tls.key_file), "rejectInvalid": reject},
    })


class Webhook:
    """One ``cellfit serve --standalone`` with the webhook on, and an HTTPS client that trusts it
    as the API server does (the caBundle)."""

    def __init__(self, directory: Path, *, reject: bool) -> None:
        self.tls = make_serving_certificate(directory / "tls")
        self.port, self.admission_port = free_port(), free_port()
        self.reject = reject
        self.config = MountedConfigMap(directory / "config")
        self.write(vcs=("vision", "speech"))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "serve", "--standalone", "--config", str(self.config.path)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.client = httpx.Client(base_url=f"https://127.0.0.1:{self.admission_port}",
                                   verify=ssl.create_default_context(cafile=str(self.tls.ca_file)), timeout=10)

    def write(self, *, vcs: tuple[str, ...]) -> None:
        self.config.write(config_text(port=self.port, admission_port=self.admission_port, tls=self.tls, reject=self.reject, vcs=vcs))

    def review(self, path: str, body: dict[str, Any], **review: Any) -> dict[str, Any]:
        document = validating_review(body, **review)
        answer = self.client.post(path, content=k.dumps(document), headers={"Content-Type": "application/json"})
        assert answer.status_code == 200, answer.text
        result = answer.json()
        assert result["apiVersion"] == "admission.k8s.io/v1" and result["kind"] == "AdmissionReview"
        assert result["response"]["uid"] == document["request"]["uid"]
        return dict(result["response"])

    def metric(self, line: str) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        return float(next((row.rsplit(" ", 1)[1] for row in text.splitlines() if row.startswith(line)), "0"))

    def stop(self) -> str:
        self.client.close()
        self.process.terminate()
        return self.process.communicate(timeout=30)[0]


@pytest.fixture
def webhooks(tmp_path: Path) -> Iterator[tuple[Webhook, Webhook]]:
    """(warning, refusing): both started at once, each waited for."""
    warning, refusing = Webhook(tmp_path / "warn", reject=False), Webhook(tmp_path / "reject", reject=True)
    try:
        for served in (warning, refusing):
            _wait_ok(f"http://127.0.0.1:{served.port}/readyz", served.process)  # type: ignore[arg-type]
        yield warning, refusing
    finally:
        for served in (warning, refusing):
            served.stop()


@pytest.mark.slow
def test_a_pod_with_a_bad_gang_size_is_warned_about_or_refused_naming_the_field(webhooks):
    warning, refusing = webhooks
    bad = k.pod("train-x7k2q", gpus=2, labels=VISION, annotations=ABC)
    answered = warning.review(ADMISSION_VALIDATE_PODS_PATH, bad)
    assert answered == {"uid": answered["uid"], "allowed": True,
                        "warnings": ["cellfit: metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer"]}
    refused = refusing.review(ADMISSION_VALIDATE_PODS_PATH, bad)
    assert refused["allowed"] is False
    assert refused["status"] == {"message": "cellfit refuses this pod (admission.rejectInvalid): "
                                            "metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer"}
    assert refused["warnings"] == answered["warnings"]
    good = k.pod("train-x7k2q", gpus=2, labels=VISION, annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"})
    assert refusing.review(ADMISSION_VALIDATE_PODS_PATH, good).keys() == {"uid", "allowed"}
    # The pod-create (mutating) review beside it is unchanged: it never refuses a pod.
    mutated = refusing.client.post(ADMISSION_PODS_PATH, content=k.dumps(k.admission_review(bad)))
    assert mutated.status_code == 200 and mutated.json()["response"]["allowed"] is True
    assert warning.metric('cellfit_admission_validations_total{kind="pod",result="warned"}') == 1
    assert refusing.metric('cellfit_admission_validations_total{kind="pod",result="rejected"}') == 1
    assert refusing.metric('cellfit_admission_validations_total{kind="pod",result="valid"}') == 1


@pytest.mark.slow
def test_jobs_are_checked_on_create_and_refused_on_update_only_for_what_the_update_brings(webhooks):
    _, refusing = webhooks
    urgent = job("train", template_labels={**VISION, "cellfit.io/priority": "urgent"}, suspend=True)
    created = refusing.review(ADMISSION_VALIDATE_JOBS_PATH, urgent)
    assert created["allowed"] is False
    assert created["status"]["message"] == ("cellfit refuses this job (admission.rejectInvalid): spec.template.metadata.labels"
                                            "[cellfit.io/priority]: 'urgent' is not 'guaranteed' or 'opportunistic'")
    # Created while cellfit was away (failurePolicy Ignore): still labelled, scaled, deleted.
    labelled = yaml.safe_load(yaml.safe_dump(urgent))
    labelled["metadata"]["labels"]["team"] = "vision"
    updated = refusing.review(ADMISSION_VALIDATE_JOBS_PATH, labelled, operation="UPDATE", old=urgent)
    assert updated["allowed"] is True and len(updated["warnings"]) == 1
    mistaken = yaml.safe_load(yaml.safe_dump(labelled))
    # A key read on any Job (FitGpp's count; iterations and estimate are read only on an
    # interchangeable Job, so on this one they are only warned about).
    mistaken["metadata"]["annotations"]["cellfit.io/preemptions"] = "lots"
    refused = refusing.review(ADMISSION_VALIDATE_JOBS_PATH, mistaken, operation="UPDATE", old=labelled)
    assert refused["allowed"] is False
    assert refused["status"]["message"] == ("cellfit refuses this job (admission.rejectInvalid): "
                                            "metadata.annotations[cellfit.io/preemptions]: 'lots' is not a non-negative integer")
    # A body that is not a review of the path's kind: 400, which failurePolicy Ignore admits.
    wrong = refusing.client.post(ADMISSION_VALIDATE_JOBS_PATH, content=k.dumps(validating_review(k.pod("train-x7k2q"))))
    assert wrong.status_code == 400 and "this path reviews a Job, not a Pod" in wrong.json()["Error"]


@pytest.mark.slow
def test_the_virtual_clusters_are_the_running_configurations_after_a_live_reload(webhooks):
    warning, _ = webhooks
    nlp = k.pod("train-x7k2q", gpus=8, labels={"cellfit.io/virtual-cluster": "nlp"})
    assert warning.review(ADMISSION_VALIDATE_PODS_PATH, nlp)["warnings"] == [
        "cellfit: metadata.labels[cellfit.io/virtual-cluster]: unknown virtual cluster 'nlp' (known: speech, vision)"
    ]
    warning.write(vcs=("vision", "nlp"))
    eventually(lambda: "warnings" not in warning.review(ADMISSION_VALIDATE_PODS_PATH, nlp), what="nlp known after the reload",
               within=30)  # the file is checked every 0.2 s; parsing it takes seconds on a loaded machine
    speech = k.pod("train-x7k2q", gpus=8, labels={"cellfit.io/virtual-cluster": "speech"})
    assert warning.review(ADMISSION_VALIDATE_PODS_PATH, speech)["warnings"] == [
        "cellfit: metadata.labels[cellfit.io/virtual-cluster]: unknown virtual cluster 'speech' (known: nlp, vision)"
    ]


@pytest.mark.slow
def test_a_pod_or_job_another_scheduler_places_is_only_told_its_keys_are_unread(webhooks):
    # The API server calls the webhook for any object with a cellfit.io/ key: a team using the
    # default scheduler whose pods carry a stray cellfit label was warned, and refused under
    # rejectInvalid, about keys nothing reads.
    warning, refusing = webhooks
    theirs = k.pod("plain-x7k2q", gpus=2, labels=VISION, annotations=ABC)
    theirs["spec"]["schedulerName"] = "default-scheduler"
    unread = "cellfit: spec.schedulerName: 'default-scheduler' schedules this pod, not cellfit ('cellfit'): its cellfit.io/ labels and annotations are not read"
    for served in (warning, refusing):
        answered = served.review(ADMISSION_VALIDATE_PODS_PATH, theirs)
        assert answered["allowed"] is True and answered["warnings"] == [unread], answered
    del theirs["spec"]["schedulerName"]  # no name: kube-scheduler's default profile
    assert refusing.review(ADMISSION_VALIDATE_PODS_PATH, theirs)["allowed"] is True
    their_job = job("train", template_labels={**VISION, "cellfit.io/priority": "urgent"}, suspend=True)
    their_job["spec"]["template"]["spec"]["schedulerName"] = "volcano"
    answered = refusing.review(ADMISSION_VALIDATE_JOBS_PATH, their_job)
    assert answered["allowed"] is True and len(answered["warnings"]) == 1 and "'volcano' schedules" in answered["warnings"][0]
