"""Attacks on the node-name fast path: the C extension ``scheduler.kube._names`` and its Python
side ``scheduler.kube.names``.

The pure-Python path (no extension, or ``scan``/``split_args`` declining the text) is the
reference: whichever path runs, a request must decode to the same pod and names, fail with the
same error, and be answered with the same bytes. So every test here either checks a native
function against what msgspec (the pure path's decoder and encoder) says about the same input,
or runs the same call twice, once with ``names.native`` patched to ``None``, and compares.

Tests of defects still in the code are ``xfail(strict=True)`` with the reason starting
``defect:``: they keep the suite green until the fix lands, then fail so the marker goes.
"""

from __future__ import annotations

import gc
import json
import random
import string
import sys
import tracemalloc
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.config import Settings, parse_settings
from scheduler.constants import RESOURCE_NVIDIA_GPU
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.nodeindex import NodeIndex
from scheduler.kube.names import pick
from scheduler.core.resources import Resources
from scheduler.errors import InvalidRequest
from scheduler.extender.runtime import Runtime, build_runtime
from scheduler.kube import names, translate, wire
from tests.support import hived as hived_cells
from tests.support import kube_objects as k

native = pytest.importorskip("scheduler.kube._names", reason="built without the C extension: nothing to compare")

NAMES_DECODER = msgspec.json.Decoder(list[str])
GI = 2**30
INT64 = st.integers(-(2**63), 2**63 - 1)
# JSON's four whitespace bytes; \x0b and \x0c are not among them and must be refused.
WHITESPACE = st.text(alphabet=" \t\n\r", max_size=3)
# Characters the fast path takes unescaped in a string: ASCII ones JSON allows (a node name is
# ASCII; other text goes to msgspec, which checks its UTF-8, and is tested against it below).
PLAIN_CHARS = st.characters(exclude_characters='"\\', min_codepoint=0x20, max_codepoint=0x7F)
PLAIN_TEXT = st.text(PLAIN_CHARS, max_size=90)
DNS_ALPHABET = string.ascii_lowercase + string.digits + "-."
# Byte lengths around the C code's word (8) and SSE (16) steps, and the span array's first growth.
EDGE_LENGTHS = (0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 63, 64, 65, 80)
# Invalid UTF-8 inside a string: lone continuation, truncated sequence, encoded surrogate,
# overlong form, beyond U+10FFFF; the last one long enough for the 16-byte SSE scan.
INVALID_UTF8 = (b"\xff", b"\x80", b"n\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"node-" * 4 + b"\xfe")


# ---------------------------------------------------------------------------------- helpers


@contextmanager
def pure_path() -> Iterator[None]:
    """Run the block as on a machine without the extension (the reference path)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(names, "native", None)
        yield


def msgspec_names(text: bytes) -> list[str] | None:
    """What the pure path decodes ``text`` to, or None where it refuses it (however it refuses:
    msgspec raises UnicodeDecodeError for invalid UTF-8, not a DecodeError)."""
    try:
        return NAMES_DECODER.decode(text)
    except (msgspec.MsgspecError, UnicodeDecodeError):
        return None


def span_pairs(spans: bytes) -> list[tuple[int, int]]:
    flat = np.frombuffer(spans, dtype=np.int32).tolist()
    return list(zip(flat[::2], flat[1::2]))


def check_scan(text: bytes) -> bytes | None:
    """scan's contract against msgspec: spans only for text msgspec takes, decoding to its list;
    None allowed only where msgspec refuses, an escape sequence appears (a backslash can only be
    an escape inside a string in valid JSON) or a byte is not ASCII (left to msgspec, which
    checks the UTF-8; node names are ASCII), so plain arrays always take the fast path."""
    expected = msgspec_names(text)
    spans = native.scan(text)
    if spans is None:
        assert expected is None or b"\\" in text or not text.isascii(), f"scan declined a plain array: {text!r}"
        return None
    assert expected is not None, f"scan gave spans for text msgspec refuses: {text!r}"
    assert [text[start:end].decode() for start, end in span_pairs(spans)] == expected
    return spans


def raw_text(items: Sequence[str]) -> tuple[bytes, bytes]:
    """``items`` laid out as ``["a","b"]`` byte for byte (no escaping: lookup, select and
    host_priorities read spans, not JSON) and their int32 spans."""
    out, spans = bytearray(b"["), []
    for i, item in enumerate(items):
        out += b',"' if i else b'"'
        spans.append(len(out))
        out += item.encode()
        spans.append(len(out))
        out += b'"'
    out += b"]"
    return bytes(out), np.array(spans, dtype=np.int32).tobytes()


def slots_of(table: Any, items: Sequence[str]) -> list[int]:
    text, spans = raw_text(items)
    return np.frombuffer(table.lookup(text, spans), dtype=np.int64).tolist()


def raw_names(items: Sequence[str]) -> names.RawNames:
    """``items`` as the fast path holds them (each must be plain)."""
    text = json.dumps(list(items), ensure_ascii=False).encode()
    spans = native.scan(text)
    assert spans is not None, items
    return names.RawNames(text, np.frombuffer(spans, dtype=np.int32).reshape(-1, 2))


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """A call's result or its failure, comparable between the two paths."""
    try:
        return ("ok", call())
    except InvalidRequest as error:
        return ("InvalidRequest", str(error), error.field)
    except Exception as error:  # noqa: BLE001 - any other failure must also match
        return (type(error).__name__, str(error))


def both_paths(call: Callable[[], Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    native_outcome = outcome(call)
    with pure_path():
        pure_outcome = outcome(call)
    return native_outcome, pure_outcome


def assert_paths_agree(call: Callable[[], Any], context: object = None) -> tuple[Any, ...]:
    """``call``'s outcome, which must be the same with and without the extension."""
    native_outcome, pure_outcome = both_paths(call)
    assert native_outcome == pure_outcome, context
    return native_outcome


def as_values(pod: wire.Pod, offered: Sequence[str] | None, nodes: wire.RawNodeList | None) -> tuple[Any, ...]:
    # Listing the names is its own outcome: a fast path that accepted what the pure one refuses
    # shows as a decode that succeeded with names that then fail, not as the same exception.
    return pod, outcome(lambda: None if offered is None else list(offered)), nodes


def decoded_args(body: bytes) -> tuple[Any, ...]:
    """decode_extender_args's answer as values: the pod struct, the names as a list, the nodes."""
    return as_values(*names.decode_extender_args(body))


def escape_char(char: str, form: int) -> str:
    """``char`` in a JSON string: raw where allowed (form 0), else a short escape (form 1) or a
    \\u escape in lower (2) or upper (3) case; beyond the BMP, a surrogate pair."""
    short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if form == 0 and char not in '"\\' and ord(char) >= 0x20:
        return char
    if form <= 1 and char in short:
        return short[char]
    code = ord(char)
    units = [code] if code <= 0xFFFF else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    return "".join(f"\\u{unit:04X}" if form == 3 else f"\\u{unit:04x}" for unit in units)


@st.composite
def encoded_strings(draw: st.DrawFn, values: st.SearchStrategy[str] = st.text(max_size=90)) -> str:
    """A string's JSON text, quotes included, each character in a random allowed form."""
    value = draw(values)
    forms = draw(st.lists(st.sampled_from((0, 0, 0, 1, 2, 3)), min_size=len(value), max_size=len(value)))
    return '"' + "".join(map(escape_char, value, forms)) + '"'


@st.composite
def json_arrays(draw: st.DrawFn, elements: st.SearchStrategy[str], max_size: int = 12) -> bytes:
    """A JSON array of ``elements`` (JSON texts) with random whitespace around every token."""
    items = draw(st.lists(elements, max_size=max_size))
    body = ",".join(draw(WHITESPACE) + item + draw(WHITESPACE) for item in items)
    return (draw(WHITESPACE) + "[" + (body or draw(WHITESPACE)) + "]" + draw(WHITESPACE)).encode()


NON_STRINGS = st.sampled_from(["null", "0", "-1.5e3", "true", "false", "{}", '{"a":"b"}', "[]", '["a"]', '[["a"]]'])


# ---------------------------------------------------------------------------------- scan


@settings(max_examples=300, deadline=None)
@given(json_arrays(encoded_strings()))
@example(b'["\\u0061"]')
@example(b'["a\\/b"]')
@example(b'["\\ud83d\\ude00"]')
def test_scan_agrees_with_msgspec_on_arrays_of_any_strings(text: bytes) -> None:
    """Arbitrary strings in every escape form, arbitrary whitespace: spans decode to msgspec's
    list, and a text without escapes always takes the fast path."""
    check_scan(text)


@settings(max_examples=100, deadline=None)
@given(json_arrays(PLAIN_TEXT.map(lambda value: f'"{value}"'), max_size=300))
def test_scan_takes_every_plain_array(text: bytes) -> None:
    """Up to 300 escape-free strings (the span array starts at 64 and grows): never declined."""
    assert check_scan(text) is not None


def test_scan_large_counts_grow_the_span_array() -> None:
    """65, 129 and 5,000 names: each growth of the span array keeps the earlier spans."""
    for count in (63, 64, 65, 128, 129, 5000):
        items = [f"gpu-node-{i:05d}" + "x" * (i % 40) for i in range(count)]
        text = json.dumps(items).encode()
        spans = check_scan(text)
        assert spans is not None and len(spans) == 8 * count


@settings(max_examples=300, deadline=None)
@given(
    json_arrays(st.one_of(encoded_strings(PLAIN_TEXT), NON_STRINGS)),
    st.sampled_from(["truncate", "append", "insert", "delete", "replace"]),
    st.integers(min_value=0),
    st.sampled_from(list(' ,[]{}":x0\\\x00\x01\x1f\x7f\x0b\x0cn') + ["null", "[]", '"a"', ',"a"', "]]"]),
)
def test_scan_never_gives_spans_for_text_msgspec_refuses(text: bytes, how: str, where: int, token: str) -> None:
    """Arrays with non-string elements, nested arrays, then cut, padded, or with one byte added,
    removed or replaced anywhere: the contract holds for whatever comes out. (ASCII mutations
    only: invalid UTF-8 is its own, failing, test below.)"""
    at = where % (len(text) + 1)
    piece = token.encode()
    mutated = {
        "truncate": text[:at],
        "append": text + piece,
        "insert": text[:at] + piece + text[at:],
        "delete": text[:at] + text[at + 1 :],
        "replace": text[:at] + piece + text[at + 1 :],
    }[how]
    check_scan(mutated)


@pytest.mark.parametrize(
    "text",
    [
        b"", b" ", b"null", b"[", b"]", b"[]", b" [ ] ", b"[\t\r\n]", b"[,]", b'["a"', b'["a",]', b'[,"a"]',
        b'["a" "b"]', b'["a"]x', b'["a"],', b'["a"]]', b'[["a"]]', b'[1]', b'["a",null]', b'{"a":1}', b'"a"',
        b'["a\x00"]', b'["a\x1f"]', b'["a\x7f"]', b'["a\nb"]', b'\xef\xbb\xbf["a"]', b'["a"]\x00', b'[\x0b"a"]',
        b'["a"]\x0c', b'["' + b"x" * 15 + b'\\"]', b'["' + b"x" * 16 + b'\x01"]', b'["' + b"x" * 40,
        b'["\x01' + b"x" * 20 + b'"]', b'["' + b"x" * 8 + b'\x1f' + b"x" * 20 + b'"]',
        b'["' + b"x" * 8 + b'\\n' + b"x" * 20 + b'"]',
        b'["' + b"\xc3\xa9" * 20 + b'"]', b'[""]', b'["",""]', b'["\\u0000"]',
    ],
)
def test_scan_edge_texts(text: bytes) -> None:
    """Hand-picked corners: empty input, null, unterminated strings, control characters on both
    sides of the 16-byte SSE boundary, a BOM, not-quite-whitespace."""
    check_scan(text)


def test_scan_accepts_any_buffer_and_rejects_others() -> None:
    """Request bodies and msgspec.Raw values both reach scan; a str is not a buffer."""
    for text in (bytearray(b'["a"]'), memoryview(b'["a"]'), msgspec.Raw(b'["a"]')):
        assert native.scan(text) == native.scan(b'["a"]')
    with pytest.raises(TypeError):
        native.scan('["a"]')  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", INVALID_UTF8)
def test_scan_refuses_invalid_utf8(bad: bytes) -> None:
    """A name's bytes are copied into answers unchecked, so scan must not pass what msgspec
    would refuse (the pure path raises UnicodeDecodeError for these)."""
    check_scan(b'["ok","' + bad + b'"]')


# ---------------------------------------------------------------------------------- NameTable


@st.composite
def name_families(draw: st.DrawFn) -> list[str]:
    """Names that stress the hash and the word-wise comparison: one prefix cut at the edge
    lengths, each with a twin differing only in its last byte (or first), plus random names."""
    prefix = draw(st.text(DNS_ALPHABET, min_size=1, max_size=8)) * 10
    family: list[str] = []
    for length in draw(st.lists(st.sampled_from(EDGE_LENGTHS), max_size=6, unique=True)):
        base = prefix[:length]
        family.append(base)
        if length:
            family.append(base[:-1] + chr(ord(base[-1]) ^ 1))
            family.append(chr(ord(base[0]) ^ 2) + base[1:])
    family += draw(st.lists(st.text(max_size=80), max_size=8))
    return list(dict.fromkeys(family))


@settings(max_examples=200, deadline=None)
@given(name_families(), name_families(), st.lists(st.booleans(), max_size=30))
@example(["a" * 8, "a" * 7 + "b"], ["a" * 9, "a" * 7], [])
@example([], ["", "x"], [True, True])
def test_lookup_equals_a_dict(held: list[str], others: list[str], holes: list[bool]) -> None:
    """NameTable(slots).lookup gives each probed name's slot as a dict would, -1 for unknown
    names (near misses included), with None holes taking slot numbers but no name."""
    slots: list[str | None] = []
    for name in held:
        while holes and holes.pop():
            slots.append(None)
        slots.append(name)
    slots += [None] * len(holes)
    expected = {name: slot for slot, name in enumerate(slots) if name is not None}
    table = native.NameTable(slots)
    assert table.size == len(expected)
    probes = held + others + [name + "x" for name in held] + [name[:-1] for name in held if name]
    assert slots_of(table, probes) == [expected.get(name, -1) for name in probes]


def test_lookup_with_many_names_and_colliding_shapes() -> None:
    """5,000 names of one length, differing in one byte at every position: the table's probing
    and byte-wise confirmation under load."""
    base = "gpu-node-rack-07-"  # 17 bytes
    held = [base[:position] + chr(97 + i % 26) + base[position + 1 :] + f"{i:05d}" for position in range(17) for i in range(300)]
    held = list(dict.fromkeys(held))
    table = native.NameTable(held)
    expected = {name: slot for slot, name in enumerate(held)}
    probes = held[::-1] + [name[:-1] + "#" for name in held[:500]]
    assert slots_of(table, probes) == [expected.get(name, -1) for name in probes]


def test_name_table_refuses_bad_names() -> None:
    """Duplicates and non-str raise, naming the slot; a failed build leaves no usable table."""
    with pytest.raises(ValueError, match=r"names\[2\]: 'b' appears twice"):
        native.NameTable(["a", "b", "b"])
    with pytest.raises(ValueError, match="appears twice"):
        native.NameTable(["", None, ""])
    for bad in (b"a", 1, 1.5, ["a"]):
        with pytest.raises(TypeError, match=r"names\[1\] must be str or None"):
            native.NameTable(["a", bad])
    with pytest.raises(TypeError):
        native.NameTable(3)
    with pytest.raises(UnicodeEncodeError):  # unreachable from JSON: msgspec refuses lone surrogates
        native.NameTable(["\ud800"])
    table = native.NameTable(["a"])
    with pytest.raises(ValueError):
        table.__init__(["a", "a"])
    with pytest.raises(RuntimeError, match="not initialised"):
        table.lookup(b'["a"]', np.array([2, 3], dtype=np.int32).tobytes())
    with pytest.raises(RuntimeError, match="not initialised"):
        native.NameTable.__new__(native.NameTable).lookup(b'["a"]', b"")


def test_name_table_empty_and_rebuilt() -> None:
    """An empty table (or one of holes only) knows nothing; __init__ again replaces the names."""
    for empty in ([], [None, None], (), iter([])):
        table = native.NameTable(empty)
        assert table.size == 0
        assert slots_of(table, ["", "a"]) == [-1, -1]
    table = native.NameTable(("a", "b"))
    table.__init__(["b", None, "c"])
    assert table.size == 2 and slots_of(table, ["a", "b", "c"]) == [-1, 0, 2]


# ---------------------------------------------------------------------------------- spans checks


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.lists(st.tuples(st.integers(-3, 45), st.integers(-3, 45)), max_size=4), st.integers(0, 7))
def test_every_span_reader_checks_spans(length: int, pairs: list[tuple[int, int]], extra_bytes: int) -> None:
    """lookup, select and host_priorities accept exactly the spans lying inside the text's
    quotes (1 <= start <= end <= len - 1) as whole int32 pairs, and refuse anything else with
    ValueError rather than reading outside the text."""
    text = b"[" + b"x" * max(length - 2, 0) + b"]" if length >= 2 else b"[" * length
    spans = np.array(pairs, dtype=np.int32).reshape(-1, 2).tobytes() + b"\0" * extra_bytes
    fine = extra_bytes % 8 == 0 and all(1 <= start <= end < len(text) for start, end in pairs)
    table = native.NameTable(["x", "xx"])
    calls = {
        "lookup": lambda: table.lookup(text, spans),
        "select": lambda: native.select(text, spans, b""),
        "host_priorities": lambda: native.host_priorities(text, spans, [0] * (len(spans) // 8)),
    }
    for call in calls.values():
        if fine:
            call()
        else:
            with pytest.raises(ValueError):
                call()


# ---------------------------------------------------------------------------------- select, host_priorities


@settings(max_examples=200, deadline=None)
@given(st.lists(PLAIN_TEXT, max_size=20), st.data())
def test_select_writes_what_msgspec_would(items: list[str], data: st.DataObject) -> None:
    """select's output is byte for byte msgspec's encoding of the picked names (the pure
    path's answer), in any order, with repeats; positions as bytes or an int64 array."""
    text, spans = raw_text(items)
    positions = data.draw(positions_into(len(items), max_size=30))
    expected = wire.ENCODER.encode([items[i] for i in positions])
    as_array = np.array(positions, dtype=np.int64)
    assert native.select(text, spans, as_array) == expected
    assert native.select(text, spans, as_array.tobytes()) == expected
    assert json.loads(expected) == [items[i] for i in positions]


@pytest.mark.parametrize("position", [-1, 3, 2**31, -(2**63), 2**63 - 1])
def test_select_refuses_positions_out_of_range(position: int) -> None:
    text, spans = raw_text(["a", "b", "c"])
    with pytest.raises(IndexError, match=r"positions\[1\]"):
        native.select(text, spans, np.array([0, position], dtype=np.int64))


def test_select_refuses_malformed_positions() -> None:
    """Positions are whole, contiguous int64 values or refused (never read past their end)."""
    text, spans = raw_text(["a", "b", "c"])
    with pytest.raises(ValueError, match="int64"):
        native.select(text, spans, b"\0" * 12)
    with pytest.raises(ValueError, match="C-contiguous"):
        native.select(text, spans, np.arange(4, dtype=np.int64)[::2])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(PLAIN_TEXT, INT64), max_size=20))
@example([("a", -(2**63)), ("b", 2**63 - 1), ("", 0), ("c", -1)])
def test_host_priorities_writes_what_msgspec_would(pairs: list[tuple[str, int]]) -> None:
    """kube-scheduler's HostPriorityList, byte for byte the pure path's, for any int64 score,
    the scores a list or an int64 array."""
    items, scores = [name for name, _ in pairs], [score for _, score in pairs]
    text, spans = raw_text(items)
    expected = wire.ENCODER.encode(list(map(wire.HostPriority, items, scores)))
    assert native.host_priorities(text, spans, scores) == expected
    assert native.host_priorities(text, spans, np.array(scores, dtype=np.int64)) == expected
    assert native.host_priorities(text, spans, tuple(scores)) == expected


@pytest.mark.parametrize(
    ("scores", "error"),
    [
        ([1], ValueError), ([1, 2, 3], ValueError), ([1.0, 2], TypeError), (["1", 2], TypeError),
        ([None, 2], TypeError), ([1, 2**63], OverflowError), ([-(2**63) - 1, 0], OverflowError), (3, TypeError),
        (np.array([1.5, 2.0]), TypeError), (np.array([1, 2], dtype=np.int32), TypeError),
        (np.zeros((2, 1), dtype=np.int64), TypeError), (np.arange(4, dtype=np.int64)[::2], ValueError),
        (np.array([1], dtype=np.int64), ValueError),
    ],
)
def test_host_priorities_refuses_bad_scores(scores: Any, error: type[Exception]) -> None:
    text, spans = raw_text(["a", "b"])
    with pytest.raises(error):
        native.host_priorities(text, spans, scores)


# ---------------------------------------------------------------------------------- RawNames


def positions_into(count: int, max_size: int = 20) -> st.SearchStrategy[list[int]]:
    """Positions (repeats allowed) into a sequence of ``count`` names."""
    return st.lists(st.integers(0, count - 1), max_size=max_size) if count else st.just([])


@settings(max_examples=150, deadline=None)
@given(st.lists(PLAIN_TEXT, max_size=15), st.data())
def test_raw_names_behave_as_the_list(items: list[str], data: st.DataObject) -> None:
    """RawNames as a Sequence, and picked (twice), answer as the plain list does through the
    module's two writers: names_json and host_priorities_json."""
    raw = raw_names(items)
    assert list(raw) == items and len(raw) == len(items) and raw[:] == items
    assert all(name in raw for name in items) and repr(raw) == f"RawNames({items!r})"
    first = np.array(data.draw(positions_into(len(items))), dtype=np.int64)
    second = np.array(data.draw(positions_into(len(first))), dtype=np.int64)
    for fast, plain in ((raw, items), (pick(raw, first), pick(items, first))):
        assert list(fast) == list(plain)
        assert names.names_json(fast) == names.names_json(list(plain))
        scores = np.arange(-len(plain), 0, dtype=np.int64)
        assert names.host_priorities_json(fast, scores) == names.host_priorities_json(list(plain), scores)
    twice = pick(pick(raw, first), second)
    assert names.names_json(twice) == names.names_json(pick(pick(items, first), second))


def test_pick_takes_any_integer_positions() -> None:
    """nodeindex.pick of a list works for any integer array; the RawNames one must too."""
    positions = np.array([1, 0], dtype=np.int32)
    assert list(pick(raw_names(["a", "bb"]), positions)) == pick(["a", "bb"], positions)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.text(DNS_ALPHABET, max_size=20)), min_size=1, max_size=60), st.data())
