"""scheduler.safe_yaml loads what ``yaml.safe_load`` loads, within its bounds (the refusals are
tested through the configuration loader, in test_config_bounds.py)."""

from __future__ import annotations

import pytest
import yaml

from scheduler.errors import ConfigError
from scheduler.safe_yaml import LIMITS, YamlLimits, load_yaml

VALID = [
    "",
    "a: 1\n",
    "base: &b {a: 1, b: [x, y]}\nmerged:\n  <<: *b\n  b: 3\nsame: *b\n",
    "a: &d {k: 1}\nb:\n  <<: [*d, {j: 2}]\n  k: 2\n",
    "when: 2001-12-14\nraw: !!binary AAAA\nnone: ~\nflag: yes\nn: 0x1f\nf: .inf\nset: !!set {a, b}\n",
    "- [1, [2, [3]]]\n- {a: {b: {c: d}}}\n",
    "? complex\n: 1\n'quoted': 2\n3: int key\n",
]


@pytest.mark.parametrize("text", VALID)
def test_loads_what_safe_load_loads(text: str):
    assert load_yaml(text) == yaml.safe_load(text)


def test_aliases_stay_shared_as_with_safe_load():
    loaded = load_yaml("a: &x [1, 2]\nb: *x\n")
    assert loaded["a"] is loaded["b"]


def test_the_documented_limits():
    assert LIMITS == YamlLimits(max_bytes=2**20, max_depth=64, max_aliases=128, max_nodes=2**18)


def test_expanded_values_are_counted_against_the_bound():
    # the mapping 1, keys 2, a's list 5, b's list 1, its three aliases 3 x 5: 24 values
    text = "a: &a [1, 2, 3, 4]\nb: [*a, *a, *a]\n"
    assert load_yaml(text, limits=YamlLimits(max_nodes=24)) == yaml.safe_load(text)
    with pytest.raises(ConfigError, match=r"b\[2\]: the document expands to more than 23 values"):
        load_yaml(text, limits=YamlLimits(max_nodes=23))
