"""Resource vectors and Kubernetes quantity parsing.

cellfit decides on three dimensions: CPU (millicores), memory (bytes) and GPUs (whole devices).
Everything else a pod requests is kube-scheduler's business. Quantities are parsed exactly (no
float rounding) following apimachinery's grammar, and rounded up to the unit like
``Quantity.MilliValue()`` / ``Value()`` do.
"""

from __future__ import annotations

import re
from functools import lru_cache
from fractions import Fraction
from typing import Final, Mapping

import msgspec

from scheduler.errors import InvalidQuantity

# apimachinery stores quantities as int64 (milli)values; anything larger is no real resource.
MAX_QUANTITY: Final = 2**63 - 1

_BINARY_SUFFIXES: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES: Final = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_NUMBER: Final = r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+"
_SUFFIX: Final = r"Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]"
_QUANTITY_RE: Final = re.compile(
    rf"^(?P<sign>[+-]?)(?P<number>{_NUMBER})"
    rf"(?:(?P<exp>[eE][+-]?[0-9]{{1,3}})|(?P<suffix>{_SUFFIX})?)$"
)
# A decimal exponent beyond this can only produce a value far outside int64 (or zero).
_MAX_EXPONENT: Final = 40


def _bounded_pattern(limit: int, *, whole: bool) -> str:
    """The grammar's strings whose value is below ``limit``, as a pattern (no minus sign).

    Per suffix (and written exponent), the number's integer part has at most the digits that
    keep it below ``limit``: 10**digits * multiplier <= limit; a suffix whose multiplier alone
    passes ``limit`` is left out (at 9e15: E, Ei, exponents past 15). Conservative (a leading
    zero counts as a digit, an exponent has at most two): it refuses some values parse_quantity
    accepts, never one it refuses. ``whole``: no fraction, no suffix or exponent below one (what
    a device count can be).
    """
    forms: list[tuple[str, Fraction]] = [
        (re.escape(suffix), multiplier) for suffix, multiplier in _DECIMAL_SUFFIXES.items()
    ] + [(suffix, Fraction(multiplier)) for suffix, multiplier in _BINARY_SUFFIXES.items()]
    forms.append((r"[eE]\+?0{1,2}", Fraction(1)))
    if not whole:
        forms.append((r"[eE]-[0-9]{1,2}", Fraction(1)))  # at most 1 (-0 and -00 are 1)
    for exponent in range(1, 100):
        written = rf"0?{exponent}" if exponent < 10 else str(exponent)
        forms.append((rf"[eE]\+?{written}", Fraction(10) ** exponent))
    by_digits: dict[int, list[str]] = {}
    for form, multiplier in forms:
        if whole and multiplier.denominator != 1:
            continue
        if multiplier > limit:
            continue  # not even a zero integer part keeps every fraction below limit
        digits = 0
        while 10 ** (digits + 1) * multiplier <= limit:
            digits += 1
        by_digits.setdefault(digits, []).append(form)
    alternatives = []
    for digits, suffixes in sorted(by_digits.items()):
        if whole:
            number = f"[0-9]{{1,{digits}}}" if digits else "0"  # no fraction
        elif digits:
            number = rf"(?:[0-9]{{1,{digits}}}(?:\.[0-9]*)?|\.[0-9]+)"
        else:
            number = r"(?:0(?:\.[0-9]*)?|\.[0-9]+)"
        alternatives.append(f"{number}(?:{'|'.join(suffixes)})")
    return rf"^\+?(?:{'|'.join(alternatives)})$"


# What the OpenAPI document tells clients a quantity is: the same grammar as _QUANTITY_RE less
# what parse_quantity then refuses, the magnitude included. Every string it matches decodes in
# every field (a CPU in millicores within int64, a memory in bytes, any other resource); the
# GPU resource's count is DEVICE_COUNT_PATTERN (whole). QUANTITY_LIMIT, which bounds them, also
# bounds the JSON numbers: a round value below MAX_QUANTITY // 1000, exact as a float.
QUANTITY_LIMIT: Final = 9 * 10**15
QUANTITY_PATTERN: Final = _bounded_pattern(QUANTITY_LIMIT, whole=False)
DEVICE_COUNT_PATTERN: Final = _bounded_pattern(QUANTITY_LIMIT, whole=True)


