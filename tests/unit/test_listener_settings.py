"""The listeners' limits (server.extenderListener, metricsListener, admissionListener): each its
own section, the metrics one with fewer connections, keys and bounds checked like the rest."""

from __future__ import annotations

import pytest

from scheduler.config import Settings, parse_settings
from scheduler.errors import ConfigError


def test_each_listener_has_its_own_limits_and_the_metrics_one_fewer_connections() -> None:
    server = Settings().server
    assert server.metrics_listener.max_connections < server.extender_listener.max_connections
    assert server.admission_listener == server.extender_listener  # equal by default, set apart
    changed = parse_settings("server:\n  metricsListener: {idleTimeoutSeconds: 30}\n").server
    # A section given in part keeps its own listener's defaults for the rest.
    assert changed.metrics_listener.max_connections == server.metrics_listener.max_connections
    assert changed.metrics_listener.idle_timeout_seconds == 30
    assert changed.extender_listener.idle_timeout_seconds == server.extender_listener.idle_timeout_seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("server:\n  metricsListener: {maxConections: 3}\n", "server.metricsListener.maxConections: unknown key"),
        ("server:\n  extenderListener: {maxConnections: 0}\n", "server.extenderListener.maxConnections: Input should be greater than or equal to 1"),
        ("server:\n  admissionListener: {readTimeoutSeconds: .inf}\n", "server.admissionListener.readTimeoutSeconds"),
        ("server:\n  extenderListener: {maxHeaderBytes: 100}\n", "server.extenderListener.maxHeaderBytes: Input should be greater than or equal to 1024"),
    ],
)
def test_bad_limits_name_the_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        parse_settings(text)
