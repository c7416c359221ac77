"""An API list page split by the C extension (scheduler/kube/lists.py, ``_names.split_list``):
the same metadata and the same items, byte for byte, as msgspec's decode of the page, for any
list response; anything else left to msgspec, which names what is wrong; and the scan runs with
the GIL released, so the verbs' thread runs while the reflector's thread splits a page."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, Iterator

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.kube import lists, names, wire
from tests.support.kube_objects import pod

pytestmark = pytest.mark.skipif(not names.NATIVE, reason="the C extension scheduler.kube._names was not built")


def by_msgspec(body: bytes) -> tuple[wire.ListMeta, list[bytes]]:
    listing = wire.RAW_LIST_DECODER.decode(body)
    return listing.metadata, [bytes(item) for item in listing.items or ()]


def by_split(body: bytes) -> tuple[wire.ListMeta, list[bytes]]:
    assert names.native is not None and names.native.split_list(body) is not None, body[:200]
    page = lists.read_page(body)
    return page.metadata, [bytes(item) for item in page.items]


@pytest.fixture
def python_path() -> Iterator[None]:
    names.use_native(False)
    try:
        yield
    finally:
        names.use_native(True)


# ---------------------------------------------------------------- the same as msgspec

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False),
    # Brackets, braces, quotes and backslashes inside strings must not end an item.
    st.text(alphabet=st.sampled_from(list('{}[]",:\\ aé€\n\t\u0001x')), max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
items = st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=5), max_size=8)
metadata = st.fixed_dictionaries(
    {"resourceVersion": st.text(alphabet="0123456789", min_size=1, max_size=8)},
    optional={"continue": st.text(max_size=20), "remainingItemCount": st.integers(0, 10**6)},
)


@st.composite
def list_bodies(draw: Any) -> bytes:
    fields: list[tuple[str, Any]] = [("kind", "PodList"), ("apiVersion", "v1"), ("metadata", draw(metadata))]
    fields.append(("items", draw(st.one_of(st.none(), items))))
    if draw(st.booleans()):
        fields = [f for f in fields if f[0] != "items"]
    fields = draw(st.permutations(fields))
    spacing = draw(st.sampled_from([None, 1, 2]))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]))
    text = json.dumps(dict(fields), indent=spacing, separators=separators if spacing is None else None, ensure_ascii=draw(st.booleans()))
    return text.encode()


@settings(max_examples=400, deadline=None)
@given(list_bodies())
def test_any_list_response_splits_into_msgspecs_metadata_and_items(body: bytes) -> None:
    assert by_split(body) == by_msgspec(body)


def test_a_page_of_pods_as_the_api_server_sends_it_splits_alike() -> None:
    listed = [pod(f"train-{i}", uid=f"uid-{i}", cpu="1", node_name=f"node-{i % 7}", phase="Running") for i in range(500)]
    body = msgspec.json.encode({"kind": "PodList", "apiVersion": "v1",
                                "metadata": {"resourceVersion": "4711", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", "remainingItemCount": 9500},
                                "items": listed})
    metadata, split = by_split(body)
    assert (metadata, split) == by_msgspec(body)
    assert metadata.continue_token == "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ" and len(split) == 500
    assert wire.POD_DECODER.decode(lists.read_page(body).items[499]).metadata.name == "train-499"


# ---------------------------------------------------------------- anything else goes to msgspec


@pytest.mark.parametrize(
    "body",
    [
        b'{"metadata": {"resourceVersion": "1"}, "items": [1, 2]}',  # items that are not objects
        b'{"metadata": {"resourceVersion": "1"}, "it\\u0065ms": []}',  # an escape in a key
        b'{"metadata": {"resourceVersion": "1"}, "items": [], "items": []}',  # a key twice
        b'{"metadata": null, "items": []}',
        b'[{"metadata": {}}]',
    ],
)
def test_a_body_the_scan_declines_is_decoded_by_msgspec_as_before(body: bytes) -> None:
    assert names.native is not None and names.native.split_list(body) is None
    try:
        expected: Any = by_msgspec(body)
    except msgspec.MsgspecError as error:
        expected = type(error)
    try:
        page = lists.read_page(body)
        got: Any = (page.metadata, [bytes(item) for item in page.items])
    except msgspec.MsgspecError as error:
        got = type(error)
    assert got == expected


@pytest.mark.parametrize(
    "body",
    [b'{"metadata": {"resourceVersion": "1"}, "items": [{"a": "}', b'{"items": [{}]', b"", b"   ", b'{"items": [{}]} x'],
)
def test_a_broken_page_is_an_error_of_msgspec_naming_it(body: bytes) -> None:
    assert names.native is not None and names.native.split_list(body) is None
    with pytest.raises(msgspec.DecodeError):
        lists.read_page(body)


def test_without_the_extension_pages_are_read_by_msgspec(python_path: None) -> None:
    body = b'{"metadata": {"resourceVersion": "9", "continue": "t"}, "items": [{"a": 1}, {"b": "]"}]}'
    page = lists.read_page(body)
    assert page.metadata == wire.ListMeta(resourceVersion="9", continue_token="t")
    assert [bytes(item) for item in page.items] == [b'{"a": 1}', b'{"b": "]"}']


# ---------------------------------------------------------------- the GIL


def test_the_scan_lets_another_thread_run_while_it_splits_a_page() -> None:
    """With a switch interval of 100 s CPython hands the GIL over only when a thread releases
    it. The main thread waits for the splitter to start, then needs the GIL: it gets it before
    the split ends only if the split released it (msgspec's decode of the same page does not)."""
    assert names.native is not None
    item = json.dumps({"metadata": {"name": "x" * 200, "labels": {"a": "[" * 50}}, "spec": {"containers": [{"name": "c"}] * 20}})
    body = ('{"metadata": {"resourceVersion": "1"}, "items": [' + ",".join([item] * 60_000) + "]}").encode()  # ~90 MB
    starting = threading.Event()
    split_done = threading.Event()

    def split() -> None:
        starting.set()
        assert names.native is not None
        names.native.split_list(body)
        split_done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        splitter = threading.Thread(target=split)
        splitter.start()
        starting.wait()
        ran_during_split = not split_done.is_set()  # needs the GIL: the splitter must have let it go
        splitter.join()
    finally:
        sys.setswitchinterval(interval)
    assert ran_during_split