def test_slots_in_follows_the_index_as_it_changes(operations: list[tuple[bool, str]], data: st.DataObject) -> None:
    """The native table is cached per NodeIndex generation: after every add or remove, RawNames
    resolve exactly as the plain list does through NodeIndex.resolve."""
    index = NodeIndex()
    seen: list[str] = []
    for add, name in operations:
        (index.add if add else index.remove)(name)
        seen.append(name)
        probes = data.draw(st.lists(st.sampled_from(seen + ["ghost"]), max_size=10))
        raw = raw_names(probes)
        assert index.resolve(raw).tolist() == index.resolve(probes).tolist()
        positions = np.array(data.draw(positions_into(len(probes), max_size=5)), dtype=np.int64)
        assert raw.pick(positions).slots_in(index).tolist() == index.resolve(pick(probes, positions)).tolist()


# ---------------------------------------------------------------------------------- request bodies


def dump(value: Any, rng: random.Random) -> str:
    """JSON as kube-scheduler could write it, but with keys in random order, random whitespace
    between every token, and non-ASCII sometimes escaped."""

    def space() -> str:
        return rng.choice(("", "", "", " ", "\n", "\t", "\r\n  "))

    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        fields = (f"{space()}{json.dumps(key)}{space()}:{space()}{dump(value[key], rng)}{space()}" for key in keys)
        return "{" + ",".join(fields) + "}"
    if isinstance(value, list):
        return "[" + ",".join(space() + dump(item, rng) + space() for item in value) + "]"
    return json.dumps(value, ensure_ascii=rng.random() < 0.3)


