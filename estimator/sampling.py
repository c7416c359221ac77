"""What to sample: lengths, pilot pods, the adaptive sampling ratio, when a sample is "long".

- **Lengths** (AlloX §4.1, §4.4): two samples per configuration, of ``short_fraction`` and
  ``long_fraction`` of the Job's iterations, so the start-up and the time per iteration can be
  told apart. The long run goes first and is asked for the time it reached at the short length
  (``CELLFIT_SAMPLE_SPLIT_ITERATIONS``); a workload that reports it (``splits``) needs no short
  run: one pod, one start-up per configuration. Otherwise the short run follows.
- **Pilots** (SLearn §5.1.2): a Job with at least ``thin_limit`` pods samples
  ``max(1, round(r·S))`` of its S pods, chosen by a seeded draw (deterministic per Job); thinner
  Jobs are sampled as one pod, never held for a pilot set.
- **Sampling ratio r** adapts between 1% and 5% as SLearn Fig. 4 does (:class:`SamplingRatio`).
- **Long samples** (AlloX §4.4 "if a sample job is significantly longer than others, we do not
  need to complete it"): a running sample is stopped once it has run ``long_factor`` times what
  the Job's finished samples predict for its length.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Final, Literal, Sequence

from estimator.model import ModelSettings, Sample, fit_linear

Length = Literal["short", "long"]
LENGTHS: Final[tuple[Length, ...]] = ("short", "long")


@dataclass(frozen=True)
class SamplingSettings:
    short_fraction: float = 0.01
    long_fraction: float = 0.02
    # Jobs with fewer pods are thin (SLearn's thinLimit, 3 in its evaluation).
    thin_limit: int = 3
    max_pilots: int = 16
    # A sample running this many times longer than its peers predict is stopped as "long".
    long_factor: float = 10.0
    # ... but never before this many seconds: start-up (image pull, scheduling) is not work.
    long_min_seconds: float = 120.0
    # The short run only after the long one, which reports the time it reached at the short
    # length (``splits``) if the workload can: then no short run at all, one start-up paid
    # instead of two. False: both at once (sampling ends sooner where no split is reported).
    short_after_long: bool = True


@dataclass(frozen=True)
class SamplePlan:
    """The sampling runs one Job needs: for each configuration, pilot and length, ``k``."""

    iterations: dict[Length, int]
    pilots: tuple[int, ...]  # the completion indices sampled (0 for single-pod Jobs)
    ratio: float | None  # the sampling ratio used, for wide Jobs

    @property
    def pods_per_configuration(self) -> int:
        return len(self.pilots) * len(LENGTHS)


def sample_lengths(iterations: int, settings: SamplingSettings = SamplingSettings()) -> dict[Length, int]:
    """``k`` of the short and the long sample; always two distinct lengths below ``iterations``
    when the Job has at least 3 iterations."""
    short = max(1, round(iterations * settings.short_fraction))
    long = max(short + 1, round(iterations * settings.long_fraction))
    if long >= iterations:  # a tiny Job: sample what is left below its own length
        long = max(2, iterations - 1) if iterations >= 3 else max(1, iterations)
        short = max(1, min(short, long - 1))
    return {"short": short, "long": long}


def pods_of(*, completions: int | None, parallelism: int | None) -> int:
    """S: how many pods the Job runs (its completions, else its parallelism, else 1)."""
    if completions is not None and completions > 0:
        return completions
    if parallelism is not None and parallelism > 0:
        return parallelism
    return 1


def waves_of(*, completions: int | None, parallelism: int | None) -> int:
    """Rounds of pods the Job needs: ``ceil(completions / parallelism)``, at least 1."""
    pods = pods_of(completions=completions, parallelism=parallelism)
    width = parallelism if parallelism is not None and parallelism > 0 else 1
    return max(1, math.ceil(pods / max(1, min(width, pods))))


def plan(
    *, job_uid: str, iterations: int, pods: int, ratio: float, settings: SamplingSettings = SamplingSettings()
) -> SamplePlan:
    lengths = sample_lengths(iterations, settings)
    if pods < max(2, settings.thin_limit):
        return SamplePlan(iterations=lengths, pilots=(0,), ratio=None)
    count = min(pods, settings.max_pilots, max(1, round(ratio * pods)))
    # SLearn picks pilot tasks at random; seeded by the Job so a restart picks the same ones.
    seed = int.from_bytes(hashlib.sha256(job_uid.encode()).digest()[:8], "big")
    pilots = tuple(sorted(random.Random(seed).sample(range(pods), count)))
    return SamplePlan(iterations=lengths, pilots=pilots, ratio=ratio)


def long_deadline_seconds(
    *, iterations: int, finished: Sequence[Sample], settings: SamplingSettings = SamplingSettings(),
    model: ModelSettings = ModelSettings(),
) -> float | None:
    """How long a sample of ``iterations`` may run before it counts as long: ``long_factor``
    times the fastest prediction the Job's finished samples (any configuration) make for it.
    None while no sample has finished (nothing to compare with)."""
    predictions = []
    for configuration in {s.configuration for s in finished if s.complete}:
        fit = fit_linear([s for s in finished if s.configuration == configuration], settings=model)
        predictions.append(max(fit.predict(iterations), 1e-3))
    if not predictions:
        return None
    return max(settings.long_min_seconds, settings.long_factor * min(predictions))


@dataclass
class SamplingRatio:
    """SLearn Fig. 4: the sampling ratio (in percent) that gave the lowest normalised JCT over
    the last ``window`` finished Jobs of each ratio. Start-up tries 3%, 2% and 4% for ``window``
    Jobs each; 1% (5%) is tried when going from 3% to 2% (4%) cut the score by more than 10%."""

    window: int = 100
    _chosen: int = 0
    _scores: dict[int, deque[float]] = field(default_factory=dict)

    def next_ratio(self) -> float:
        """The ratio for the next wide Job (a fraction, 0.01..0.05)."""
        chosen, self._chosen = self._chosen, self._chosen + 1
        if chosen < self.window:
            return 0.03
        if chosen < 2 * self.window:
            return 0.02
        if chosen < 3 * self.window:
            return 0.04
        scores = {percent: sum(v) / len(v) for percent, v in self._scores.items() if v}
        if not scores:
            return 0.03
        best = min(sorted(scores), key=lambda percent: scores[percent])
        three = scores.get(3)
        if three is not None and best == 2 and 1.1 * scores[2] < three:
            return 0.01
        if three is not None and best == 4 and three > 1.1 * scores[4]:
            return 0.05
        return best / 100

    def job_finished(self, *, ratio: float, normalized_jct: float) -> None:
        """A wide Job sampled at ``ratio`` finished; ``normalized_jct`` = its completion time
        over its runtime."""
        percent = round(ratio * 100)
        scores = self._scores.setdefault(percent, deque(maxlen=self.window))
        scores.append(normalized_jct)
