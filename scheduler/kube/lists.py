"""A page of an API list response, its items found without holding the GIL.

A relist reads the API server's list in pages of ~500 objects (~1 MB of pods) in the
reflector's thread, while the verbs run on the server's event loop in another. Finding a page's
items with msgspec (``wire.RAW_LIST_DECODER``) is one call that holds the GIL for the whole page,
~1-2 ms, and CPython hands the GIL to a waiting thread only every 5 ms: every verb that arrived
meanwhile waited up to ~7 ms. With the C extension ``scheduler.kube._names`` (``split_list``) the
page is scanned with the GIL released; only its small ``metadata`` object is decoded here, and
each item becomes a ``msgspec.Raw`` when the relist reads it, in its own step on the verbs' loop.

Without the extension, or for a page the scan declines (not an object whose ``items`` are
objects), the page is decoded with msgspec as before, which also names what is wrong.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence, overload

import msgspec
import numpy as np
import numpy.typing as npt

from scheduler.kube import names, wire

_META_DECODER = msgspec.json.Decoder(wire.ListMeta)


class ListPage(NamedTuple):
    metadata: wire.ListMeta
    items: Sequence[msgspec.Raw]  # each item's JSON, made when read


class SpannedItems(Sequence[msgspec.Raw]):
    """Items of one page as byte spans of its body; each read makes a ``msgspec.Raw`` viewing the
    body (no copy), so the body lives while any item read from it does."""

    __slots__ = ("_body", "_spans")

    def __init__(self, body: bytes, spans: npt.NDArray[np.int64]) -> None:
        self._body = memoryview(body)
        self._spans = spans  # (n, 2): start and end of each item

    def __len__(self) -> int:
        return len(self._spans)

    @overload
    def __getitem__(self, index: int) -> msgspec.Raw: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[msgspec.Raw]: ...
    def __getitem__(self, index: int | slice) -> msgspec.Raw | Sequence[msgspec.Raw]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        start, end = self._spans[index].tolist()
        return msgspec.Raw(self._body[start:end])

    def __iter__(self) -> Iterator[msgspec.Raw]:
        return (self[i] for i in range(len(self)))


def read_page(body: bytes) -> ListPage:
    """The page's metadata and items. Raises ``msgspec.DecodeError`` / ``ValidationError`` for a
    body that is not a list response."""
    split = names.native.split_list(body) if names.native is not None else None
    if split is None:
        listing = wire.RAW_LIST_DECODER.decode(body)
        return ListPage(listing.metadata, listing.items or ())
    metadata_start, metadata_end, spans = split
    metadata = _META_DECODER.decode(memoryview(body)[metadata_start:metadata_end]) if metadata_start >= 0 else wire.ListMeta()
    return ListPage(metadata, SpannedItems(body, np.frombuffer(spans, dtype=np.int64).reshape(-1, 2)))