# Strings that fool a bracket counter that forgets about strings or escapes.
TRICKY_TEXT = st.lists(st.sampled_from([*'{}[]"\\:,x é\n\t/', '\\"', "}}", "]]", '"}', "\u2028"]), max_size=8).map("".join)
NODE_NAMES = st.one_of(st.text(DNS_ALPHABET, max_size=30), PLAIN_TEXT, st.text(max_size=10))


@st.composite
def extender_args(draw: st.DrawFn) -> dict[str, Any]:
    """kube-scheduler's ExtenderArgs (nodeCacheCapable) for a pod whose labels and annotations
    hold brackets, quotes and escapes."""
    pod = k.pod(
        draw(st.text(DNS_ALPHABET, min_size=1, max_size=12)) + "-0",
        uid="0b4e6f7c-1d2e-4f3a-8b9c-0d1e2f3a4b5c",
        gpus=draw(st.integers(0, 8)),
        labels=draw(st.dictionaries(TRICKY_TEXT, TRICKY_TEXT, max_size=3)),
        annotations=draw(st.dictionaries(TRICKY_TEXT, TRICKY_TEXT, max_size=3)),
    )
    offered = draw(st.lists(NODE_NAMES, max_size=70))
    return k.extender_args(pod, [{"metadata": {"name": name}} for name in offered], node_cache_capable=True)


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "as kube-scheduler": lambda args: None,
    "no Nodes": lambda args: args.pop("Nodes"),
    "Nodes empty list": lambda args: args.update(Nodes={"items": []}),
    "NodeNames null": lambda args: args.update(NodeNames=None),
    "no NodeNames": lambda args: args.pop("NodeNames"),
    "no Pod": lambda args: args.pop("Pod"),
    "extra key": lambda args: args.update(Extra={"NodeNames": ["x"]}),
    "nodeNames lower case": lambda args: args.update(nodeNames=["x"]),
    "Pod a list": lambda args: args.update(Pod=[args["Pod"]]),
    "Pod a string": lambda args: args.update(Pod="{}"),
    "Pod null": lambda args: args.update(Pod=None),
    "Pod empty": lambda args: args.update(Pod={}),
    "name not a string": lambda args: args.update(NodeNames=[*args["NodeNames"], 7]),
    "names nested": lambda args: args.update(NodeNames=[args["NodeNames"]]),
    "names an object": lambda args: args.update(NodeNames={"a": "b"}),
    "annotation nested": lambda args: args["Pod"]["metadata"]["annotations"].update(deep=nested(60)),
    "unknown pod field nested": lambda args: args["Pod"].update(extra=nested(200)),
    "pod name a number": lambda args: args["Pod"]["metadata"].update(name=5),
}
TEXT_EDITS = ("none", "duplicate Pod", "duplicate NodeNames", "duplicate Nodes", "truncate", "drop byte", "add byte", "trailing")


