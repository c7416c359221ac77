"""The dashboard's numbers, not only its metric names (helper-71's review): panels are evaluated
on what cellfit's registries export, two replicas scraped as the chart's ServiceMonitor scrapes
them, with a small evaluator of the PromQL the gauge panels use (selectors, aggregations with
``by``, arithmetic between vectors of the same labels). Anything else it refuses, so a panel it
cannot read fails loudly instead of being skipped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest

from scheduler.cells import HivedEngine
from scheduler.extender.metrics import ExtenderMetrics
from tests.cells.helpers import node_names, pod, rack_cluster, schedule

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "charts" / "cellfit" / "dashboards" / "cellfit.json").read_text())

Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]
Sample = tuple[str, dict[str, str], float]

TOKEN = re.compile(r'\s*(?:(?P<number>\d+(?:\.\d+)?)|(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)|(?P<string>"(?:[^"\\]|\\.)*")'
                   r"|(?P<op>=~|!=|[=(){},/*+-]))")
AGGREGATIONS = {"sum": sum, "max": max, "min": min}


class PromQL:
    """Instant queries over ``samples`` (name, labels, value)."""

    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def query(self, expr: str) -> Vector:
        self.tokens = [m.group(m.lastgroup or "") for m in TOKEN.finditer(expr)]
        assert "".join(self.tokens) == re.sub(r"\s+", "", expr), f"cannot read {expr!r}"
        result = self._expr()
        assert not self.tokens, f"left over in {expr!r}: {self.tokens}"
        return result

    def _next(self, expected: str | None = None) -> str:
        token = self.tokens.pop(0)
        assert expected is None or token == expected, (expected, token)
        return token

    def _expr(self) -> Vector:
        left = self._term()
        while self.tokens and self.tokens[0] in "/*+-":
            op, right = self._next(), self._term()
            left = {labels: _apply(op, value, right[labels]) for labels, value in left.items() if labels in right}
        return left

    def _term(self) -> Vector:
        word = self._next()
        if word in AGGREGATIONS:
            by: tuple[str, ...] = ()
            if self.tokens[0] == "by":
                self._next("by")
                by = self._names()
            self._next("(")
            inner = self._expr()
            self._next(")")
            groups: dict[Labels, list[float]] = {}
            for labels, value in inner.items():
                groups.setdefault(frozenset((k, v) for k, v in labels if k in by), []).append(value)
            return {labels: AGGREGATIONS[word](values) for labels, values in groups.items()}
        matchers = self._matchers() if self.tokens and self.tokens[0] == "{" else []
        return {frozenset(labels.items()): value for name, labels, value in self.samples
                if name == word and all(_matches(labels.get(k, ""), op, v) for k, op, v in matchers)}

    def _names(self) -> tuple[str, ...]:
        self._next("(")
        names = []
        while self.tokens[0] != ")":
            names.append(self._next())
            if self.tokens[0] == ",":
                self._next(",")
        self._next(")")
        return tuple(names)

    def _matchers(self) -> list[tuple[str, str, str]]:
        self._next("{")
        found = []
        while self.tokens[0] != "}":
            name, op, value = self._next(), self._next(), json.loads(self._next())
            found.append((name, op, value))
            if self.tokens[0] == ",":
                self._next(",")
        self._next("}")
        return found


def _apply(op: str, left: float, right: float) -> float:
    return {"/": lambda: left / right, "*": lambda: left * right, "+": lambda: left + right, "-": lambda: left - right}[op]()


def _matches(value: str, op: str, wanted: str) -> bool:
    return {"=": value == wanted, "!=": value != wanted, "=~": re.fullmatch(wanted, value) is not None}[op]


def scraped(metrics: ExtenderMetrics, *, pod_name: str) -> list[Sample]:
    """The samples Prometheus stores for one replica: the target's labels added."""
    return [(s.name, {**s.labels, "namespace": "cellfit-system", "pod": pod_name}, s.value)
            for family in metrics.registry.collect() for s in family.samples]


def panel_queries(title: str) -> Iterator[str]:
    panel = next(p for p in DASHBOARD["panels"] if p.get("title") == title)
    for target in panel["targets"]:
        yield target["expr"].replace("$namespace", ".*")  # Grafana's "All"


def replica(engine: HivedEngine) -> ExtenderMetrics:
    metrics = ExtenderMetrics()
    metrics.track_cells(engine.metrics)
    return metrics


def test_vc_use_is_the_share_of_the_vcs_cells_in_use_with_two_replicas() -> None:
    """VC "a" owns 4 node cells, 3 hold guaranteed pods: 75% in use, whichever replica
    Prometheus reads (both export the same cells). A maximum over the states instead of their
    sum read 3 of max(3, 1) = 100%."""
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 4}],
                                                       "b": [{"cellType": "V100-NODE", "count": 2}]}))
    for index in range(3):
        assert schedule(engine, pod(f"a-{index}", 8, vc="a"), node_names()) is not None
    assert schedule(engine, pod("b-0", 8, vc="b"), node_names()) is not None
    samples = scraped(replica(engine), pod_name="cellfit-0") + scraped(replica(engine), pod_name="cellfit-1")
    (query,) = panel_queries("VC use")
    use = {dict(labels)["vc"]: value for labels, value in PromQL(samples).query(query).items()}
    assert use == {"a": 0.75, "b": 0.5}


def test_allox_queue_counts_the_leaders_queue_once_after_a_failover() -> None:
    """Replica 0 led, planned 5 Jobs on GPUs, and lost the Lease; replica 1 leads now with 2.
    The panel sums over replicas: the former leader must export no queue of its own."""
    former, leader = ExtenderMetrics(), ExtenderMetrics()
    former.allox_queue.labels(kind="gpu").set(5)  # as runtime's decided() sets it after a decision
    former.standby()  # the end of its term (runtime's _leadership, stopped)
    leader.allox_queue.labels(kind="gpu").set(2)
    samples = scraped(former, pod_name="cellfit-0") + scraped(leader, pod_name="cellfit-1")
    (query,) = panel_queries("AlloX queue")
    queued = {dict(labels)["kind"]: value for labels, value in PromQL(samples).query(query).items()}
    assert queued["gpu"] == 2
    assert former.registry.get_sample_value("cellfit_allox_fairness_spread") == 0


@pytest.mark.parametrize("expr", ["rate(x[5m])", "x > 1", "x and y"])
def test_the_evaluator_refuses_what_it_does_not_read(expr: str) -> None:
    with pytest.raises(AssertionError):
        PromQL([]).query(expr)
