"""cellfit's settings, command line and log as an operator meets them (helper-71's review): a
flag that would be silently dropped, a YAML boolean read as a number, a log value a client makes
long without being cut."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import httpx
import pytest

from scheduler import cli
from scheduler.config import parse_settings
from scheduler.errors import ConfigError
from scheduler.extender.runtime import build_runtime
from scheduler.logs import MAX_VALUE_CHARS, JsonFormatter, TextFormatter


# ------------------------------------------------------------------------------ the command line


def test_standalone_and_a_kubeconfig_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """``--standalone`` won and ``--kubeconfig`` was dropped without a word: an operator
    pointing cellfit at a cluster got one that never connects."""
    with pytest.raises(SystemExit) as refused:
        cli._parser().parse_args(["serve", "--standalone", "--kubeconfig", "/etc/kube/admin.conf"])
    assert refused.value.code == 2
    assert "--kubeconfig" in capsys.readouterr().err


def test_an_empty_listen_address_is_refused_not_every_interface(capsys: pytest.CaptureFixture[str]) -> None:
    """An empty host binds every interface (the socket's INADDR_ANY): ``--host "$HOST"`` with
    HOST unset put the extender's verbs, bind included, on the pod IP instead of loopback.
    The other listeners' addresses already refused it."""
    with pytest.raises(ConfigError, match="server.host: String should have at least 1 character"):
        parse_settings('server: {host: ""}')
    assert cli.main(["serve", "--standalone", "--host", ""]) == 2
    assert "invalid option: server.host" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the file


@pytest.mark.parametrize(("text", "field"), [
    ("server: {port: true}", "server.port"),  # was read as port 1
    ("policy: {offerBestNodes: true}", "policy.offerBestNodes"),  # was read as 1 node
    ("server: {metricsPort: true}", "server.metricsPort"),
    ("estimator: {maxClusterShare: true}", "estimator.maxClusterShare"),  # was read as 100%
    ("server: {configReloadSeconds: false}", "server.configReloadSeconds"),  # was read as "never"
])
def test_a_boolean_where_a_number_belongs_is_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(ConfigError, match=rf"{field}: .*a number, not true or false"):
        parse_settings(text)


def test_numbers_and_booleans_where_they_belong_still_read() -> None:
    settings = parse_settings("server: {port: 9000, configReloadSeconds: 0.5, nodeNameFastPath: false}\n"
                              "estimator: {maxClusterShare: 1}\npolicy: {offerBestNodes: null}")
    assert (settings.server.port, settings.server.config_reload_seconds, settings.server.node_name_fast_path) == (9000, 0.5, False)
    assert settings.estimator.max_cluster_share == 1.0 and settings.policy.offer_best_nodes is None


@pytest.mark.parametrize("text", [
    "cluster: {mode: standalone, kubeconfig: /etc/cellfit/remote.conf}",
    "cluster: {mode: in-cluster, kubeconfig: /etc/cellfit/remote.conf}",
    "cluster: {mode: in-cluster, context: gpu-east}",
])
def test_a_kubeconfig_or_context_its_mode_never_reads_is_refused(text: str) -> None:
    """The connection reads cluster.kubeconfig and cluster.context only in modes kubeconfig and
    auto: elsewhere they were dropped without a word (the chart writes mode in-cluster, so a
    kubeconfig added to its configuration was never used)."""
    with pytest.raises(ConfigError, match=r"cluster: .*kubeconfig and context are read only in mode kubeconfig"):
        parse_settings(text)


def test_a_kubeconfig_named_in_mode_auto_is_the_one_used_even_in_a_pod() -> None:
    """Mode auto took the pod's ServiceAccount first and dropped a named kubeconfig (or
    context); naming one says which cluster to use."""
    assert parse_settings("cluster: {kubeconfig: /etc/cellfit/remote.conf}").cluster.mode == "kubeconfig"
    assert parse_settings("cluster: {context: gpu-east}").cluster.mode == "kubeconfig"
    assert parse_settings("cluster: {}").cluster.mode == "auto"


def test_standalone_on_the_command_line_wins_over_a_files_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "cellfit.yaml"
    config.write_text("cluster: {kubeconfig: /etc/cellfit/remote.conf, context: gpu-east}\n")
    settings, _ = cli._serve_settings(cli._parser().parse_args(["serve", "--config", str(config), "--standalone"]))
    assert (settings.cluster.mode, settings.cluster.kubeconfig, settings.cluster.context) == ("standalone", None, None)


# ------------------------------------------------------------------------------ the log


def record(**extra: object) -> logging.LogRecord:
    made = logging.LogRecord("scheduler.extender.validating", logging.INFO, __file__, 1, "admission found problems", None, None)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_a_long_list_in_a_records_context_is_cut_like_a_long_string() -> None:
    """The validating webhook logs every problem's field: one per unknown cellfit.io/ key, as
    many as the object's 256 KiB of annotations hold. Cut like a string, not written whole."""
    problems = [f"annotation cellfit.io/unknown-{index:05d}" for index in range(5000)]
    line = JsonFormatter().format(record(problems=problems, kind="Pod"))
    assert len(line) < MAX_VALUE_CHARS + 500
    entry = json.loads(line)
    assert entry["kind"] == "Pod"
    assert entry["problems"].startswith('["annotation cellfit.io/unknown-00000"') and "more characters cut" in entry["problems"]
    assert len(TextFormatter().format(record(problems=problems))) < MAX_VALUE_CHARS + 500


def test_short_structured_values_stay_structured() -> None:
    entry = json.loads(JsonFormatter().format(record(problems=["label cellfit.io/vc"], victims={"gpu-a": ["u1"]}, count=3)))
    assert entry["problems"] == ["label cellfit.io/vc"] and entry["victims"] == {"gpu-a": ["u1"]} and entry["count"] == 3


# ------------------------------------------------------------------------------ metric labels


def test_preemptions_count_a_job_class_label_cellfit_does_not_know_as_other() -> None:
    """cellfit_preemptions_total's preemptor_class came from the pod's cellfit.io/job-class label
    as written: under preemption.policy placement nothing refuses another value, so a label
    per Job (a run id) made a series per Job. Only trial and best-effort are classes."""
    from tests.integration.test_preempt_victim_shapes import FILTER, NODES, place, post, preempt
    from tests.support import kube_objects as k
    from tests.support.server import running_server

    runtime = build_runtime(parse_settings("preemption: {policy: placement}"), standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert post(client, FILTER, k.extender_args(k.pod("warmup-0"), NODES, node_cache_capable=False)).status_code == 200
        for index in range(3):
            low = k.pod(f"low-{index}", gpus=8, node_name="gpu-a", phase="Running", priority=0)
            place(runtime, low)
            preemptor = k.pod(f"run-{index}", gpus=8, priority=100, labels={"cellfit.io/job-class": f"run-4711-{index}"})
            answer = preempt(client, k.preemption_args(preemptor, {"gpu-a": [low]}, node_cache_capable=False))
            assert answer == {"gpu-a": {"Pods": [{"UID": low["metadata"]["uid"]}], "NumPDBViolations": 0}}
            with runtime.lock:
                runtime.engine.delete_pod(low["metadata"]["uid"])
    classes = {s.labels["preemptor_class"]: s.value for family in runtime.metrics.registry.collect()
               for s in family.samples if s.name == "cellfit_preemptions_total"}
    assert classes == {"other": 3.0}


def test_a_text_log_line_is_one_line_whatever_a_client_sent() -> None:
    """logging.format text: a context value a client chose (a rejected request's reason quotes
    it) with a line break wrote a second line that reads as a record of its own."""
    forged = "bad body\n2026-11-27 10:00:00,000 INFO    scheduler.extender.service: bound [pod=ml/x node=gpu-a]"
    line = TextFormatter().format(record(reason=forged))
    assert "\n" not in line and "bad body\\n2026-11-27" in line
    assert TextFormatter().format(record(pod="ml/x")).endswith("[pod=ml/x]")  # plain values as they were


# ------------------------------------------------------------------------------ live reload


def test_a_reload_whose_parser_could_not_start_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from scheduler.extender.configuration import ConfigReloader
    from scheduler.extender.metrics import ExtenderMetrics

    path = tmp_path / "cellfit.yaml"
    path.write_text("logging: {level: INFO}\n")
    metrics = ExtenderMetrics()
    reloader = ConfigReloader(path=str(path), running=parse_settings(path.read_text()), cells=None,
                              lock=threading.RLock(), metrics=metrics)
    first = reloader.reload_if_changed()  # the file as startup read it: nothing to do
    assert first is None or first.result is None
    path.write_text("logging: {level: DEBUG}\n")  # a change that waits for a restart
    with monkeypatch.context() as broken:
        broken.setattr(sys, "executable", str(tmp_path / "no-python-here"))  # the child cannot start
        try:
            reloader.reload_if_changed()
        except OSError:
            pass  # what the watch loop logs; the next check must still act on the file
    outcome = reloader.reload_if_changed()
    assert outcome is not None and outcome.result == "needs_restart"
    assert metrics.registry.get_sample_value("cellfit_config_in_effect") == 0


# ------------------------------------------------------------------------------ inspect


def test_the_cell_tree_to_node_level_is_served_without_its_gpus() -> None:
    from fastapi.testclient import TestClient

    from tests.support import hived

    runtime = build_runtime(parse_settings("policy: {name: hived}\n" + hived.CONFIG), standalone=True)
    with TestClient(runtime.inspect_app) as client:
        answer = client.get("/v1/inspect/cells", params={"gpus": "false"})
    assert answer.status_code == 200

    def levels(cell: dict[str, object]) -> set[object]:
        children = cell.get("children") or []
        assert isinstance(children, list)
        return {cell.get("level")} | {level for child in children for level in levels(child)}

    assert 1 not in {level for top in answer.json()["cells"] for level in levels(top)}
