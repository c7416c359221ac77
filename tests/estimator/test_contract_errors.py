"""estimate_errors: every mistake of a cellfit.io/estimate, each naming its field (user21's item
14: the webhook told only the first, where the parser stopped); parse_estimate still raises the
first of them, and reads what it read before."""

from __future__ import annotations

import pytest

from estimator.contract import estimate_errors, parse_estimate
from scheduler.errors import InvalidAnnotation


def test_every_entry_in_error_is_told_in_order_each_with_its_field() -> None:
    errors = estimate_errors('{"cpu": {"seconds": "fast"}, "gpu": {"minutes": 3}}')
    assert [(e.field, str(e)) for e in errors] == [
        ("cellfit.io/estimate.cpu.seconds",
         "cellfit.io/estimate.cpu.seconds: must be a number of seconds above 0 and at most 1,000,000,000, got 'fast'"),
        ("cellfit.io/estimate.gpu.seconds",
         'cellfit.io/estimate.gpu.seconds: is missing: give the Job\'s whole run on gpu in seconds, such as {"seconds": 600} '
         "(it has minutes)"),
    ]
    with pytest.raises(InvalidAnnotation) as raised:
        parse_estimate('{"cpu": {"seconds": "fast"}, "gpu": {"minutes": 3}}')
    assert raised.value.field == "cellfit.io/estimate.cpu.seconds"


def test_an_entry_that_reads_does_not_hide_one_after_it_and_a_value_of_no_object_is_one_mistake() -> None:
    assert [e.field for e in estimate_errors('{"tpu": {}, "cpu": {"seconds": 60}, "gpu": 3}')] == [
        "cellfit.io/estimate", "cellfit.io/estimate.gpu"]
    assert [str(e) for e in estimate_errors("{cpu")] == [str(_raised("{cpu"))]
    assert estimate_errors('{"cpu": {"seconds": 60}, "gpu": {"seconds": 5, "method": "samples"}}') == []


def _raised(text: str) -> InvalidAnnotation:
    with pytest.raises(InvalidAnnotation) as raised:
        parse_estimate(text)
    return raised.value
