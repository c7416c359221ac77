"""The admission webhook's own HTTPS listener (``admission.port``): what the API server calls
when the Job controller creates a pod. Only the review and /healthz are served there."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import httpx
import pytest

from scheduler.config import parse_settings
from scheduler.errors import ConfigError
from tests.integration.test_metrics_listener import _serve, _wait_ok
from tests.support.ports import free_port
from tests.support import kube_objects as k
from tests.support.tls import make_serving_certificate

REVIEW = "/v1/admission/pods"


def test_admission_needs_a_certificate_and_a_port_of_its_own():
    assert parse_settings("").admission.enabled is False
    with pytest.raises(ConfigError, match="admission: .*certFile and keyFile must be set"):
        parse_settings("admission: {enabled: true}\n")
    with pytest.raises(ConfigError, match="admission.port 8888 is already server.port"):
        parse_settings("admission: {enabled: true, port: 8888, certFile: a, keyFile: b}\n")
    with pytest.raises(ConfigError, match="admission.resumedPriorityClass"):
        parse_settings("admission: {resumedPriorityClass: ''}\n")


@pytest.mark.slow
def test_cellfit_serve_answers_reviews_over_https_and_nothing_else_there(tmp_path: Path) -> None:
    tls = make_serving_certificate(tmp_path / "tls")
    port, admission_port = free_port(), free_port()
    config = tmp_path / "cellfit.yaml"
    config.write_text(
        f"server: {{port: {port}}}\nlogging: {{format: text}}\n"
        f"admission: {{enabled: true, host: 127.0.0.1, port: {admission_port}, certFile: {tls.cert_file}, keyFile: {tls.key_file}}}\n"
    )
    process = _serve(config)
    try:
        _wait_ok(f"http://127.0.0.1:{port}/readyz", process)
        trust = ssl.create_default_context(cafile=str(tls.ca_file))
        with httpx.Client(base_url=f"https://127.0.0.1:{admission_port}", verify=trust, timeout=10) as client:
            assert client.get("/healthz").json() == {"status": "ok"}
            review = k.admission_review(k.pod("train-x7k2q", gpus=1, priority=500))
            answer = client.post(REVIEW, content=k.dumps(review), headers={"Content-Type": "application/json"})
            assert answer.status_code == 200
            # Standalone: no Jobs known, nothing preempted, so the pod is admitted as it is.
            assert answer.json() == {"response": {"uid": review["request"]["uid"], "allowed": True},
                                     "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
            bad = client.post(REVIEW, content=b'{"request": {"uid": 7}}')
            assert bad.status_code == 400 and "request.uid" in bad.json()["Error"]
            for path in ("/v1/extender/filter", "/v1/extender/bind", "/metrics", "/v1/inspect/engine"):
                assert client.post(path, content=b"{}").status_code in (404, 405), path
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not spoken there
            httpx.get(f"http://127.0.0.1:{admission_port}/healthz", timeout=5)
    finally:
        process.terminate()
        process.communicate(timeout=30)


@pytest.mark.slow
def test_cellfit_serve_names_the_setting_when_the_certificate_cannot_be_read(tmp_path: Path) -> None:
    config = tmp_path / "cellfit.yaml"
    config.write_text(
        f"server: {{port: {free_port()}}}\n"
        f"admission: {{enabled: true, port: {free_port()}, certFile: {tmp_path}/missing.crt, keyFile: {tmp_path}/missing.key}}\n"
    )
    process = _serve(config)
    output = process.communicate(timeout=60)[0]
    assert process.returncode == 2, output
    assert "admission.certFile/keyFile: cannot load" in output, output


def test_an_oversized_review_is_refused_before_it_is_read_whole():
    import threading

    from scheduler.extender.admission import PodAdmission
    from scheduler.extender.app import create_admission_app
    from scheduler.extender.metrics import ExtenderMetrics
    from tests.support.server import running_server

    admission = PodAdmission(preemption=None, lock=threading.RLock(), metrics=ExtenderMetrics(), resumed_class=None)
    with running_server(create_admission_app(admission=admission, max_request_bytes=4096)) as url:
        review = k.admission_review(k.pod("train-x7k2q"))
        assert httpx.post(f"{url}{REVIEW}", content=k.dumps(review), timeout=10).status_code == 200
        too_big = httpx.post(f"{url}{REVIEW}", content=b" " * 5000, timeout=10)
        assert too_big.status_code == 413 and "server.maxRequestBytes (4096 bytes)" in too_big.json()["Error"]


@pytest.mark.slow
def test_a_rotated_certificate_is_presented_without_a_restart(tmp_path: Path) -> None:
    first, second = make_serving_certificate(tmp_path / "first"), make_serving_certificate(tmp_path / "second")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_file.write_bytes(first.cert_file.read_bytes())
    key_file.write_bytes(first.key_file.read_bytes())
    port, admission_port = free_port(), free_port()
    config = tmp_path / "cellfit.yaml"
    config.write_text(
        f"server: {{port: {port}}}\nlogging: {{format: text}}\n"
        f"admission: {{enabled: true, host: 127.0.0.1, port: {admission_port}, certFile: {cert_file}, "
        f"keyFile: {key_file}, certReloadSeconds: 0.2}}\n"
    )

    def healthy_trusting(pair) -> bool:  # type: ignore[no-untyped-def]
        trust = ssl.create_default_context(cafile=str(pair.ca_file))
        try:
            return httpx.get(f"https://127.0.0.1:{admission_port}/healthz", verify=trust, timeout=5).status_code == 200
        except httpx.ConnectError:
            return False

    process = _serve(config)
    try:
        _wait_ok(f"http://127.0.0.1:{port}/readyz", process)
        assert healthy_trusting(first) and not healthy_trusting(second)
        # As the kubelet updates a mounted Secret: each file replaced in one rename.
        for new, old in ((second.key_file, key_file), (second.cert_file, cert_file)):
            staged = old.with_suffix(".new")
            staged.write_bytes(new.read_bytes())
            staged.replace(old)
        deadline = time.monotonic() + 10
        while not healthy_trusting(second):
            assert time.monotonic() < deadline, "the new certificate was not presented within 10 s"
            time.sleep(0.1)
        assert not healthy_trusting(first)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    assert "certificate reloaded" in output