def parse_quantity(value: str | int | float, *, field: str) -> Fraction:
    """Parse a Kubernetes quantity (``"500m"``, ``"16Gi"``, ``"1e3"``, ``"2"``) exactly.

    Raises :class:`InvalidQuantity` naming ``field`` for anything apimachinery would reject,
    negative values, and values beyond int64.
    """
    if isinstance(value, bool):
        raise InvalidQuantity(f"expected a quantity string, got {value!r}", field=field)
    if isinstance(value, int):
        amount = Fraction(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidQuantity(f"{value!r} is not a finite quantity", field=field)
        amount = Fraction(value)
    elif isinstance(value, str):
        amount = _parse_quantity_string(value, field=field)
    else:
        raise InvalidQuantity(f"expected a quantity string, got {type(value).__name__}", field=field)
    if amount < 0:
        raise InvalidQuantity(f"{value!r} is negative", field=field)
    if amount > MAX_QUANTITY:
        raise InvalidQuantity(f"{value!r} is larger than any real resource", field=field)
    return amount


def _parse_quantity_string(text: str, *, field: str) -> Fraction:
    try:
        return _parse_quantity_text(text)
    except ValueError as error:
        raise InvalidQuantity(str(error), field=field) from None


# Pods repeat the same few quantity strings ("1", "8Gi", "500m"): parsing each once makes pod
# translation a dictionary lookup per quantity. Failures raise, so they are never cached.
@lru_cache(maxsize=4096)
def _parse_quantity_text(text: str) -> Fraction:
    if len(text) > 64:
        raise ValueError("quantity string is longer than 64 characters")
    match = _QUANTITY_RE.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. '500m', '2', '16Gi', '1e3')")
    number = Fraction(match["number"] if not match["number"].endswith(".") else match["number"][:-1])
    if match["sign"] == "-":
        number = -number
    if match["exp"] is not None:
        exponent = int(match["exp"][1:])
        if exponent > _MAX_EXPONENT:
            raise ValueError(f"{text!r} is larger than any real resource")
        if exponent < -_MAX_EXPONENT:
            return Fraction(0)
        return number * Fraction(10) ** exponent
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SUFFIXES:
        return number * _BINARY_SUFFIXES[suffix]
    return number * _DECIMAL_SUFFIXES[suffix]


def _ceil(amount: Fraction) -> int:
    return -((-amount.numerator) // amount.denominator)


def cpu_millis(value: str | int | float, *, field: str) -> int:
    """A CPU quantity in millicores, rounded up as ``Quantity.MilliValue()`` does."""
    return _convert(value, "milli", field)


def whole_units(value: str | int | float, *, field: str) -> int:
    """A quantity in whole units (bytes, devices), rounded up as ``Quantity.Value()`` does."""
    return _convert(value, "units", field)


def device_count(value: str | int | float, *, field: str) -> int:
    """An extended-resource quantity: devices are indivisible, so fractions are rejected."""
    return _convert(value, "devices", field)


def _convert(value: str | int | float, unit: str, field: str) -> int:
    if isinstance(value, str):
        try:
            return _convert_text(value, unit)
        except ValueError as error:
            raise InvalidQuantity(str(error), field=field) from None
    return _to_unit(parse_quantity(value, field=field), value, unit, field)


@lru_cache(maxsize=4096)
def _convert_text(text: str, unit: str) -> int:
    try:
        return _to_unit(parse_quantity(text, field=""), text, unit, "")
    except InvalidQuantity as error:
        raise ValueError(str(error)) from None


def _to_unit(amount: Fraction, value: object, unit: str, field: str) -> int:
    if unit == "milli":
        return _checked(_ceil(amount * 1000), value, field)
    if unit == "devices" and amount.denominator != 1:
        raise InvalidQuantity(f"{value!r} is not a whole number of devices", field=field)
    return _checked(_ceil(amount), value, field)


def _checked(units: int, value: object, field: str) -> int:
    if units > MAX_QUANTITY:
        raise InvalidQuantity(f"{value!r} is larger than any real resource", field=field)
    return units


class Resources(msgspec.Struct, frozen=True, gc=False):
    """An amount of the three resources cellfit schedules. All fields are non-negative integers.

    A struct the garbage collector never tracks (it holds numbers only): every pod's record has
    one, and tracked, 10,000 pods' records made each full collection ~10 ms longer, a stall of
    every verb (the same for PodInfo and the engines' bookings)."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    gpus: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millis + other.cpu_millis,
            self.memory_bytes + other.memory_bytes,
            self.gpus + other.gpus,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millis - other.cpu_millis,
            self.memory_bytes - other.memory_bytes,
            self.gpus - other.gpus,
        )

    def fits_in(self, other: Resources) -> bool:
        """Element-wise ``self <= other``."""
        return (
            self.cpu_millis <= other.cpu_millis
            and self.memory_bytes <= other.memory_bytes
            and self.gpus <= other.gpus
        )

    def elementwise_max(self, other: Resources) -> Resources:
        return Resources(
            max(self.cpu_millis, other.cpu_millis),
            max(self.memory_bytes, other.memory_bytes),
            max(self.gpus, other.gpus),
        )

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.cpu_millis, self.memory_bytes, self.gpus)

    def describe(self) -> str:
        """Human form used in log lines and reasons: ``cpu 2, memory 16Gi, nvidia.com/gpu 1``."""
        return f"cpu {format_cpu(self.cpu_millis)}, memory {format_bytes(self.memory_bytes)}, gpus {self.gpus}"


ZERO: Final = Resources()


def resources_from_quantities(
    quantities: Mapping[str, str | int | float], *, gpu_resource: str, field: str
) -> Resources:
    """Read cpu, memory and the GPU resource out of a ResourceList; other keys are ignored."""
    cpu = quantities.get("cpu")
    memory = quantities.get("memory")
    gpus = quantities.get(gpu_resource)
    return Resources(
        cpu_millis=cpu_millis(cpu, field=f"{field}.cpu") if cpu is not None else 0,
        memory_bytes=whole_units(memory, field=f"{field}.memory") if memory is not None else 0,
        gpus=device_count(gpus, field=f"{field}[{gpu_resource}]") if gpus is not None else 0,
    )


def format_cpu(millis: int) -> str:
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(amount: int) -> str:
    for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount >= factor and amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
