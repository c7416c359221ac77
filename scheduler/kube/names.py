"""Offered node names: turned into an engine's slots, and its answer by position back into names.

Engines decide over slots of their :class:`~scheduler.core.nodeindex.NodeIndex` and answer by
position among the slots offered (``scheduler.core.engine``); the drivers (the extender's verbs,
the simulator) hold the names. :func:`filter_offered` and :func:`prioritize_offered` are that
round trip for any sequence of names; :class:`NamedDecision` is a filter's answer by name.

The names of a nodeCacheCapable request are kept as kube-scheduler's JSON text.

kube-scheduler sends filter and prioritize up to thousands of names and wants names back. Decoding
each into a ``str``, hashing it into an engine's index and encoding the chosen ones again costs
~60-80 ns a name in CPython, more than the web framework's whole cost per call at 5,000 names.
With the C extension ``scheduler.kube._names`` (built with the package; see its header), a
request's names stay the text they arrived as: one pass finds each name's byte span, all of
them resolve against the engine's :class:`~scheduler.core.nodeindex.NodeIndex` at once, and
answers copy the chosen spans. Without the extension (a machine that had no C compiler at
install), or for text the fast path does not take (escape sequences), the names are decoded into
a list; both paths answer byte-for-byte alike (tests/unit/test_names.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, Final, Iterator, NamedTuple, cast, overload

import msgspec
import numpy as np
import numpy.typing as npt

from scheduler.core.engine import FilterDecision, Reasons, SchedulingEngine, Scores, Verdicts
from scheduler.core.model import PodInfo
from scheduler.core.nodeindex import NodeIndex, Positions, Slots
from scheduler.kube import wire

try:
    from scheduler.kube import _names as _built  # type: ignore[attr-defined]  # a C extension: no stub, so Any to mypy
except ImportError:  # pragma: no cover - the package was installed without its C extension
    _built = None

NATIVE: Final = _built is not None  # the extension was built
native = _built  # the extension in use: None runs the Python path (use_native)


def use_native(enabled: bool) -> bool:
    """Use the extension (when built) or not, for this process (``server.nodeNameFastPath``: an
    operator's switch should they suspect it). Whether it is in use now."""
    global native
    native = _built if enabled else None
    return native is not None


_NAMES_DECODER: Final = msgspec.json.Decoder(list[str])
# Per NodeIndex, the native table of its names and the generation it was built at.
_tables: weakref.WeakKeyDictionary[NodeIndex, tuple[int, object]] = weakref.WeakKeyDictionary()


class RawNames(Sequence[str]):
    """Names as spans of the request's JSON text, optionally a selection of them (``positions``).
    Indexing or iterating decodes them (once); :meth:`slots_in`, :meth:`pick`, :meth:`json` and
    :meth:`host_priorities` never do."""

    __slots__ = ("_codec", "_text", "_spans", "_positions", "_decoded")

    def __init__(
        self,
        text: bytes | msgspec.Raw,
        spans: npt.NDArray[np.int32],
        positions: npt.NDArray[np.int64] | None = None,
        *,
        codec: Any = None,
    ) -> None:
        # Kept: answers are written by the extension that scanned, whatever use_native says later.
        self._codec = codec if codec is not None else native
        if self._codec is None:
            raise RuntimeError("RawNames needs the C extension scheduler.kube._names")
        self._text = text
        self._spans = spans  # (n, 2) int32: start and end of each name's bytes, quotes excluded
        self._positions = positions  # which of the spans, in order; None: all of them
        self._decoded: list[str] | None = None

    def __len__(self) -> int:
        return len(self._spans) if self._positions is None else len(self._positions)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._names()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __repr__(self) -> str:
        return f"RawNames({self._names()!r})"

    def _names(self) -> list[str]:
        if self._decoded is None:
            self._decoded = _NAMES_DECODER.decode(self.json())
        return self._decoded

    def _all_positions(self) -> npt.NDArray[np.int64]:
        return np.arange(len(self._spans), dtype=np.int64) if self._positions is None else self._positions

    def slots_in(self, index: NodeIndex) -> Slots:
        """As :meth:`NodeIndex.resolve` of these names."""
        slots = np.frombuffer(_table(index, self._codec).lookup(self._text, self._spans), dtype=np.int64)
        return slots if self._positions is None else slots[self._positions]

    def pick(self, positions: npt.NDArray[np.int64]) -> RawNames:
        """The names at ``positions``, in that order."""
        positions = np.ascontiguousarray(positions, dtype=np.int64)  # no copy when it already is
        chosen = positions if self._positions is None else self._positions[positions]
        return RawNames(self._text, self._spans, chosen, codec=self._codec)

    def json(self) -> bytes:
        """The names as a JSON array."""
        return cast(bytes, self._codec.select(self._text, self._spans, self._all_positions()))  # the untyped extension's bytes

    def host_priorities(self, scores: Scores) -> bytes:
        """kube-scheduler's HostPriorityList for these names with ``scores``, as JSON."""
        spans = self._spans if self._positions is None else np.ascontiguousarray(self._spans[self._positions])
        return cast(bytes, self._codec.host_priorities(self._text, spans, scores))  # the untyped extension's bytes


class ExtenderArgs(NamedTuple):
    """kube-scheduler's ExtenderArgs as filter and prioritize use them."""

    pod: wire.Pod
    names: Sequence[str] | None  # nodeCacheCapable: the offered names
    nodes: wire.RawNodeList | None  # otherwise: the offered Node objects


def decode_extender_args(body: bytes) -> ExtenderArgs:
    """The request of filter or prioritize. kube-scheduler's own shape (a Pod, node names, a
    null Nodes) is split in one pass, msgspec decoding only the Pod; any other body, or one that
    fails there, is decoded whole as without the extension, so that errors read the same either
    way. Raises InvalidRequest."""
    if native is not None:
        split = native.split_args(body)
        if split is not None:
            pod_start, pod_end, spans = split
            try:
                pod = wire.POD_DECODER.decode(memoryview(body)[pod_start:pod_end])
            except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
                pass  # decoded whole below, for the error with its path
            else:
                return ExtenderArgs(pod, RawNames(body, np.frombuffer(spans, dtype=np.int32).reshape(-1, 2)), None)
    args = wire.decode(wire.EXTENDER_ARGS_DECODER, body)
    return ExtenderArgs(args.Pod, args.NodeNames, args.Nodes)


def offered_slots(names: Sequence[str], index: NodeIndex) -> Slots:
    """The slot of each offered name in ``index``, UNKNOWN where it holds none; in bulk for a
    request's raw names."""
    if isinstance(names, RawNames):
        return names.slots_in(index)
    return index.resolve(names)


def pick(names: Sequence[str], positions: Positions) -> Sequence[str]:
    """``[names[i] for i in positions]``, in bulk for a request's raw names. ``positions`` are
    indices in ``range(len(names))``, as ``np.flatnonzero`` gives them."""
    if isinstance(names, RawNames):
        return names.pick(positions)
    return [names[i] for i in positions.tolist()]


class NamedDecision:
    """An engine's :class:`~scheduler.core.engine.FilterDecision` over the slots of ``names``,
    told by name as kube-scheduler reads it. The reasons are built on first access (the
    engine's ``explain``), as the decision's are."""

    __slots__ = ("decision", "names", "feasible", "_reasons")

    def __init__(self, decision: FilterDecision, names: Sequence[str]) -> None:
        self.decision = decision
        self.names = names
        positions = decision.feasible
        # The feasible names: the very names offered when every one is (read, do not change).
        self.feasible: Sequence[str] = names if len(positions) == len(names) else pick(names, positions)
        self._reasons: tuple[Reasons, Reasons] | None = None

    @property
    def failed_count(self) -> int:
        return self.decision.failed_count

    @property
    def unresolvable_count(self) -> int:
        return self.decision.unresolvable_count

    @property
    def failed(self) -> Reasons:
        return self._named()[0]

    @property
    def unresolvable(self) -> Reasons:
        return self._named()[1]

    def _named(self) -> tuple[Reasons, Reasons]:
        if self._reasons is None:
            decision = self.decision
            failed = _merged(self._groups(decision.failed))
            groups = self._groups(decision.unresolvable)
            by_name = decision.by_name
            if by_name is not None and len(decision.named_at):
                named = pick(self.names, decision.named_at)
                # Where the engine's answers by name had these nodes among the others.
                groups.insert(min(decision.named_after, len(groups)), dict(zip(named, map(by_name, named))))
            self._reasons = (failed, _merged(groups))
        return self._reasons

    def _groups(self, verdicts: Verdicts) -> list[Reasons]:
        """Each reason's nodes by name, in the verdicts' order."""
        return [dict.fromkeys(pick(self.names, positions), reason) for reason, positions in verdicts.items()]

    def __repr__(self) -> str:
        return f"NamedDecision(feasible={list(self.feasible)!r}, failed={self.failed!r}, unresolvable={self.unresolvable!r})"


def _merged(groups: list[Reasons]) -> Reasons:
    """The ``groups`` in one dict, in order; the first (often every node) becomes it, not copied."""
    if not groups:
        return {}
    reasons = groups[0]
    for group in groups[1:]:
        reasons.update(group)
    return reasons


def filter_offered(engine: SchedulingEngine, pod: PodInfo, names: Sequence[str]) -> NamedDecision:
    """``engine``'s filter of the nodes ``names``, by name."""
    return NamedDecision(engine.filter(pod, offered_slots(names, engine.node_index)), names)


def prioritize_offered(engine: SchedulingEngine, pod: PodInfo, names: Sequence[str]) -> Scores:
    """``engine``'s scores of the nodes ``names``, in their order."""
    return engine.prioritize(pod, offered_slots(names, engine.node_index))


def names_json(names: Sequence[str]) -> msgspec.Raw:
    """``names`` as a JSON array, to be embedded in an answer."""
    if isinstance(names, RawNames):
        return msgspec.Raw(names.json())
    return msgspec.Raw(wire.ENCODER.encode(list(names)))


def host_priorities_json(names: Sequence[str], scores: Scores) -> bytes:
    """kube-scheduler's HostPriorityList: ``[{"Host": name, "Score": score}, ...]``."""
    if isinstance(names, RawNames):
        return names.host_priorities(scores)
    return wire.ENCODER.encode(list(map(wire.HostPriority, names, scores.tolist())))


def _table(index: NodeIndex, codec: Any):  # type: ignore[no-untyped-def]
    """The native table of ``index``'s names, rebuilt when they changed. Callers hold the
    engine's lock (the index changes with the engine's nodes)."""
    cached = _tables.get(index)
    if cached is not None and cached[0] == index.generation:
        return cached[1]
    table = codec.NameTable(index.names)
    _tables[index] = (index.generation, table)
    return table
