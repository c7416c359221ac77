"""Live reload of hostile and huge configuration files in the real process (``cellfit serve
--config`` on a file laid out as a mounted ConfigMap): each is refused with a warning naming the
field, the running configuration keeps serving, and the extender's verbs answer all along.

Before the bounds, a 300-byte alias bomb in a typed field held the interpreter in pydantic for
tens of seconds: every verb waited (and kube-scheduler's calls timed out). The verbs here are
called back to back from the file's rewrite until the reload has been counted, each with a
deadline far above a normal answer (milliseconds) and far below that freeze; the latencies are
printed, before and during, for the README's figure (run with ``-s``)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Callable

import httpx
import pytest

from scheduler.constants import LABEL_VIRTUAL_CLUSTER
from tests.integration.test_config_reload import Served, config, eventually, served  # noqa: F401 (fixture)
from tests.support import kube_objects as k
from tests.support.hived import NODES

# A verb answers in milliseconds; a reload that holds the interpreter held it for 38 s.
VERB_DEADLINE_SECONDS = 5.0
PROBE = k.extender_args(k.pod("probe-0", gpus=1, labels={LABEL_VIRTUAL_CLUSTER: "vision"}), NODES, node_cache_capable=True)


def alias_bomb(levels: int = 9) -> str:
    """Nine lists of nine aliases: 300 bytes that expand to 9**9 (387 million) strings."""
    lines = ['    a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"    a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "allox:\n  nodeSelector:\n" + "\n".join(lines) + "\n"


def huge_infeasible_topology(*, port: int, nodes: int) -> str:
    """A topology near the size bound whose VCs ask for more than it has: refused only after the
    whole cell tree was built for the feasibility proof (the slow case)."""
    listed = "".join(f"      - {{cellType: A100-NODE, nodeName: n{i}}}\n" for i in range(nodes))
    return (
        f"server: {{port: {port}, configReloadSeconds: 0.2}}\n"
        "logging: {format: json}\n"
        "cells:\n  topology:\n    cellTypes:\n"
        "      A100-PAIR: {childType: A100, childCount: 2}\n"
        "      A100-NODE: {childType: A100-PAIR, childCount: 4, isNodeLevel: true}\n"
        f"    physicalCells:\n{listed}"
        f"  virtualClusters:\n    vision: [{{cellType: A100-NODE, count: {nodes + 1}}}]\n"
    )


def filter_latencies_until(cellfit: Served, done: Callable[[list[float]], bool], *, within: float) -> list[float]:
    """Call filter back to back until ``done(latencies so far)``; every call must answer 200
    within the deadline."""
    latencies: list[float] = []
    deadline = time.monotonic() + within
    with httpx.Client(base_url=cellfit.url, timeout=VERB_DEADLINE_SECONDS) as client:
        while True:
            start = time.perf_counter()
            response = client.post("/v1/extender/filter", content=k.dumps(PROBE))
            latencies.append(time.perf_counter() - start)
            assert response.status_code == 200, response.text
            assert response.json()["NodeNames"], response.text
            if done(latencies):
                return latencies
            assert time.monotonic() < deadline, f"the reload was not counted within {within:.0f}s"


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    return (
        f"{len(ordered)} calls, median {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {ordered[int(0.99 * (len(ordered) - 1))] * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("hostile", "field"),
    [
        pytest.param(lambda port: config(port=port, vision=2, speech=2) + alias_bomb(), "allox.nodeSelector.a5", id="alias-bomb"),
        pytest.param(
            lambda port: config(port=port, vision=2, speech=2) + "preemption: " + "[" * 50_000 + "]" * 50_000 + "\n",
            "preemption[0][0]",
            id="50000-levels",
        ),
        pytest.param(
            lambda port: config(port=port, vision=2, speech=2).replace("childCount: 4", "childCount: 1000000000"),
            "cells.topology.cellTypes.A100-NODE.childCount",
            id="childCount-1e9",
        ),
        pytest.param(
            lambda port: config(port=port, vision=2, speech=2) + "preemption:\n  seed: 1\n  seed: 2\n",
            "preemption.seed: the key 'seed' appears twice",
            id="duplicate-key",
        ),
        pytest.param(lambda port: huge_infeasible_topology(port=port, nodes=8_192), "over-committed", id="slow-65536-gpus"),
    ],
)
def test_a_hostile_file_is_refused_naming_the_field_while_the_verbs_answer(served, hostile, field):  # noqa: F811 (the fixture)
    cellfit, mounted, port = served
    before = filter_latencies_until(cellfit, lambda calls: len(calls) >= 30, within=60)
    quotas = cellfit.quotas()

    written = time.monotonic()
    mounted.write(hostile(port))
    calls = filter_latencies_until(cellfit, lambda _: cellfit.reloads("invalid") == 1, within=120)
    refused_after = time.monotonic() - written
    print(f"\n{field}: refused {refused_after:.2f} s after the rewrite; filter before: {summary(before)}; meanwhile: {summary(calls)}")

    (warning,) = [entry for entry in cellfit.logs() if "invalid" in entry["msg"]]
    assert warning["level"] == "warning"
    assert field in warning["reason"], warning["reason"][:500]
    assert len(warning["reason"]) < 1000 and "Traceback" not in Path(cellfit.log_file).read_text()
    assert cellfit.quotas() == quotas  # still the last valid configuration
    assert cellfit.process.poll() is None
