from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.resources import (
    Resources,
    cpu_millis,
    device_count,
    format_bytes,
    parse_quantity,
    resources_from_quantities,
    whole_units,
)
from scheduler.errors import InvalidQuantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2", Fraction(2)),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("128974848", Fraction(128974848)),
        ("129e6", Fraction(129_000_000)),
        ("129M", Fraction(129_000_000)),
        ("123Mi", Fraction(123 * 2**20)),
        ("1E3", Fraction(1000)),
        ("1e-3", Fraction(1, 1000)),
        ("100n", Fraction(1, 10**7)),
        ("+3k", Fraction(3000)),
        ("0", Fraction(0)),
        (4, Fraction(4)),
    ],
)
def test_parses_kubernetes_quantities_exactly(text, expected):
    assert parse_quantity(text, field="f") == expected


@pytest.mark.parametrize(
    "text",
    ["", "abc", "1.2.3", "5 Gi", "Gi", "1Gb", "--1", "1e", "0x10", "1e999", "99999999999999999999Ei", "-1", "nan", True, None, [1]],
)
def test_rejects_bad_quantities_naming_the_field(text):
    with pytest.raises(InvalidQuantity) as error:
        parse_quantity(text, field="Pod.spec.containers[0].resources.requests.cpu")
    assert "Pod.spec.containers[0].resources.requests.cpu" in str(error.value)


def test_units_round_up_like_apimachinery():
    assert cpu_millis("0.0001", field="f") == 1  # MilliValue rounds up
    assert cpu_millis("2", field="f") == 2000
    assert whole_units("1.5", field="f") == 2
    assert whole_units("1Ki", field="f") == 1024


def test_devices_must_be_whole():
    assert device_count("8", field="f") == 8
    with pytest.raises(InvalidQuantity, match="whole number of devices"):
        device_count("500m", field="limits[nvidia.com/gpu]")


def test_absurd_but_parseable_values_are_rejected():
    with pytest.raises(InvalidQuantity, match="larger than any real resource"):
        cpu_millis("9223372036854775807", field="f")  # fits int64 as cores, not as millicores
    with pytest.raises(InvalidQuantity, match="longer than 64"):
        parse_quantity("1" * 65, field="f")


def test_resource_list_reads_only_the_three_dimensions():
    got = resources_from_quantities(
        {"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "2", "ephemeral-storage": "not-even-checked"},
        gpu_resource="nvidia.com/gpu",
        field="r",
    )
    assert got == Resources(1500, 2 * 2**30, 2)


@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi", "m"]))
def test_integer_quantities_with_any_suffix_parse_to_their_value(number, suffix):
    factor = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "m": Fraction(1, 1000)}[suffix]
    value = number * factor
    if value > 2**63 - 1:
        with pytest.raises(InvalidQuantity):
            parse_quantity(f"{number}{suffix}", field="f")
    else:
        assert parse_quantity(f"{number}{suffix}", field="f") == value


@given(st.text(max_size=20))
def test_arbitrary_text_either_parses_or_raises_invalid_quantity(text):
    try:
        assert parse_quantity(text, field="f") >= 0
    except InvalidQuantity as error:
        assert error.field == "f"


def test_resources_arithmetic_and_formatting():
    a, b = Resources(1000, 2**30, 1), Resources(500, 2**29, 0)
    assert a - b + b == a
    assert b.fits_in(a) and not a.fits_in(b)
    assert a.elementwise_max(Resources(2000, 0, 0)) == Resources(2000, 2**30, 1)
    assert format_bytes(16 * 2**30) == "16Gi" and format_bytes(1000) == "1000"
    assert a.describe() == "cpu 1, memory 1Gi, gpus 1"
