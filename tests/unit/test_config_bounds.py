"""Configuration files are read within bounds (scheduler/safe_yaml.py): size, nesting, aliases,
duplicate keys, and messages that echo no more than the start of a value. Each hostile file is
refused with one clear line naming the field, by the loader, ``cellfit check-config`` and
``cellfit serve`` alike, and in milliseconds (the old loader hung on the alias bomb and overflowed
on the nesting: the timeouts turn that into a failure rather than a stuck suite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.config import load_settings, parse_settings, read_config_text
from scheduler.errors import ConfigError

pytestmark = pytest.mark.timeout(60)

# The bounds as README.md documents them (scheduler/safe_yaml.py).
MAX_BYTES = 1_048_576
MAX_DEPTH = 64
MAX_ALIASES = 128


def alias_bomb(levels: int = 9) -> str:
    """Lists of nine aliases of the list before: 9**levels strings from a few hundred bytes."""
    lines = ['    a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"    a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "allox:\n  nodeSelector:\n" + "\n".join(lines) + "\n"


def nested(depth: int) -> str:
    return "server: " + "[" * depth + "]" * depth + "\n"


def refusal(text: str, *, longest: int = 600) -> str:
    with pytest.raises(ConfigError) as error:
        parse_settings(text, source="cfg.yaml")
    message = str(error.value)
    assert message.startswith("cfg.yaml: ") and "\n" not in message and len(message) < longest, message
    return message


def test_an_alias_bomb_in_a_typed_field_is_refused_naming_the_field():
    message = refusal(alias_bomb())
    assert "allox.nodeSelector.a5[2]: the document expands to more than 262,144 values (line 8)" in message


def test_aliases_within_the_budget_load():
    vcs = "".join(f"    vc{i}: *cells\n" for i in range(MAX_ALIASES))
    text = f"cells:\n  virtualClusters:\n    vc: &cells [{{cellType: A, count: 1}}]\n{vcs}"
    settings = parse_settings(text)
    assert len(settings.cells.virtual_clusters) == MAX_ALIASES + 1


def test_more_aliases_than_the_budget_are_refused():
    vcs = "".join(f"    vc{i}: *one\n" for i in range(MAX_ALIASES + 1))
    message = refusal(f"allox:\n  alpha: &one 0.5\n  nodeSelector:\n{vcs}")
    assert f"allox.nodeSelector.vc{MAX_ALIASES}: more than {MAX_ALIASES} aliases" in message


@pytest.mark.parametrize("depth", [MAX_DEPTH, 50_000])
def test_nesting_past_the_bound_is_refused_naming_the_field(depth: int):
    message = refusal(nested(depth))
    assert message.startswith("cfg.yaml: server[0][0]") and f"nested more than {MAX_DEPTH} mappings or lists deep (line 1)" in message


def test_nesting_within_the_bound_reaches_validation():
    assert "server: Input should be a valid dictionary" in refusal(nested(MAX_DEPTH - 1))


def test_an_alias_counts_as_the_depth_it_stands_for():
    deep = "[" * 40 + "]" * 40
    message = refusal(f"a: &deep {deep}\nb: {'[' * 30}*deep{']' * 30}\n")
    assert "b[0]" in message and "once aliases are expanded" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server:\n  port: 9000\n  port: 9001\n", "server.port: the key 'port' appears twice in server (lines 2 and 3)"),
        (
            "cells:\n  virtualClusters:\n    vision: []\n    speech: []\n    vision: []\n",
            "cells.virtualClusters.vision: the key 'vision' appears twice in cells.virtualClusters (lines 3 and 5)",
        ),
        ("allox:\n  nodeSelector:\n    - {a: 1, a: 2}\n", "allox.nodeSelector[0].a: the key 'a' appears twice"),
        ("logging: {}\nlogging: {}\n", "logging: the key 'logging' appears twice in (top level) (lines 1 and 2)"),
        # Written differently, the same key once loaded: the second would still replace the first.
        ("allox:\n  nodeSelector:\n    true: a\n    True: b\n", "allox.nodeSelector.True: the key 'True' appears twice"),
    ],
)
def test_duplicate_keys_are_errors_naming_the_key_and_its_path(text: str, expected: str):
    assert expected in refusal(text)


def test_a_key_beside_a_merge_overrides_it_and_is_no_duplicate():
    settings = parse_settings("server:\n  <<: {port: 9000, host: 0.0.0.0}\n  port: 9100\n")
    assert (settings.server.port, settings.server.host) == (9100, "0.0.0.0")


def test_a_long_value_is_cut_in_the_message():
    message = refusal("server:\n  host: [" + "x" * 1_000_000 + "]\n")
    assert "server.host: Input should be a valid string (got ['" + "x" * 78 + "... (1,000,004 bytes))" in message


def test_a_long_key_is_cut_in_the_message():
    message = refusal("cells:\n  virtualClusters:\n    ? " + "v" * 100_000 + "\n    : 1\n")
    assert "v" * 80 + "... (100,000 bytes)" in message and len(message) < 400


def test_many_problems_are_counted_not_listed():
    selector = "".join(f"    k{i}: [1]\n" for i in range(5_000))
    message = refusal(f"allox:\n  nodeSelector:\n{selector}", longest=2_000)
    assert message.count("Input should be a valid string") == 20 and "; ... and 4,980 more problems" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("? [1, 2]\n: 3\n", "(top level): a key is a list; keys are plain values (line 1)"),
        ("a: &a [1, *a]\n", "a[1]: alias *a is inside its own anchor (line 1)"),
        ("server: *nothing\n", "server: alias *nothing names no anchor defined above it"),
        ("preemption:\n  seed: " + "1" * 5_000 + "\n", "preemption.seed: Exceeds the limit (4300 digits)"),
        ("server: !!python/object:os.system ls\n", "server: could not determine a constructor for the tag"),
        ("server: {}\n---\nserver: {}\n", "line 2, column 1: holds a second YAML document"),
        ("server: {port: [}\n", "not valid YAML at line 1, column 17"),
    ],
)
def test_other_malformed_files_are_clear_errors(text: str, expected: str):
    assert expected in refusal(text)


def test_an_oversized_file_is_refused_before_it_is_read_whole(tmp_path: Path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"# " + b"x" * (MAX_BYTES - 3) + b"\n")
    assert read_config_text(path).startswith("# x")  # exactly the limit: read
    with path.open("ab") as file:
        file.write(b"y")
    with pytest.raises(ConfigError, match=f"big.yaml: is larger than {MAX_BYTES:,} bytes"):
        load_settings(path)
    with pytest.raises(ConfigError, match="is 1,048,577 bytes; a configuration file may hold at most 1,048,576"):
        parse_settings("#" * MAX_BYTES + "\n")


HOSTILE = {
    "alias-bomb": (alias_bomb(), "allox.nodeSelector.a5[2]"),
    "50000-levels": (nested(50_000), "server[0][0]"),
    "duplicate-key": ("server:\n  port: 9000\n  port: 9001\n", "server.port"),
    "long-value": ("server:\n  host: [" + "x" * 1_000_000 + "]\n", "server.host"),
    "childCount-1e9": (
        "cells:\n  topology:\n    cellTypes:\n      NODE: {childType: GPU, childCount: 1000000000, isNodeLevel: true}\n"
        "    physicalCells:\n      - {cellType: NODE, nodeName: n1}\n",
        "cells.topology.cellTypes.NODE.childCount",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_check_config_and_serve_refuse_a_hostile_file_in_one_line(tmp_path: Path, capsys, name: str, command: str):
    text, field = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    argv = ["check-config", str(path)] if command == "check-config" else ["serve", "--standalone", "--config", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cellfit: invalid configuration: {path}: {field}") and err.count("\n") == 1, err[:1000]
    assert len(err) < 600 and "Traceback" not in err
