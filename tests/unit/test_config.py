from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.config import Settings, default_config_text, load_settings, parse_settings
from scheduler.errors import ConfigError


def test_embedded_default_file_matches_the_documented_defaults():
    assert load_settings(None) == Settings()
    assert parse_settings(default_config_text()) == Settings()


def test_partial_file_keeps_defaults_for_the_rest():
    settings = parse_settings("server:\n  port: 9000\n")
    assert settings.server.port == 9000 and settings.server.host == "127.0.0.1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server:\n  port: 70000\n", "server.port: Input should be less than or equal to 65535 (got 70000)"),
        ("server:\n  prot: 1\n", "server.prot: unknown key (misspelled?)"),
        ("server:\n  configReloadSeconds: -1\n", "server.configReloadSeconds: Input should be greater than or equal to 0 (got -1)"),
        ("policy:\n  name: magic\n", "policy.name: Input should be 'auto', 'hived' or 'resource-fit'"),
        ("policy:\n  offerBestNodes: 0\n", "policy.offerBestNodes: Input should be greater than or equal to 1 (got 0)"),
        ("cluster:\n  mode: sometimes\n", "cluster.mode"),
        ("logging: [1, 2]\n", "logging: Input should be a valid dictionary"),
        ("- just\n- a list\n", "the top level must be a mapping"),
        ("server: {port: [}\n", "not valid YAML at line 1"),
    ],
)
def test_errors_name_the_field(text, expected):
    with pytest.raises(ConfigError) as error:
        parse_settings(text, source="cfg.yaml")
    assert expected in str(error.value)
    assert str(error.value).startswith("cfg.yaml: ")


def test_missing_file_is_a_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "absent.yaml")


def test_check_config_command(tmp_path: Path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text("server:\n  port: 9000\n")
    assert main(["check-config", str(good)]) == 0
    assert "valid" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("server:\n  port: -1\n")
    assert main(["check-config", str(bad)]) == 2
    assert "server.port" in capsys.readouterr().err


def test_default_config_command_prints_the_embedded_file(capsys):
    assert main(["default-config"]) == 0
    assert parse_settings(capsys.readouterr().out) == Settings()


def test_serve_rejects_an_invalid_override(capsys):
    assert main(["serve", "--port", "0", "--standalone"]) == 2
    assert "server.port" in capsys.readouterr().err


def test_allox_tool_is_a_cellfit_subcommand(tmp_path: Path, capsys):
    import json

    output = tmp_path / "schedule.json"
    example = Path(__file__).resolve().parents[2] / "scheduler/matching/examples/three-jobs.json"
    assert main(["allox", "--input", str(example), "--output", str(output)]) == 0
    schedule = json.loads(output.read_text())
    assert {row["job"] for row in schedule["schedule"]} == {"j1", "j2", "j3"}
    bad = tmp_path / "bad.json"
    bad.write_text('{"now": 0}')
    assert main(["allox", "--input", str(bad)]) == 2
    assert "machines" in capsys.readouterr().err


def test_simulate_tool_is_a_cellfit_subcommand(tmp_path: Path, capsys):
    import json

    output = tmp_path / "result.json"
    code = main(["simulate", "--jobs", "200", "--policies", "fifo,fitgpp", "--no-progress", "--output-json", str(output)])
    assert code == 0
    result = json.loads(output.read_text())
    assert {"fifo", "fitgpp"} <= set(result)
    assert result["fifo"]["te"]["slowdown"]["p50"] >= 1.0
    assert main(["simulate", "--policies", "magic", "--no-progress"]) == 2
    assert "magic" in capsys.readouterr().err


def test_offer_best_nodes_under_hived_is_said_to_be_ignored(caplog):
    from scheduler.extender.runtime import build_cells

    text = """
policy: {name: hived, offerBestNodes: 1}
cells:
  topology:
    cellTypes:
      GPU-NODE: {childType: GPU, childCount: 8, isNodeLevel: true}
    physicalCells:
    - {cellType: GPU-NODE, nodeName: node-00}
"""
    with caplog.at_level("WARNING", logger="scheduler.extender.runtime"):
        assert build_cells(parse_settings(text), None) is not None
    assert "policy.offerBestNodes applies to resource-fit only" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="scheduler.extender.runtime"):
        assert build_cells(parse_settings("policy: {name: resource-fit, offerBestNodes: 1}"), None) is None
    assert "offerBestNodes" not in caplog.text
