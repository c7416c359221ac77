"""The chart's Grafana dashboard and PrometheusRule read only metrics cellfit exports, and the
metrics the alerts need say what they claim.

The exported names come from cellfit's own registry (a HiveD runtime with FitGpp and the
admission webhook's certificate tracked, as ``cellfit serve`` sets it up), not from a list kept
here; every PromQL expression of the rendered chart is parsed for the metric names it selects.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from cryptography import x509
from prometheus_client import generate_latest

from scheduler.config import parse_settings
from scheduler.extender.certificates import certificate_not_after
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.runtime import build_runtime
from tests.support import hived
from tests.support.tls import make_serving_certificate
from tests.test_chart_offline import one, render

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ("--set", "grafana.dashboard.enabled=true", "--set", "prometheusRule.enabled=true",
              "--api-versions", "monitoring.coreos.com/v1")

# PromQL words that are not metric names: aggregations, their modifiers, operators.
KEYWORDS = {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "group",
            "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"}


def exported_metric_names() -> set[str]:
    """Every series name cellfit's registry can export: counters with ``_total``, histograms
    with ``_bucket``, ``_sum`` and ``_count``."""
    runtime = build_runtime(parse_settings("policy: {name: hived}\n" + hived.CONFIG), standalone=True)
    runtime.metrics.track_certificate(lambda: 0.0)  # serve() does, once the webhook's listener runs
    names: set[str] = set()
    for family in runtime.metrics.registry.collect():
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}_bucket", f"{family.name}_sum", f"{family.name}_count"}
        else:
            names.add(family.name)
    return names


def selected_metrics(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions (followed
    by "("), keywords, label names (inside {...} or a by/without/on/ignoring list), strings,
    range or Grafana variables."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"\{[^{}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\[\]]*\]", "", text)  # ranges, $__rate_interval
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", text)
    text = re.sub(r"\$\w+", " ", text)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        word, rest = match.group(0), text[match.end():].lstrip()
        if word in KEYWORDS or rest.startswith("(") or re.fullmatch(r"\d+(e\d+)?", word):
            continue
        names.add(word)
    return names


def balanced(expr: str) -> bool:
    depth = {"(": 0, "[": 0, "{": 0}
    closing = {")": "(", "]": "[", "}": "{"}
    for char in re.sub(r'"(?:[^"\\]|\\.)*"', "", expr):
        if char in depth:
            depth[char] += 1
        elif char in closing:
            depth[closing[char]] -= 1
            if depth[closing[char]] < 0:
                return False
    return not any(depth.values())


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return exported_metric_names()


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return render(*MONITORING)


@pytest.fixture(scope="module")
def dashboard(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(json.loads(one(docs, "ConfigMap", "-dashboard")["data"]["cellfit.json"]))


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            yield panel


# ------------------------------------------------------------------------------ the checker itself


def test_selected_metrics_finds_names_and_nothing_else() -> None:
    assert selected_metrics('histogram_quantile(0.99, sum by (le, verb) (rate(a_bucket{x="y",verb=~"f.*"}[$__rate_interval])))') == {"a_bucket"}
    assert selected_metrics("max by (vc) (b{state=\"used\"}) / max by (vc) (c) > 0.5") == {"b", "c"}
    assert selected_metrics("up == 0 and on (pod) d - time() < 86400") == {"up", "d"}
    assert selected_metrics("label_values(e, namespace)") == {"e", "namespace"}  # a Grafana query: see the test using it


def test_a_misspelled_metric_would_be_caught(exported: set[str]) -> None:
    assert "cellfit_extender_requests_total" in exported and "cellfit_vc_cells" in exported
    assert not selected_metrics("sum(rate(cellfit_extender_request_total[5m]))") <= exported


def test_registry_names_follow_the_exposition(exported: set[str]) -> None:
    """The names built from the registry are the ones /metrics serves."""
    runtime = build_runtime(parse_settings("policy: {name: hived}\n" + hived.CONFIG), standalone=True)
    served = {line.split()[2] for line in generate_latest(runtime.metrics.registry).decode().splitlines() if line.startswith("# TYPE")}
    assert "cellfit_extender_request_duration_seconds_bucket" in exported
    assert {"cellfit_extender_requests_total", "cellfit_resume_hold_kept_off_total", "cellfit_vc_cells"} <= served & exported


# ------------------------------------------------------------------------------ the dashboard


def test_dashboard_is_off_by_default_and_labelled_for_the_sidecar(docs: list[dict[str, Any]]) -> None:
    assert not [d for d in render() if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")]
    config_map = one(docs, "ConfigMap", "-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == "cellfit-system"


def test_every_dashboard_query_names_only_exported_metrics(dashboard: dict[str, Any], exported: set[str]) -> None:
    checked = 0
    for panel in panels(dashboard):
        names = set()
        for target in panel["targets"]:
            assert balanced(target["expr"]), (panel["title"], target["expr"])
            names |= selected_metrics(target["expr"])
            checked += 1
        assert names, f"panel {panel['title']!r} queries no metric"
        assert names <= exported, f"panel {panel['title']!r} names metrics cellfit does not export: {sorted(names - exported)}"
    assert checked >= 25
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            assert selected_metrics(variable["definition"]) - {"namespace"} <= exported, variable


def test_dashboard_covers_what_operators_ask(dashboard: dict[str, Any]) -> None:
    used = {name for panel in panels(dashboard) for target in panel["targets"] for name in selected_metrics(target["expr"])}
    for topic, metric in [
        ("extender latency per verb", "cellfit_extender_request_duration_seconds_bucket"),
        ("extender errors per verb", "cellfit_extender_requests_total"),
        ("decisions", "cellfit_filter_node_verdicts_total"),
        ("bindings", "cellfit_bindings_total"),
        ("VC use", "cellfit_vc_cells"),
        ("fragmentation", "cellfit_fragmentation_ratio"),
        ("preemptions by rule", "cellfit_preemptions_total"),
        ("resume holds", "cellfit_resume_holds"),
        ("sampling overhead", "cellfit_estimator_sampling_share"),
        ("AlloX queue lengths", "cellfit_allox_queue_jobs"),
    ]:
        assert metric in used, topic
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels(dashboard))


def test_dashboard_file_is_what_the_config_map_holds(docs: list[dict[str, Any]]) -> None:
    shipped = json.loads((ROOT / "charts" / "cellfit" / "dashboards" / "cellfit.json").read_text())
    assert json.loads(one(docs, "ConfigMap", "-dashboard")["data"]["cellfit.json"]) == shipped


# ------------------------------------------------------------------------------ the alerts


def test_prometheus_rule_is_off_by_default_and_needs_the_operator() -> None:
    assert not [d for d in render("--api-versions", "monitoring.coreos.com/v1") if d["kind"] == "PrometheusRule"]
    assert not [d for d in render("--set", "prometheusRule.enabled=true") if d["kind"] == "PrometheusRule"]


def test_every_alert_names_only_exported_metrics(docs: list[dict[str, Any]], exported: set[str]) -> None:
    rules = one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
    for rule in rules:
        assert balanced(rule["expr"]), rule
        names = selected_metrics(rule["expr"])
        assert names and names <= exported, (rule["alert"], sorted(names - exported))
        assert 'namespace="cellfit-system"' in rule["expr"], rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    by_topic = {rule["alert"]: selected_metrics(rule["expr"]) for rule in rules}
    assert by_topic["CellfitConfigurationNotInEffect"] == {"cellfit_config_in_effect"}
    assert by_topic["CellfitExtenderErrors"] == {"cellfit_extender_requests_total"}
    assert by_topic["CellfitWatchCacheNotSynced"] == {"cellfit_watch_cache_synced"}
    assert by_topic["CellfitWebhookCertificateExpiresSoon"] == {"cellfit_admission_certificate_expiry_timestamp_seconds"}
    assert by_topic["CellfitSamplingPodsFailing"] == {"cellfit_estimator_failed_sampling_pods"}
    assert "< 1209600" in next(r["expr"] for r in rules if r["alert"] == "CellfitWebhookCertificateExpiresSoon")  # 14 days


def test_nondefault_values_set_labels_severity_and_days() -> None:
    docs = render("-f", str(ROOT / "charts" / "cellfit" / "ci" / "nondefault-values.yaml"), "--api-versions", "monitoring.coreos.com/v1")
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    rules = {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}
    assert rules["CellfitExtenderErrors"]["labels"]["severity"] == "page"
    assert "< 604800" in rules["CellfitWebhookCertificateExpiresSoon"]["expr"]
    dashboard = one(docs, "ConfigMap", "-dashboard")
    assert dashboard["metadata"]["namespace"] == "monitoring" and dashboard["metadata"]["annotations"] == {"grafana_folder": "cellfit"}
    viewers = one(docs, "RoleBinding", "-viewer")
    assert viewers["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-sched-viewer"}
    assert viewers["subjects"] == [{"kind": "Group", "name": "ml-users", "apiGroup": "rbac.authorization.k8s.io"}]


# ------------------------------------------------------------------------------ the viewer role


def test_viewer_role_grants_the_proxy_to_cellfits_service_and_its_endpointslices_only() -> None:
    """The proxy and the Service, by name; and listing EndpointSlices (no name can be given to a
    list), which the role's RoleBinding keeps to cellfit's namespace: how many replicas stand
    behind the Service, since each keeps resume holds of its own."""
    docs = render()
    role = one(docs, "ClusterRole", "-viewer")
    service = next(d for d in docs if d["kind"] == "Service" and any(p["name"] == "inspect" for p in d["spec"]["ports"]))
    name = service["metadata"]["name"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["services/proxy"], "resourceNames": [name, f"{name}:inspect", f"http:{name}:inspect"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["services"], "resourceNames": [name], "verbs": ["get"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
    ]
    assert not [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"].endswith("-viewer")]  # no subjects: none
    assert not [d for d in render("--set", "rbac.viewer.create=false") if d["metadata"]["name"].endswith("-viewer")]


# ------------------------------------------------------------------------------ the metrics alerts read


def test_watch_cache_synced_follows_readiness() -> None:
    metrics = ExtenderMetrics()
    state = {"ready": False}
    metrics.track_readiness(lambda: state["ready"])
    assert metrics.registry.get_sample_value("cellfit_watch_cache_synced") == 0.0
    state["ready"] = True
    assert metrics.registry.get_sample_value("cellfit_watch_cache_synced") == 1.0
    standalone = build_runtime(parse_settings("{}"), standalone=True)
    assert standalone.metrics.registry.get_sample_value("cellfit_watch_cache_synced") == 1.0


def test_estimator_gauges_count_states_and_failed_samples() -> None:
    metrics = ExtenderMetrics()
    assert metrics.registry.get_sample_value("cellfit_estimator_failed_sampling_pods") == 0.0  # no estimator: zeros
    view = {"jobs": [
        {"state": "sampling", "samples": [{"state": "failed"}, {"state": "failed"}, {"state": "running"}]},
        {"state": "estimated", "samples": [{"state": "failed"}, {"state": "succeeded"}]},  # retried: no longer failing
        {"state": "failed", "samples": [{"state": "failed"}]},
    ]}
    metrics.track_estimator(lambda: view)
    assert metrics.registry.get_sample_value("cellfit_estimator_failed_sampling_pods") == 2.0
    assert metrics.registry.get_sample_value("cellfit_estimator_jobs", {"state": "failed"}) == 1.0
    assert metrics.registry.get_sample_value("cellfit_estimator_jobs", {"state": "sampling"}) == 1.0
    assert metrics.registry.get_sample_value("cellfit_estimator_jobs", {"state": "invalid"}) == 0.0
    metrics.track_estimator(None)  # a standby
    assert metrics.registry.get_sample_value("cellfit_estimator_jobs", {"state": "failed"}) == 0.0


def test_certificate_expiry_is_the_certificates_not_after(tmp_path: Path) -> None:
    made = make_serving_certificate(tmp_path)
    end = x509.load_pem_x509_certificate(made.cert_file.read_bytes()).not_valid_after_utc
    assert certificate_not_after(str(made.cert_file)) == end.replace(microsecond=0).timestamp()
    assert certificate_not_after(str(tmp_path / "missing.pem")) is None
    metrics = ExtenderMetrics()
    assert metrics.registry.get_sample_value("cellfit_admission_certificate_expiry_timestamp_seconds") is None  # no webhook
    metrics.track_certificate(lambda: certificate_not_after(str(made.cert_file)))
    value = metrics.registry.get_sample_value("cellfit_admission_certificate_expiry_timestamp_seconds")
    assert value == end.timestamp() // 1 and value > datetime.datetime.now(datetime.timezone.utc).timestamp()
