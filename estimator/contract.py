"""The estimator's side of the user contract (DESIGN.md): ``cellfit.io/iterations``,
``cellfit.io/estimate`` (set by a user, or written by cellfit) and a sampling pod's
termination message. Parsing and encoding only; every error names its field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Mapping

from estimator.model import ConfigurationEstimate, Sample
from placer.configuration import KINDS, json_object_annotation
from scheduler.constants import ANNOTATION_ESTIMATE, ANNOTATION_ITERATIONS
from scheduler.errors import InvalidAnnotation

# Beyond any real training run; keeps arithmetic on iterations exact in floats.
MAX_ITERATIONS: Final = 10**12
MAX_SECONDS: Final = 10**9  # ~31 years
# Beyond any machine (8 PiB), exact in floats: the memory demand is a float product of it.
MAX_MEMORY_BYTES: Final = 2**53
# The least ``seconds`` cellfit writes (see _written_seconds).
MIN_ESTIMATE_SECONDS: Final = 0.001
# The kubelet keeps at most 4 KiB of a termination message.
MAX_TERMINATION_MESSAGE_BYTES: Final = 4096
# The resolution given to a report of 0 s, that of the container times that would stand in.
UNTICKED_CLOCK_SECONDS: Final = 1.0
# A termination message's ``splits``: enough for a run's progress, few enough to stay small.
MAX_SPLITS: Final = 16


def parse_iterations(text: str | None, *, where: str = ANNOTATION_ITERATIONS) -> int:
    if text is None or not text.strip():
        raise InvalidAnnotation("is missing; the estimator extrapolates samples to this many iterations", field=where)
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidAnnotation(f"{text!r} is not an integer", field=where) from None
    if not 3 <= value <= MAX_ITERATIONS:
        raise InvalidAnnotation(f"{value} is out of range; expected 3..{MAX_ITERATIONS:,}", field=where)
    return value


@dataclass(frozen=True)
class RecordedEstimate:
    """What ``cellfit.io/estimate`` says: seconds per configuration, and whether cellfit wrote it
    (its entries carry a ``method``) or a user did."""

    seconds: Mapping[str, float]
    by_cellfit: bool
    document: Mapping[str, Any]


@lru_cache(maxsize=8192)
def parse_estimate_cached(text: str) -> RecordedEstimate:
    """:func:`parse_estimate` once per distinct annotation value (read on every admission pass)."""
    return parse_estimate(text)


def parse_estimate(text: str, *, where: str = ANNOTATION_ESTIMATE) -> RecordedEstimate:
    """Raises the first of :func:`estimate_errors`."""
    estimate, errors = _read_estimate(text, where=where)
    if errors:
        raise errors[0]
    return estimate


def estimate_errors(text: str, *, where: str = ANNOTATION_ESTIMATE) -> list[InvalidAnnotation]:
    """Every mistake in ``cellfit.io/estimate``, each naming its field, in the order
    :func:`parse_estimate` meets them (it raises the first): a user told of all of them fixes the
    annotation in one go, not one mistake a try. Past a value that is no JSON object, nothing
    more is read."""
    try:
        return _read_estimate(text, where=where)[1]
    except InvalidAnnotation as error:
        return [error]


def _read_estimate(text: str, *, where: str) -> tuple[RecordedEstimate, list[InvalidAnnotation]]:
    """The estimate of the entries that read, and the mistakes of the others (every entry is read:
    one in error does not hide the next). Raises for a value that is no JSON object."""
    document = json_object_annotation(text, where=where, expected='a JSON object such as {"gpu": {"seconds": 600}}')
    seconds: dict[str, float] = {}
    methods = set()
    errors: list[InvalidAnnotation] = []
    for kind, entry in document.items():
        error = _entry_error(kind, entry, where=where)
        if error is not None:
            errors.append(error)
            continue
        seconds[kind] = float(entry["seconds"])
        methods.add(entry.get("method", "user"))
    return RecordedEstimate(seconds=seconds, by_cellfit=methods != {"user"}, document=document), errors


def _entry_error(kind: str, entry: Any, *, where: str) -> InvalidAnnotation | None:
    """What is wrong with the estimate's entry for ``kind``, or ``None``."""
    if kind not in KINDS:
        return InvalidAnnotation(f"unknown configuration kind {kind!r}; expected one of {', '.join(KINDS)}", field=where)
    if not isinstance(entry, dict):
        return InvalidAnnotation('must be an object such as {"seconds": 600}', field=f"{where}.{kind}")
    if "seconds" not in entry:
        # Said as missing, with what the entry has instead ({"minutes": 3}), not "got None".
        has = f" (it has {', '.join(sorted(map(str, entry)))})" if entry else ""
        return InvalidAnnotation(f'is missing: give the Job\'s whole run on {kind} in seconds, such as {{"seconds": 600}}{has}',
                                 field=f"{where}.{kind}.seconds")
    value = entry["seconds"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        return InvalidAnnotation(f"must be a number of seconds above 0 and at most {MAX_SECONDS:,}, got {value!r}",
                                 field=f"{where}.{kind}.seconds")
    return None


@dataclass(frozen=True)
class SampleReport:
    """A sampling pod's termination message: ``{"iterations": k, "seconds": t, "startupSeconds": s,
    "splits": [[j, t_j]], "peakMemoryBytes": m}``; ``startupSeconds`` (the part of ``t`` before the
    first iteration), ``splits`` (the seconds reached at earlier iteration counts ``j < k``, such
    as ``CELLFIT_SAMPLE_SPLIT_ITERATIONS``) and ``peakMemoryBytes`` are optional."""

    iterations: int
    seconds: float
    peak_memory_bytes: int | None
    startup_seconds: float | None = None
    splits: tuple[tuple[int, float], ...] = ()

    def sample(self, *, configuration: str, pilot: int) -> Sample:
        """The sample this report is, as the model reads it. A run of 0 s was timed by a clock
        that did not tick over it (an integer clock): read as container times are, to 1 s."""
        return Sample(
            configuration, self.iterations, self.seconds, peak_memory_bytes=self.peak_memory_bytes,
            startup_seconds=self.startup_seconds, pilot=pilot, splits=self.splits,
            resolution_seconds=UNTICKED_CLOCK_SECONDS if self.seconds == 0 else 0.0,
        )


def parse_sample_report(text: str, *, where: str = "terminationMessage") -> SampleReport:
    if len(text.encode()) > MAX_TERMINATION_MESSAGE_BYTES:
        raise InvalidAnnotation("is longer than the kubelet keeps", field=where)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise InvalidAnnotation(f"is not valid JSON: {error}", field=where) from None
    if not isinstance(document, dict):
        raise InvalidAnnotation('must be {"iterations": k, "seconds": t, "peakMemoryBytes": m}', field=where)
    iterations = document.get("iterations")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or not 1 <= iterations <= MAX_ITERATIONS:
        raise InvalidAnnotation(f"must be a positive integer, got {iterations!r}", field=f"{where}.iterations")
    seconds = document.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or not 0 <= seconds <= MAX_SECONDS:
        raise InvalidAnnotation(f"must be a number of seconds, got {seconds!r}", field=f"{where}.seconds")
    startup = document.get("startupSeconds")
    if startup is not None and (
        isinstance(startup, bool) or not isinstance(startup, (int, float)) or not math.isfinite(startup) or not 0 <= startup <= seconds
    ):
        raise InvalidAnnotation(f"must be a number of seconds in [0, seconds], got {startup!r}", field=f"{where}.startupSeconds")
    memory = document.get("peakMemoryBytes")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or not 0 <= memory <= MAX_MEMORY_BYTES):
        raise InvalidAnnotation(f"must be an integer of bytes in [0, {MAX_MEMORY_BYTES}], got {memory!r}", field=f"{where}.peakMemoryBytes")
    return SampleReport(
        iterations=iterations, seconds=float(seconds), peak_memory_bytes=memory,
        startup_seconds=float(startup) if startup is not None else None,
        splits=_splits(document.get("splits"), iterations=iterations, seconds=seconds, startup=startup, where=f"{where}.splits"),
    )


