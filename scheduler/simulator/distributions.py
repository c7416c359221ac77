"""Truncated normal distributions, sampled by inverse CDF so that one uniform draw makes one
value: a seed then fixes every job's attributes whatever the parameters (a sweep over the GP
scale changes the grace periods and nothing else)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr, ndtri

from scheduler.simulator.errors import InvalidWorkload

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncatedNormal:
    """``N(mean, sd²)`` conditioned on ``low <= x <= high`` (units are the caller's).

    ``mean`` and ``sd`` are those of the normal before truncation, as the paper gives them
    ("the mean of the fitted normal ... truncated at 30 min"), so the sample mean differs from
    ``mean`` when a bound cuts off much of the mass.
    """

    mean: float
    sd: float
    low: float
    high: float

    def __post_init__(self) -> None:
        for name in ("mean", "sd", "low", "high"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
                raise InvalidWorkload(f"{value!r} is not a number", field=name)
        if not math.isfinite(self.mean) or not math.isfinite(self.sd) or self.sd < 0:
            raise InvalidWorkload(f"needs a finite mean and sd >= 0, got {self.mean!r}, {self.sd!r}", field="sd")
        if not self.low <= self.high:
            raise InvalidWorkload(f"low {self.low!r} is above high {self.high!r}", field="low")

    def quantiles(self, uniform: FloatArray) -> FloatArray:
        """The values at the given probabilities in [0, 1)."""
        if self.sd == 0:
            return np.full(uniform.shape, min(max(self.mean, self.low), self.high), dtype=np.float64)
        lo = float(ndtr((self.low - self.mean) / self.sd)) if math.isfinite(self.low) else 0.0
        hi = float(ndtr((self.high - self.mean) / self.sd)) if math.isfinite(self.high) else 1.0
        if hi - lo <= 1e-300:  # the whole interval lies in a tail the normal cannot resolve
            return np.full(uniform.shape, self.low if self.mean < self.low else self.high, dtype=np.float64)
        values: FloatArray = self.mean + self.sd * ndtri(lo + uniform * (hi - lo))
        return np.clip(values, self.low, self.high)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return self.quantiles(rng.random(size))

    def scaled(self, factor: float) -> TruncatedNormal:
        """Mean, sd and bounds all times ``factor`` (the paper's GP scales "2.0", "4.0", ...)."""
        return TruncatedNormal(
            mean=self.mean * factor, sd=self.sd * factor, low=self.low * factor, high=self.high * factor
        )

    def describe(self) -> str:
        return f"N({self.mean:g}, {self.sd:g}²) on [{self.low:g}, {self.high:g}]"
