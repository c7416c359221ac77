"""cells.gangBookingTimeoutSeconds: 0 means never, as null does (review23): Helm drops a key whose
value is null from the chart's merged values, so `null: never` could not be set through the chart
and cellfit silently used its 300 s default. And a VC name must be a whole label value: Python's
`$` matched before a trailing newline, so a VC named "vision\\n" was taken although no pod label
can name it."""

import pytest
from pydantic import ValidationError

from scheduler.cells.config import CellsConfig
from scheduler.cells.expiry import BookingLimits
from tests.cells.helpers import rack_cluster
from tests.cells.test_config import problems


@pytest.mark.parametrize("written", [0, 0.0, None])
def test_zero_or_null_gang_booking_timeout_is_never(written: float | None) -> None:
    cells = CellsConfig.model_validate({"gangBookingTimeoutSeconds": written})
    assert cells.gang_booking_timeout_seconds is None


def test_a_positive_gang_booking_timeout_is_kept_and_a_negative_one_refused() -> None:
    assert CellsConfig.model_validate({"gangBookingTimeoutSeconds": 45}).gang_booking_timeout_seconds == 45
    with pytest.raises(ValidationError, match="gangBookingTimeoutSeconds"):
        CellsConfig.model_validate({"gangBookingTimeoutSeconds": -1})


def test_booking_limits_default_is_unchanged() -> None:
    assert BookingLimits().gang_booking_timeout_seconds == 300.0


def test_a_vc_name_with_a_trailing_newline_is_not_a_label_value() -> None:
    assert "virtualClusters.vision\n: 'vision\\n' is not a valid label value" in problems(rack_cluster(vcs={"vision\n": []}))
