"""YAML for configuration files, with bounds: a file can neither hang the reader nor exhaust memory.

``yaml.safe_load`` refuses arbitrary objects but nothing else: nine aliases of nine aliases expand
to 387 million nodes (an "alias bomb": the file is 300 bytes, whatever walks the result never
finishes), 50,000 nested brackets overflow the C stack of libyaml's composer or the Python
one's recursion, and a key written twice silently keeps the second value. Here the parser's
event stream (libyaml's, when installed) is composed into nodes by a loop, not by recursion, and
every bound is checked as the events arrive, so a hostile file is refused after reading only as
far as the first bound it breaks:

- size: at most ``max_bytes`` (1 MiB, the most a Kubernetes ConfigMap can hold);
- nesting: at most ``max_depth`` mappings and lists inside one another (an alias counts as the
  depth of what it stands for);
- aliases: at most ``max_aliases`` uses of an anchor, and the document with every alias expanded
  at most ``max_nodes`` nodes, about what 1 MiB written out in full can hold, so that aliases
  never make a document bigger than writing it out would;
- keys: plain values (a string, a number), each once per mapping.

Errors are :class:`ConfigError` naming the field (``cells.topology.cellTypes``) and the line.
Construction (tags, merge keys ``<<``, timestamps) is PyYAML's ``SafeConstructor``, so every file
that was valid and within the bounds loads to the same value as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Iterator

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from scheduler.errors import ConfigError
from scheduler.messages import clip

try:  # libyaml: ~10x faster than the pure-Python parser, the same events
    from yaml import CSafeLoader as _EventLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _EventLoader  # type: ignore[assignment, unused-ignore]  # with types-PyYAML: another class

_MERGE_TAG: Final = "tag:yaml.org,2002:merge"
_PATH_CHARS: Final = 200  # a field path in a message; each key in it is cut to CLIP_CHARS


@dataclass(frozen=True, slots=True)
class YamlLimits:
    max_bytes: int = 2**20
    max_depth: int = 64
    max_aliases: int = 128
    max_nodes: int = 2**18


LIMITS: Final = YamlLimits()


@dataclass(slots=True)
class _Composed:
    """A complete node and what it stands for once aliases are expanded."""

    node: Node
    size: int  # nodes, itself included
    height: int  # mappings and lists nested in it, itself included


@dataclass(slots=True)
class _Open:
    """A mapping or list whose end event has not arrived yet."""

    node: MappingNode | SequenceNode
    path: str
    anchor: str | None
    size: int = 1
    height: int = 1
    key: ScalarNode | None = None  # mappings: the key whose value comes next
    key_text: str = ""
    keys: dict[Any, int] = field(default_factory=dict)  # mappings: key -> its line


def load_yaml(text: str, *, limits: YamlLimits = LIMITS) -> Any:
    """The one document in ``text`` (None when empty), or :class:`ConfigError` naming the field."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise ConfigError(f"is {size:,} bytes; a configuration file may hold at most {limits.max_bytes:,}")
    composer = _Composer(limits)
    root = composer.compose(text)
    if root is None:
        return None
    try:
        return composer.constructor.construct_document(root)
    except yaml.MarkedYAMLError as error:  # a tag's content: a bad !!binary, a merge of a list
        raise ConfigError(f"{_where(error.problem_mark)}: {clip(str(error.problem))}") from None