def edit_text(body: bytes, how: str, at: int, byte: bytes) -> bytes:
    """Damage that only text can show: duplicate keys, a cut, an unbalanced bracket, garbage."""
    cut = at % (len(body) + 1)
    first = body.index(b"{") + 1
    return {
        "none": body,
        "duplicate Pod": body[:first] + b'"Pod":{"metadata":{"name":"twin"}},' + body[first:],
        "duplicate NodeNames": body[:first] + b'"NodeNames":["twin"],' + body[first:],
        "duplicate Nodes": body[:first] + b'"Nodes":null,' + body[first:],
        "truncate": body[:cut],
        "drop byte": body[:cut] + body[cut + 1 :],
        "add byte": body[:cut] + byte + body[cut:],
        "trailing": body + byte,
    }[how]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    extender_args(),
    st.sampled_from(sorted(HOSTILE_EDITS)),
    st.sampled_from(TEXT_EDITS),
    st.integers(min_value=0),
    st.sampled_from([b"{", b"}", b"[", b"]", b'"', b",", b"\\", b" ", b"x", b"\x00"]),
    st.randoms(use_true_random=False),
)
def test_decode_extender_args_same_on_both_paths(
    args: dict[str, Any], edit: str, text_edit: str, at: int, byte: bytes, rng: random.Random
) -> None:
    """Any body, well-formed or damaged: the same pod, the same names in order, the same nodes,
    or the same InvalidRequest message as the pure decoding the fast path falls back to, and
    the same verdict as decoding without the extension."""
    HOSTILE_EDITS[edit](args)
    body = edit_text(dump(args, rng).encode(), text_edit, at, byte)
    native_outcome, pure_outcome = both_paths(lambda: decoded_args(body))
    assert native_outcome == pure_outcome, body


