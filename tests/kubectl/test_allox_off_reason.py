"""Why /v1/inspect/allox is not served, said from the real cause: with estimator.enabled false
and allox.enabled true, ``kubectl cellfit queue`` said "AlloX admission is not running
(standalone, or allox.enabled is false)", neither of which held, and nothing at start said that
allox.enabled: true had no effect."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from scheduler.config import parse_settings
from scheduler.extender.runtime import allox_off_reason, build_runtime


@pytest.mark.parametrize(("text", "connected", "said"), [
    ("estimator: {enabled: false}\nallox: {enabled: true}\n", True,
     "AlloX admission is not running: estimator.enabled is false, and AlloX runs only beside the estimator "
     "(allox.enabled: true has no effect without it)"),
    ("allox: {enabled: false}\n", True, "AlloX admission is not running: allox.enabled is false"),
    ("estimator: {enabled: false}\nallox: {enabled: false}\n", True, "AlloX admission is not running: allox.enabled is false"),
    ("{}\n", False, "AlloX admission is not running: cellfit runs standalone (no cluster connection)"),
])
def test_the_reason_allox_is_off_names_the_setting_that_turned_it_off(text: str, connected: bool, said: str) -> None:
    assert allox_off_reason(parse_settings(text), connected=connected) == said


def test_allox_without_the_estimator_is_warned_at_start_and_the_view_says_why(caplog: pytest.LogCaptureFixture) -> None:
    settings = parse_settings("estimator: {enabled: false}\nallox: {enabled: true}\n")
    with caplog.at_level("WARNING", logger="scheduler.extender.runtime"):
        runtime = build_runtime(settings, standalone=True)
    assert "allox.enabled is true but estimator.enabled is false" in caplog.text
    with TestClient(runtime.inspect_app) as client:
        answer = client.get("/v1/inspect/allox")
    assert answer.status_code == 404
    assert answer.json()["detail"] == "AlloX admission is not running: cellfit runs standalone (no cluster connection)"
    caplog.clear()
    with caplog.at_level("WARNING", logger="scheduler.extender.runtime"):
        build_runtime(parse_settings("{}\n"), standalone=True)
    assert "estimator.enabled" not in caplog.text