class _Composer:
    def __init__(self, limits: YamlLimits) -> None:
        self.limits = limits
        self.constructor = SafeConstructor()
        self.resolver = Resolver()
        self.anchors: dict[str, _Composed | None] = {}  # None: still open (an alias to it recurses)
        self.aliases = 0
        self.nodes = 0
        self.stack: list[_Open] = []
        self.root: _Composed | None = None

    def compose(self, text: str) -> Node | None:
        documents = 0
        try:
            for event in _events(text):
                if isinstance(event, yaml.DocumentStartEvent):
                    documents += 1
                    if documents > 1:
                        raise ConfigError(f"{_where(event.start_mark)}: holds a second YAML document (---); one is read")
                elif isinstance(event, yaml.ScalarEvent):
                    self._scalar(event)
                elif isinstance(event, yaml.AliasEvent):
                    self._alias(event)
                elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                    self._open(event)
                elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                    self._close(event)
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ConfigError(f"not valid YAML{where}: {clip(str(error.problem))}") from None
        except yaml.YAMLError as error:  # e.g. a byte the reader cannot accept
            raise ConfigError(f"not valid YAML: {clip(str(error))}") from None
        return self.root.node if self.root is not None else None

    # ------------------------------------------------------------------ events

    def _scalar(self, event: yaml.ScalarEvent) -> None:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(ScalarNode, event.value, event.implicit)
        node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        if tag != _MERGE_TAG:
            # Constructed now, where the field is known: a 5,000-digit integer (over Python's
            # int-from-text limit) or an unknown tag is an error naming it, not a traceback.
            # The constructor keeps the value, so the document's construction reuses it.
            try:
                self.constructor.construct_object(node)
            except (yaml.YAMLError, ValueError, OverflowError) as error:
                problem = getattr(error, "problem", None) or str(error)
                raise ConfigError(f"{self._field()}: {clip(str(problem))} ({_line(event.start_mark)})") from None
        self._count(1, event)
        composed = _Composed(node, size=1, height=0)
        self._define(event.anchor, composed, event)
        self._attach(composed, event)

    def _alias(self, event: yaml.AliasEvent) -> None:
        anchor = event.anchor
        if anchor not in self.anchors:
            raise ConfigError(f"{self._field()}: alias *{clip(anchor)} names no anchor defined above it ({_line(event.start_mark)})")
        target = self.anchors[anchor]
        if target is None:
            raise ConfigError(f"{self._field()}: alias *{clip(anchor)} is inside its own anchor ({_line(event.start_mark)})")
        self.aliases += 1
        if self.aliases > self.limits.max_aliases:
            raise ConfigError(
                f"{self._field()}: more than {self.limits.max_aliases} aliases (*name) in one file "
                f"({_line(event.start_mark)}); write the values out"
            )
        self._count(target.size, event)
        self._attach(target, event)

    def _open(self, event: yaml.SequenceStartEvent | yaml.MappingStartEvent) -> None:
        path = self._child_path()
        if len(self.stack) + 1 > self.limits.max_depth:
            raise ConfigError(
                f"{_shown(path)}: nested more than {self.limits.max_depth} mappings or lists deep ({_line(event.start_mark)})"
            )
        self._count(1, event)
        mapping = isinstance(event, yaml.MappingStartEvent)
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(MappingNode if mapping else SequenceNode, None, event.implicit)
        node: MappingNode | SequenceNode = (MappingNode if mapping else SequenceNode)(
            tag, [], event.start_mark, None, flow_style=event.flow_style
        )
        if event.anchor is not None:
            self._check_new_anchor(event.anchor, event)
            self.anchors[event.anchor] = None
        self.stack.append(_Open(node=node, path=path, anchor=event.anchor))

    def _close(self, event: yaml.SequenceEndEvent | yaml.MappingEndEvent) -> None:
        closed = self.stack.pop()
        closed.node.end_mark = event.end_mark
        composed = _Composed(closed.node, size=closed.size, height=closed.height)
        if closed.anchor is not None:
            self.anchors[closed.anchor] = composed
        self._attach(composed, event)

    # ------------------------------------------------------------------ bounds and structure

    def _define(self, anchor: str | None, composed: _Composed, event: yaml.Event) -> None:
        if anchor is not None:
            self._check_new_anchor(anchor, event)
            self.anchors[anchor] = composed

    def _check_new_anchor(self, anchor: str, event: yaml.Event) -> None:
        if anchor in self.anchors:
            raise ConfigError(f"{self._field()}: anchor &{clip(anchor)} is defined twice ({_line(event.start_mark)})")

    def _count(self, nodes: int, event: yaml.Event) -> None:
        self.nodes += nodes
        if self.nodes > self.limits.max_nodes:
            raise ConfigError(
                f"{self._field()}: the document expands to more than {self.limits.max_nodes:,} values "
                f"({_line(event.start_mark)}); aliases (*name) must not multiply it past what the file could spell out"
            )

    def _attach(self, child: _Composed, event: yaml.Event) -> None:
        """Put a complete node into the mapping or list being read (or make it the root)."""
        depth = len(self.stack) + child.height
        if depth > self.limits.max_depth:
            raise ConfigError(
                f"{self._field()}: nested more than {self.limits.max_depth} mappings or lists deep once "
                f"aliases are expanded ({_line(event.start_mark)})"
            )
        if not self.stack:
            self.root = child
            return
        parent = self.stack[-1]
        parent.size += child.size
        parent.height = max(parent.height, child.height + 1)
        if isinstance(parent.node, SequenceNode):
            parent.node.value.append(child.node)
            return
        if parent.key is None:
            self._key(parent, child.node, event)
            return
        parent.node.value.append((parent.key, child.node))
        parent.key = None

    def _key(self, mapping: _Open, key: Node, event: yaml.Event) -> None:
        if not isinstance(key, ScalarNode):
            kind = "mapping" if isinstance(key, MappingNode) else "list"
            raise ConfigError(f"{_shown(mapping.path)}: a key is a {kind}; keys are plain values ({_line(event.start_mark)})")
        if key.tag == _MERGE_TAG:
            identity: Any = ("<<",)  # `<<: *defaults` merges; the keys written beside it win
            text = "<<"
        else:
            identity = self.constructor.construct_object(key)
            text = str(identity)
        line = key.start_mark.line + 1
        if identity in mapping.keys:
            raise ConfigError(
                f"{_shown(_join(mapping.path, text))}: the key {clip(text)!r} appears twice in {_shown(mapping.path)} "
                f"(lines {mapping.keys[identity]} and {line}); a second value would silently replace the first"
            )
        mapping.keys[identity] = line
        mapping.key = key
        mapping.key_text = text

    def _child_path(self) -> str:
        """The field path of the node that comes next ("" at the top level)."""
        if not self.stack:
            return ""
        parent = self.stack[-1]
        if isinstance(parent.node, SequenceNode):
            return f"{parent.path}[{len(parent.node.value)}]"
        if parent.key is None:  # a key itself: name the mapping it is in
            return parent.path
        return _join(parent.path, parent.key_text)

    def _field(self) -> str:
        """The next node's path as messages show it: 64 levels of ``[0]`` are cut, too."""
        return _shown(self._child_path())


def _events(text: str) -> Iterator[yaml.Event]:
    loader = _EventLoader(text)
    try:
        while loader.check_event():
            yield loader.get_event()
    finally:
        loader.dispose()


def _join(path: str, key: str) -> str:
    key = clip(key)
    return f"{path}.{key}" if path else key


def _shown(path: str) -> str:
    return clip(path, keep=_PATH_CHARS) if path else "(top level)"


def _line(mark: Any) -> str:
    return f"line {mark.line + 1}" if mark is not None else "line ?"


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "(unknown place)"