@settings(max_examples=100, deadline=None)
@given(extender_args(), st.booleans(), st.randoms(use_true_random=False))
def test_kube_scheduler_bodies_take_the_fast_path(args: dict[str, Any], keep_nodes: bool, rng: random.Random) -> None:
    """What kube-scheduler sends (any key order and spacing, Nodes null or absent) is split
    natively whenever its names are plain, and then decodes as the pure path does."""
    if not keep_nodes:
        del args["Nodes"]
    body = dump(args, rng).encode()
    split = native.split_args(body)
    if all(name.isascii() and name.isprintable() and '"' not in name and "\\" not in name for name in args["NodeNames"]):
        assert split is not None
        pod_start, pod_end, spans = split
        assert json.loads(body[pod_start:pod_end]) == args["Pod"]
        assert [body[start:end].decode() for start, end in span_pairs(spans)] == args["NodeNames"]
        assert isinstance(names.decode_extender_args(body).names, names.RawNames)
    assert assert_paths_agree(lambda: decoded_args(body), body)[0] == "ok"


@pytest.mark.parametrize(
    "body",
    [
        b"", b"null", b"[]", b"{}", b"{", b'{"Pod":{}', b'{"Pod":{},"NodeNames":[]', b'{"Pod":{},"NodeNames":["a"]}}',
        b'{"Pod":{}},"NodeNames":["a"]}', b'{"Pod":{"a":[}],"NodeNames":["a"]}', b'{"Pod":{"a":"}"},"NodeNames":["a"]}',
        b'{"Pod":{"a":"\\"}"},"NodeNames":["a"]}', b'{"Pod":{"metadata":{"name":"\\\\"}},"NodeNames":["a"]}',
        b'{"Pod":{],"NodeNames":["a"]}', b'{"Pod":{}, "NodeNames":["a"], "Nodes":nul}', b'{"Pod":{},"Nodes":nullx,"NodeNames":[]}',
        b'{"Pod":{},"Nodes":true,"NodeNames":["a"]}', b'{"Pod":{},"Nodes":1234,"NodeNames":["a"]}',
        b'{"Pod":{},"NodeNames":[],}', b'{,"Pod":{},"NodeNames":[]}', b'{"Pod":{}"NodeNames":[]}', b'{"Pod"{},"NodeNames":[]}',
        b'{"P\\u006fd":{},"NodeNames":["a"]}', b'{"Pod":{},"NodeNames":["a"]} x', b'{"Pod":{},"NodeNames":["\\u0061"]}',
        b'\t{ "Pod" : { } , "NodeNames" : [ "a" , "b" ] , "Nodes" : null }\n',
        b'{"Pod":{},"Nodes":{"items":null},"NodeNames":["a"]}',
        b'{"Pod":{"metadata":{"name":"p\x01"}},"NodeNames":["a"]}', b'{"Pod":{"metadata":{"name":"' + b"x" * 20 + b'\\',
        *(
            body
            for body in (
                b'{"Pod":{},"NodeNames":[1]}',
                b'{"Pod":{},"NodeNames":5}',
                b'{"NodeNames":[1],"Pod":{"metadata":5}}',
                b'{"Pod":{},"NodeNames":["\\x"]}',
                b'{"Pod":{},"NodeNames":[tru]}',
            )
        ),
        *(b'{"Pod":{},"NodeNames":["ok","' + bad + b'"],"Nodes":null}' for bad in INVALID_UTF8),
    ],
)
def test_decode_extender_args_edge_bodies(body: bytes) -> None:
    """Hand-picked bodies against split_args's one-pass parser: unbalanced and mismatched
    brackets, brackets and escaped quotes in strings, near-miss literals, stray commas; and
    bad names, whose report (kube-scheduler's Error, cellfit's log) must not depend on whether
    the extension was built."""
    assert_paths_agree(lambda: decoded_args(body), body)


