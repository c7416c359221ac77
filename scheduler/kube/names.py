"""The node names of a nodeCacheCapable request, kept as kube-scheduler's JSON text.

kube-scheduler sends filter and prioritize up to thousands of names and wants names back. Decoding
each into a ``str``, hashing it into an engine's index and encoding the chosen ones again costs
~60-80 ns a name in CPython, more than the web framework's whole cost per call at 5,000 names.
With the C extension ``scheduler.kube._names`` (built with the package; see its header), a
request's names stay the text they arrived as: one pass finds each name's byte span, engines
resolve all of them against their :class:`~scheduler.core.nodeindex.NodeIndex` at once, and
answers copy the chosen spans. Without the extension (a machine that had no C compiler at
install), or for text the fast path does not take (escape sequences), the names are decoded into
a list as before; both paths answer byte-for-byte alike (tests/unit/test_names.py).
"""

from __future__ import annotations

import weakref
from typing import Any, Final, Iterator, NamedTuple, Sequence, cast, overload

import msgspec
import numpy as np
import numpy.typing as npt

from scheduler.core.engine import Scores
from scheduler.core.nodeindex import NodeIndex, OfferedNames, Slots
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


class RawNames(OfferedNames):
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
        slots = np.frombuffer(_table(index, self._codec).lookup(self._text, self._spans), dtype=np.int64)
        return slots if self._positions is None else slots[self._positions]

    def pick(self, positions: npt.NDArray[np.int64]) -> RawNames:
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
    engine's lock (engines resolve names inside their decisions)."""
    cached = _tables.get(index)
    if cached is not None and cached[0] == index.generation:
        return cached[1]
    table = codec.NameTable(index.names)
    _tables[index] = (index.generation, table)
    return table