def _splits(value: Any, *, iterations: int, seconds: float, startup: float | None, where: str) -> tuple[tuple[int, float], ...]:
    """``[[j, t_j], ...]``: iteration counts rising below ``iterations``, seconds rising, between
    the start-up and ``seconds``."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_SPLITS:
        raise InvalidAnnotation(f"must be a list of at most {MAX_SPLITS} [iterations, seconds] pairs", field=where)
    splits: list[tuple[int, float]] = []
    for index, pair in enumerate(value):
        field = f"{where}[{index}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise InvalidAnnotation(f"must be an [iterations, seconds] pair, got {pair!r}", field=field)
        k, t = pair
        low_k, low_t = splits[-1] if splits else (0, startup or 0.0)
        if isinstance(k, bool) or not isinstance(k, int) or not low_k < k < iterations:
            raise InvalidAnnotation(f"iterations must be an integer in ({low_k}, {iterations}), got {k!r}", field=field)
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not low_t <= t <= seconds:
            raise InvalidAnnotation(f"seconds must be in [{low_t:g}, {seconds:g}], got {t!r}", field=field)
        splits.append((k, float(t)))
    return tuple(splits)


def encode_estimate(
    estimates: Mapping[str, ConfigurationEstimate],
    *,
    samples: Mapping[str, list[tuple[str, Sample]]],
    overhead_fraction: float | None,
    digests: Mapping[str, str] | None = None,
) -> str:
    """``cellfit.io/estimate`` as cellfit writes it: per configuration ``seconds`` (what AlloX
    reads), then ``uncertaintySeconds``, ``podSeconds``, ``memoryBytes``, ``method``,
    ``configurationDigest`` (of the configuration it estimates, from ``digests``) and the
    samples behind it (pod, iterations, seconds, peak memory, complete)."""
    document: dict[str, Any] = {}
    for kind, estimate in estimates.items():
        entry: dict[str, Any] = {
            "seconds": _written_seconds(estimate.seconds),
            "uncertaintySeconds": _round(estimate.uncertainty_seconds),
            "podSeconds": _round(estimate.pod_seconds),
            "method": estimate.method,
        }
        if digests and kind in digests:
            entry["configurationDigest"] = digests[kind]
        if estimate.memory_bytes is not None:
            entry["memoryBytes"] = estimate.memory_bytes
        if estimate.task_cov is not None:
            entry["taskCov"] = round(estimate.task_cov, 4)
        entry["samples"] = [
            {
                "pod": pod,
                "iterations": sample.iterations,
                "seconds": _round(sample.seconds),
                **({"startupSeconds": _round(sample.startup_seconds)} if sample.startup_seconds is not None else {}),
                **({"splits": [[k, _round(t)] for k, t in sample.splits]} if sample.splits else {}),
                **({"peakMemoryBytes": sample.peak_memory_bytes} if sample.peak_memory_bytes is not None else {}),
                **({"complete": False} if not sample.complete else {}),
                **({"pilot": sample.pilot} if sample.pilot else {}),
            }
            for pod, sample in samples.get(kind, [])
        ]
        if overhead_fraction is not None:
            entry["overheadFraction"] = round(overhead_fraction, 4)
        document[kind] = entry
    return json.dumps(document, separators=(",", ":"), sort_keys=False)


def _written_seconds(seconds: float) -> float:
    """An estimate's seconds within what ``cellfit.io/estimate`` takes, (0, MAX_SECONDS]: an
    estimate under a millisecond, or of 10^12 iterations beyond 31 years, still reads back."""
    return min(float(MAX_SECONDS), max(MIN_ESTIMATE_SECONDS, _round(seconds)))


def _round(seconds: float) -> float:
    return round(seconds, 3)