def test_a_pod_nested_past_the_recursion_limit_is_invalid_on_both_paths() -> None:
    """Nesting past the interpreter's recursion limit is an InvalidRequest (HTTP 400 naming the
    problem), never a RecursionError (HTTP 500), with the extension or without. Just below the
    limit the two paths may differ by the one level the fast path saves decoding the Pod alone;
    well below it both decode."""
    limit = sys.getrecursionlimit()
    for depth, verdict in ((limit // 4, "ok"), (limit + 20, "InvalidRequest"), (limit * 3, "InvalidRequest")):
        body = b'{"Pod":{"x":' + b"[" * depth + b"]" * depth + b'},"NodeNames":["a"]}'
        for result in both_paths(lambda: decoded_args(body)):
            assert result[0] == verdict, (depth, result[:2])
            if verdict == "InvalidRequest":
                assert "nested too deeply" in result[1]


# ---------------------------------------------------------------------------------- service


KNOWN_NODES = [
    "gpu-node-00000", "n", "seven77", "eight888", "nine99999", "fifteen-1234567", "sixteen-12345678", "seventeen-1234567",
    "nœud-é", "узел-1", "ノード", "a" * 63, "rack-1.node-1", *(f"gpu-node-{i:05d}" for i in range(1, 70)),
]
REMOVED_NODES = ["gpu-node-00003", "gpu-node-00040", "eight888"]  # slots become holes in the NodeIndex


@pytest.fixture(scope="module")
def cluster() -> Runtime:
    """A standalone extender that knows ~80 nodes of every GPU size, some busy, with holes."""
    runtime = build_runtime(Settings(), standalone=True)
    for i, name in enumerate(KNOWN_NODES):
        runtime.engine.apply_node(NodeInfo(name=name, allocatable=Resources(64000, 512 * GI, (0, 2, 4, 8)[i % 4])))
        if i % 3 == 0:
            runtime.engine.apply_pod(
                PodInfo(
                    uid=f"busy-{i}", namespace="ml", name=f"busy-{i}", requests=Resources(1000 * (i % 64), GI, i % 9),
                    node_name=name, phase="Running",
                )
            )
    for name in REMOVED_NODES:
        runtime.engine.delete_node(name)
    return runtime


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    offered=st.lists(st.one_of(st.sampled_from(KNOWN_NODES), st.sampled_from(REMOVED_NODES), NODE_NAMES), max_size=90),
    gpus=st.integers(0, 9),
    cpu=st.sampled_from(["1", "30", "64", "65"]),
    rng=st.randoms(use_true_random=False),
)
@example(offered=[], gpus=1, cpu="1", rng=random.Random(0))
@example(offered=["ghost", "gpu-node-00003"], gpus=1, cpu="1", rng=random.Random(0))
@example(offered=KNOWN_NODES, gpus=9, cpu="1", rng=random.Random(0))
@example(offered=KNOWN_NODES, gpus=0, cpu="1", rng=random.Random(0))
def test_service_answers_are_byte_identical(
    cluster: Runtime, offered: list[str], gpus: int, cpu: str, rng: random.Random
) -> None:
    """filter and prioritize over real request bodies: none, some, or every node failing,
    unknown and removed names, repeats, no names at all; the bytes kube-scheduler gets back
    are the same with and without the extension."""
    pod = k.pod("train-0", uid="3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", gpus=gpus, cpu=cpu, memory="8Gi")
    body = dump(k.extender_args(pod, [{"metadata": {"name": name}} for name in offered], node_cache_capable=True), rng).encode()
    for verb in ("filter", "prioritize"):
        handler = cluster.app.routes[f"/v1/extender/{verb}"].handler
        answer = assert_paths_agree(lambda: handler(body), (verb, body))
        assert answer[0] == "ok" and answer[1].status == 200


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_service_invalid_utf8_names(cluster: Runtime, verb: str) -> None:
    body = b'{"Pod":' + k.dumps(k.pod("train-0", gpus=1)) + b',"NodeNames":["gpu-node-00001","n\xff"],"Nodes":null}'
    handler = cluster.app.routes[f"/v1/extender/{verb}"].handler
    assert_paths_agree(lambda: handler(body))


HIVED_NODES = ["gpu-a", "gpu-b", "gpu-c", "cpu-only"]


@pytest.fixture(scope="module")
def hived() -> Runtime:
    """Policy hived on tests/support/hived.py's cells: its NodeIndex holds the cell nodes only."""
    runtime = build_runtime(parse_settings(hived_cells.CONFIG), standalone=True)
    for node in hived_cells.NODES:
        runtime.engine.apply_node(translate.node_info(msgspec.convert(node, wire.Node), gpu_resource=RESOURCE_NVIDIA_GPU))
    return runtime


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    offered=st.lists(st.one_of(st.sampled_from(HIVED_NODES), NODE_NAMES), max_size=12),
    gpus=st.integers(0, 9),
    vc=st.sampled_from(["vision", "speech", "nobody"]),
    rng=st.randoms(use_true_random=False),
)
@example(offered=HIVED_NODES, gpus=4, vc="vision", rng=random.Random(0))
@example(offered=["gpu-b", "ghost"], gpus=8, vc="vision", rng=random.Random(0))
@example(offered=[], gpus=1, vc="speech", rng=random.Random(0))
def test_hived_answers_are_byte_identical(hived: Runtime, offered: list[str], gpus: int, vc: str, rng: random.Random) -> None:
    """HiveD resolves offered names through its own NodeIndex (cell nodes only): placed, not
    placeable, placed off the offer, names outside the cells; the same bytes either way."""
    pod = k.pod("train-0", uid="7d1e2f3a-4b5c-4d6e-8f9a-0b1c2d3e4f5a", gpus=gpus, labels={"cellfit.io/virtual-cluster": vc})
    body = dump(k.extender_args(pod, [{"metadata": {"name": name}} for name in offered], node_cache_capable=True), rng).encode()
    for verb in ("filter", "prioritize"):
        handler = hived.app.routes[f"/v1/extender/{verb}"].handler
        assert_paths_agree(lambda: handler(body), (verb, body))


