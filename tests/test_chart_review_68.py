"""The chart as a cluster admin installs it (charts/cellfit; helm from tests/test_chart_offline.py):
values that must reach cellfit do; settings that would leave the release broken after the install
(replicas without a leader, a port two containers want, Lease timings kube-scheduler exits on,
PriorityClasses out of order, a drain-blocking budget, a placer mechanism with no webhook) are
refused at render, naming the setting; the webhooks stay off pods that are not cellfit's; the
alerts cover cellfit being down or leaderless; the scheduler pods run at a critical priority."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_chart_offline import RENDERED, cellfit_config_text, helm, one, render, render_args
from tests.test_chart_offline import containers as containers_by_name


def _estimator_section(*values: str) -> dict[str, Any]:
    section: dict[str, Any] = yaml.safe_load(cellfit_config_text(render(*values)))["estimator"]
    return section


def test_sampling_pods_go_to_the_charts_scheduler_profile() -> None:
    # Pods of an unknown schedulerName wait forever: every sampling pod would end as a failed
    # attempt after estimator.pendingLimitSeconds.
    assert _estimator_section("--set", "schedulerName=gpu-scheduler")["schedulerName"] == "gpu-scheduler"


def test_an_estimator_scheduler_name_of_its_own_is_kept() -> None:
    section = _estimator_section("--set", "schedulerName=gpu-scheduler", "--set", "estimator.schedulerName=sampler")
    assert section["schedulerName"] == "sampler"


def test_sampling_priority_class_defaults_to_the_charts_and_a_value_of_its_own_is_kept(tmp_path: Path) -> None:
    assert _estimator_section()["priorityClassName"] == "cellfit-sampling"
    assert _estimator_section("--set", "estimator.priorityClassName=team-sampling")["priorityClassName"] == "team-sampling"
    # null (in a values file; `--set` drops a null key): the Job template's own class.
    values = tmp_path / "values.yaml"
    values.write_text("estimator:\n  priorityClassName: null\n")
    assert _estimator_section("-f", str(values))["priorityClassName"] is None


@pytest.mark.parametrize("disabled", ["kubeScheduler.leaderElection.enabled=false", "leaderElection.enabled=false"])
def test_several_replicas_without_leader_election_are_refused(disabled: str) -> None:
    # Without a leader every replica's kube-scheduler binds the same pods, or every replica's
    # estimator and placer write the same Jobs.
    proc = helm(*render_args("--set", "replicaCount=2", "--set", disabled), check=False)
    assert proc.returncode != 0
    assert disabled.removesuffix("=false") in proc.stderr, proc.stderr
    assert "replicaCount" in proc.stderr, proc.stderr


@pytest.mark.parametrize("disabled", ["kubeScheduler.leaderElection.enabled=false", "leaderElection.enabled=false"])
def test_one_replica_without_leader_election_renders(disabled: str) -> None:
    render("--set", "replicaCount=1", "--set", disabled)


def test_resumed_pods_webhook_sees_only_pods_of_the_cellfit_profile() -> None:
    # Without a condition every Job pod of the cluster (kube-system's CronJobs, other
    # schedulers' Jobs) waits on cellfit's webhook, up to timeoutSeconds while it is away.
    docs = render("--set", "schedulerName=gpu-scheduler")
    hooks = {h["name"]: h for h in one(docs, "MutatingWebhookConfiguration")["webhooks"]}
    expressions = [c["expression"] for c in hooks["resumed-pods.admission.cellfit.io"].get("matchConditions", [])]
    assert any("object.spec.schedulerName == 'gpu-scheduler'" in e for e in expressions), expressions


def test_the_scheduler_pods_are_cluster_critical_by_default() -> None:
    # At priority 0 any pod of a higher class, whichever scheduler places it, may preempt the
    # scheduler itself, and every pod of the profile waits until it is back.
    spec = one(render(), "Deployment")["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "system-cluster-critical"


def test_the_scheduler_pods_priority_class_can_be_left_out() -> None:
    spec = one(render("--set", "priorityClassName="), "Deployment")["spec"]["template"]["spec"]
    assert "priorityClassName" not in spec


@pytest.mark.parametrize(("values_key", "container"), [("kubeScheduler.extraArgs", "kube-scheduler"), ("cellfit.extraArgs", "cellfit")])
def test_extra_args_reach_the_container_as_written(values_key: str, container: str) -> None:
    # YAML would read an unquoted `--a=b #c` as `--a=b` and a comment, `--a: b` as a mapping.
    args = ["--note=a #b", "--label=x: y"]
    docs = render("--set-json", f"{values_key}={json.dumps(args)}")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (found,) = [c for c in pod["containers"] if c["name"] == container]
    assert (found.get("command") or found["args"])[-2:] == args


@pytest.mark.parametrize("bad", ["0", "0%", "abc", "150%"])
def test_a_disruption_budget_that_blocks_every_drain_or_does_not_parse_is_refused(bad: str) -> None:
    # maxUnavailable 0 (or 0%) makes every `kubectl drain` of a node running cellfit hang;
    # "abc" would be refused only by the API server, after the release was half applied.
    proc = helm(*render_args("--set-string", f"podDisruptionBudget.maxUnavailable={bad}"), check=False)
    assert proc.returncode != 0
    assert "podDisruptionBudget" in proc.stderr and "maxUnavailable" in proc.stderr, proc.stderr


@pytest.mark.parametrize("good", ["1", "50%"])
def test_a_disruption_budget_of_some_room_renders(good: str) -> None:
    budget = one(render("--set-string", f"podDisruptionBudget.maxUnavailable={good}"), "PodDisruptionBudget")
    assert str(budget["spec"]["maxUnavailable"]) == good


def test_a_disruption_budget_of_zero_as_a_number_is_refused() -> None:
    proc = helm(*render_args("--set", "podDisruptionBudget.maxUnavailable=0"), check=False)
    assert proc.returncode != 0 and "maxUnavailable" in proc.stderr, proc.stderr


def _allox_section(*values: str) -> dict[str, Any]:
    section: dict[str, Any] = yaml.safe_load(cellfit_config_text(render(*values)))["allox"]
    return section


def test_without_the_webhook_the_placer_rewrites_templates_only() -> None:
    # allox.mechanism auto falls back to the pod-create webhook when the API server refuses a
    # template rewrite (always before KEP-5440): without the webhook the placed Job's pods would
    # run as their template asks, not in the configuration AlloX chose and counted.
    assert _allox_section("--set", "cellfit.admission.enabled=false")["mechanism"] == "template"
    assert "mechanism" not in _allox_section()  # with the webhook: cellfit's default, auto


@pytest.mark.parametrize("mechanism", ["webhook", "auto"])
def test_a_webhook_mechanism_without_the_webhook_is_refused(mechanism: str) -> None:
    proc = helm(*render_args("--set", "cellfit.admission.enabled=false", "--set", f"allox.mechanism={mechanism}"), check=False)
    assert proc.returncode != 0
    assert "allox.mechanism" in proc.stderr and "cellfit.admission.enabled" in proc.stderr, proc.stderr


def test_the_static_manifest_places_through_the_template_only() -> None:
    rendered = yaml.safe_load_all(RENDERED.read_text())
    (config_map,) = [d for d in rendered if d and d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})]
    assert yaml.safe_load(config_map["data"]["config.yaml"])["allox"]["mechanism"] == "template"


@pytest.mark.parametrize(("setting", "named"), [
    ("priorityClasses.bestEffort.value=2000", "priorityClasses.bestEffort.value"),  # resumed, sampling pods behind BE
    ("priorityClasses.resumed.value=400", "priorityClasses.resumed.value"),  # the webhook's move would lower them
    ("priorityClasses.sampling.value=1500", "priorityClasses.sampling.value"),  # sampling would outrank trial
    ("priorityClasses.opportunistic.value=500", "priorityClasses.opportunistic.value"),  # BE could not reclaim
])
def test_priority_classes_out_of_order_are_refused(setting: str, named: str) -> None:
    proc = helm(*render_args("--set", setting), check=False)
    assert proc.returncode != 0
    assert named in proc.stderr, proc.stderr


def _alerts(*values: str) -> dict[str, dict[str, Any]]:
    docs = render("--api-versions", "monitoring.coreos.com/v1", "--set", "prometheusRule.enabled=true", *values)
    return {rule["alert"]: rule for rule in one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]}


def test_an_alert_fires_when_no_replica_is_scraped_at_all() -> None:
    # Every replica down: no pod of the profile is scheduled (the extender is not ignorable),
    # and every other alert, reading metrics no one exports, stays silent.
    alerts = _alerts("--set", "serviceMonitor.enabled=true")
    down = alerts["CellfitDown"]
    assert down["expr"].startswith("absent(") and 'namespace="cellfit-system"' in down["expr"]
    assert down["labels"]["severity"] == "critical"
    # Without the chart's ServiceMonitor the chart cannot tell "down" from "not scraped".
    assert "CellfitDown" not in _alerts()


def test_an_alert_fires_when_no_replica_runs_the_controllers() -> None:
    # No holder of the controllers' Lease (its RBAC, the API away): the estimator, AlloX, the
    # placer, the nudge and the exchange stand still while the verbs keep answering.
    alerts = _alerts()
    assert "cellfit_leader" in alerts["CellfitNoLeader"]["expr"]
    assert "CellfitNoLeader" not in _alerts("--set", "leaderElection.enabled=false")


@pytest.mark.parametrize("taken", ["cellfit.port", "cellfit.metrics.port", "cellfit.inspect.port", "cellfit.admission.port"])
def test_kube_scheduler_port_must_not_be_one_of_cellfits(taken: str) -> None:
    # Both containers share the pod's network: the second to bind the port crashes in a loop.
    port = {"cellfit.port": 8888, "cellfit.metrics.port": 8889, "cellfit.inspect.port": 8890, "cellfit.admission.port": 9443}[taken]
    proc = helm(*render_args("--set", f"kubeScheduler.securePort={port}"), check=False)
    assert proc.returncode != 0
    assert "kubeScheduler.securePort" in proc.stderr and taken in proc.stderr, proc.stderr


def test_kube_scheduler_port_may_take_a_port_cellfit_does_not_listen_on() -> None:
    docs = render("--set", "kubeScheduler.securePort=8889", "--set", "cellfit.metrics.enabled=false")
    assert containers_by_name(docs)["kube-scheduler"]["ports"][0]["containerPort"] == 8889


@pytest.mark.parametrize(("settings", "named"), [
    (("leaseDuration=5s",), "kubeScheduler.leaderElection.leaseDuration"),
    (("leaseDuration=1m", "renewDeadline=1m0s"), "kubeScheduler.leaderElection.leaseDuration"),
    (("renewDeadline=2s", "retryPeriod=2s"), "kubeScheduler.leaderElection.renewDeadline"),
])
def test_kube_scheduler_lease_timings_it_would_refuse_are_refused(settings: tuple[str, ...], named: str) -> None:
    # kube-scheduler exits at start on these (leaseDuration must exceed renewDeadline, and
    # renewDeadline 1.2 retryPeriods): every replica would crash in a loop after the install.
    flags = [flag for setting in settings for flag in ("--set", f"kubeScheduler.leaderElection.{setting}")]
    proc = helm(*render_args(*flags), check=False)
    assert proc.returncode != 0
    assert named in proc.stderr, proc.stderr


def test_kube_scheduler_lease_timings_in_other_units_render() -> None:
    flags = ["--set", "kubeScheduler.leaderElection.leaseDuration=1m30s", "--set", "kubeScheduler.leaderElection.renewDeadline=1m",
             "--set", "kubeScheduler.leaderElection.retryPeriod=1500ms"]
    render(*flags)


@pytest.mark.parametrize("setting", ["leaderElection.renewDeadlineSeconds=20", "leaderElection.retryPeriodSeconds=10"])
def test_cellfit_lease_timings_out_of_order_are_refused(setting: str) -> None:
    # cellfit refuses to start on them (scheduler/config.py): every replica would crash in a loop.
    proc = helm(*render_args("--set", setting), check=False)
    assert proc.returncode != 0
    assert "leaderElection.renewDeadlineSeconds" in proc.stderr, proc.stderr
