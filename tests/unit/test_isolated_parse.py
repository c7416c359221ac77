"""Live reload's parse in a child process (scheduler/extender/isolated_parse.py): the same
settings or the same message as parsing in-process, and a time and a memory limit that hold."""

from __future__ import annotations

import pytest

from scheduler.config import default_config_text, parse_settings
from scheduler.errors import ConfigError
from scheduler.extender.isolated_parse import parse_settings_isolated
from tests.support.hived import CONFIG


@pytest.mark.parametrize("text", [default_config_text(), CONFIG, "server: {port: 9000, metricsPort: 9001}\nallox: {nodeSelector: {pool: a}}\n"])
def test_the_child_answers_what_parsing_in_process_answers(text: str):
    assert parse_settings_isolated(text, source="cfg.yaml") == parse_settings(text, source="cfg.yaml")


def test_the_childs_refusal_is_the_same_message():
    text = "server:\n  port: 9000\n  port: 9001\n"
    with pytest.raises(ConfigError) as in_process:
        parse_settings(text, source="cfg.yaml")
    with pytest.raises(ConfigError) as isolated:
        parse_settings_isolated(text, source="cfg.yaml")
    assert str(isolated.value) == str(in_process.value)


def test_a_child_past_the_time_limit_is_stopped():
    with pytest.raises(ConfigError, match=r"^cfg.yaml: not checked: parsing it took longer than 0.01 s, the limit; stopped$"):
        parse_settings_isolated("server: {port: 9000}\n", source="cfg.yaml", timeout_seconds=0.01)


def test_a_child_past_the_memory_limit_is_refused():
    nodes = "".join(f"    - {{cellType: NODE, nodeName: n{i}}}\n" for i in range(5_000))
    text = f"cells:\n  topology:\n    cellTypes:\n      NODE: {{childType: GPU, childCount: 8, isNodeLevel: true}}\n    physicalCells:\n{nodes}"
    assert len(parse_settings_isolated(text, source="cfg.yaml").cells.topology.physical_cells) == 5_000
    with pytest.raises(ConfigError, match="^cfg.yaml: not checked: .* more than 4,194,304 bytes of memory, the limit"):
        parse_settings_isolated(text, source="cfg.yaml", memory_bytes=4 * 2**20)