def test_hived_filter_takes_a_repeated_name_outside_the_cells(hived: Runtime) -> None:
    """kube-scheduler does not repeat names, but a repeat must not turn into a 500 (f0a1201:
    ``outside`` became positions, one per occurrence, where it was a set)."""
    pod = k.pod("train-0", gpus=2, labels={"cellfit.io/virtual-cluster": "nobody"})
    offered = [{"metadata": {"name": name}} for name in ("gpu-a", "ghost", "ghost")]
    body = k.dumps(k.extender_args(pod, offered, node_cache_capable=True))
    answer = hived.app.routes["/v1/extender/filter"].handler(body)
    assert json.loads(answer.body)["FailedAndUnresolvableNodes"]["ghost"] == "node ghost has no HiveD GPU cells"


# ---------------------------------------------------------------------------------- memory


def leak_inputs(count: int) -> list[Callable[[], Any]]:
    """``count`` calls into every native function, a third of them failing."""
    rng = random.Random(7)
    table = native.NameTable([f"node-{i}" for i in range(100)] + [None])
    calls: list[Callable[[], Any]] = []
    for _ in range(count):
        items = [f"node-{rng.randrange(150)}" + "x" * rng.choice((0, 9, 70)) for _ in range(rng.choice((0, 3, 70)))]
        text = json.dumps(items).encode()
        spans = native.scan(text)
        assert spans is not None
        body = b'{"Pod":{"metadata":{"name":"p"}},"NodeNames":' + text + b',"Nodes":null}'
        positions = np.arange(len(items), dtype=np.int64)[::2].copy()
        calls += [
            lambda text=text: native.scan(text),
            lambda text=text: native.scan(text[:-1]),  # truncated: None
            lambda body=body: native.split_args(body),
            lambda body=body: native.split_args(body[:-2]),  # None
            lambda body=body: names.decode_extender_args(body),
            lambda text=text, spans=spans: table.lookup(text, spans),
            lambda text=text, spans=spans: table.lookup(text[:5], spans),  # ValueError when spans
            lambda text=text, spans=spans, p=positions: native.select(text, spans, p),
            lambda text=text, spans=spans: native.select(text, spans, np.array([len(items)], dtype=np.int64)),  # IndexError
            lambda text=text, spans=spans, n=len(items): native.host_priorities(text, spans, list(range(n))),
            lambda text=text, spans=spans, n=len(items): native.host_priorities(text, spans, [1.5] * n),  # TypeError if n
            lambda items=items: native.NameTable(items + items[:1]),  # duplicate: ValueError if any
        ]
    return calls


