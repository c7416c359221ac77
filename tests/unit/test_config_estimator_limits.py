"""The estimator's time limits on sampling pods are settings (estimator.pendingLimitSeconds,
estimator.runningAloneWarningSeconds): defaults, values an admin sets, and bad values refused
naming the field."""

from __future__ import annotations

import pytest

from scheduler.config import default_config_text, parse_settings
from scheduler.errors import ConfigError


def test_defaults_are_half_an_hour_pending_and_an_hour_running_alone():
    estimator = parse_settings("").estimator
    assert estimator.pending_limit_seconds == 1800.0
    assert estimator.running_alone_warning_seconds == 3600.0
    # The embedded file spells both out (the same values, by the keys an admin writes).
    assert "pendingLimitSeconds: 1800" in default_config_text()
    assert "runningAloneWarningSeconds: 3600" in default_config_text()


def test_an_admin_sets_both():
    estimator = parse_settings("estimator:\n  pendingLimitSeconds: 7200\n  runningAloneWarningSeconds: 900.5\n").estimator
    assert estimator.pending_limit_seconds == 7200.0
    assert estimator.running_alone_warning_seconds == 900.5


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("pendingLimitSeconds: -5", "estimator.pendingLimitSeconds: Input should be greater than or equal to 60 (got -5)"),
        ("pendingLimitSeconds: 0", "estimator.pendingLimitSeconds: Input should be greater than or equal to 60 (got 0)"),
        # Shorter than an image pull: every sampling pod would fail while its image downloads.
        ("pendingLimitSeconds: 30", "estimator.pendingLimitSeconds: Input should be greater than or equal to 60 (got 30)"),
        ("pendingLimitSeconds: soon", "estimator.pendingLimitSeconds: Input should be a valid number"),
        ("pendingLimitSeconds: .inf", "estimator.pendingLimitSeconds: Input should be a finite number"),
        ("pendingLimitSeconds: null", "estimator.pendingLimitSeconds: Input should be a valid number"),
        ("runningAloneWarningSeconds: -1", "estimator.runningAloneWarningSeconds: Input should be greater than 0 (got -1)"),
        ("runningAloneWarningSeconds: 0", "estimator.runningAloneWarningSeconds: Input should be greater than 0 (got 0)"),
        ("runningAloneWarningSeconds: long", "estimator.runningAloneWarningSeconds: Input should be a valid number"),
        ("runningAloneWarningSeconds: .nan", "estimator.runningAloneWarningSeconds: Input should be a finite number"),
        ("pendingLimitSecond: 7200", "estimator.pendingLimitSecond: unknown key (misspelled?)"),
    ],
)
def test_bad_values_are_refused_naming_the_field(setting: str, expected: str):
    with pytest.raises(ConfigError) as error:
        parse_settings(f"estimator:\n  {setting}\n", source="cfg.yaml")
    assert str(error.value).startswith("cfg.yaml: ") and expected in str(error.value), str(error.value)