def run_calls(calls: list[Callable[[], Any]]) -> None:
    for call in calls:
        try:
            call()
        except (ValueError, IndexError, TypeError):
            pass


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_no_memory_grows_over_200k_calls() -> None:
    """Every native function, succeeding and failing, ~200k calls: resident memory stays flat,
    and tracemalloc (which sees the PyMem buffers the C code allocates) finds nothing kept."""
    calls = leak_inputs(40)  # 480 distinct calls, run over and over
    run_calls(calls * 40)  # warm up: caches, arenas, first-time allocations
    gc.collect()
    before = resident_bytes()
    run_calls(calls * 420)  # ~200k calls
    gc.collect()
    grown = resident_bytes() - before
    assert grown < 4 * 2**20, f"resident memory grew by {grown / 2**20:.1f} MiB over {len(calls) * 420} calls"
    tracemalloc.start()
    try:
        run_calls(calls * 2)
        gc.collect()
        traced_before = tracemalloc.get_traced_memory()[0]
        run_calls(calls * 20)
        gc.collect()
        traced_grown = tracemalloc.get_traced_memory()[0] - traced_before
    finally:
        tracemalloc.stop()
    assert traced_grown < 64 * 2**10, f"{traced_grown} bytes still allocated after {len(calls) * 20} calls"


def test_host_priorities_reads_scores_before_python_code_can_change_them() -> None:
    """A score that is not exactly an int runs Python (__index__), which may change the list:
    the scores are read from a snapshot first, so nothing reads freed memory (AddressSanitizer
    saw a use-after-free here before)."""
    text, spans = raw_text(["a", "bb", "ccc"])
    scores: list[Any] = []

    class Clearing:
        def __index__(self) -> int:
            scores.clear()
            return 7

    scores.extend([Clearing(), 2, 3])
    answer = native.host_priorities(text, spans, scores)
    assert json.loads(answer) == [{"Host": "a", "Score": 7}, {"Host": "bb", "Score": 2}, {"Host": "ccc", "Score": 3}]
    with pytest.raises(TypeError, match="bool"):
        native.host_priorities(text, spans, [True, 2, 3])


def test_misaligned_buffers_are_refused() -> None:
    """Spans and positions are read as int32 and int64: a buffer not aligned to them is refused
    (an unaligned load is undefined behaviour in C) rather than read."""
    text, spans = raw_text(["a", "bb"])
    shifted = memoryview(b"\0" + bytes(spans))[1:]
    with pytest.raises(ValueError, match="aligned"):
        native.select(text, shifted, np.array([0], dtype=np.int64).tobytes())
    with pytest.raises(ValueError, match="aligned"):
        native.NameTable(["a"]).lookup(text, shifted)
    positions = memoryview(b"\0" + np.array([1, 0], dtype=np.int64).tobytes())[1:]
    with pytest.raises(ValueError, match="aligned"):
        native.select(text, spans, positions)


def test_the_filter_answer_struct_is_the_documented_result() -> None:
    """The service writes ExtenderFilterAnswer (names as JSON text); the OpenAPI document
    describes ExtenderFilterResult: the same fields, order and defaults, so they cannot drift."""
    answer, result = wire.ExtenderFilterAnswer, wire.ExtenderFilterResult
    assert answer.__struct_fields__ == result.__struct_fields__
    assert wire.ENCODER.encode(answer()) == wire.ENCODER.encode(result())  # the same defaults
    assert wire.ENCODER.encode(answer(NodeNames=msgspec.Raw(b'["a"]'), Error="x")) == wire.ENCODER.encode(
        result(NodeNames=["a"], Error="x")
    )


def test_raw_names_keep_the_codec_they_were_made_with() -> None:
    """The extension switched off (server.nodeNameFastPath) after names were scanned: those names
    are still written by the code that scanned them; new requests go the Python way."""
    made = raw_names(["a", "bb"]).pick(np.arange(2)[::-1])  # and positions that are not contiguous
    try:
        names.use_native(False)
        assert made.json() == b'["bb","a"]'
        assert names.decode_extender_args(b'{"Pod":{},"NodeNames":["a"]}').names == ["a"]
    finally:
        names.use_native(True)
