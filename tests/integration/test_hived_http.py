"""The extender with policy hived (a configured topology, so no cluster is needed): placement
through filter, reasons users read, the inspect API, the cell gauges, and check-config's
feasibility proof."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator

import httpx
import msgspec
import pytest

from scheduler.cells import HivedEngine
from scheduler.cli import main
from scheduler.config import parse_settings
from scheduler.constants import (
    ANNOTATION_CELL_TYPE,
    ANNOTATION_GANG,
    ANNOTATION_GANG_SIZE,
    LABEL_VIRTUAL_CLUSTER,
    RESOURCE_NVIDIA_GPU,
)
from scheduler.extender.runtime import build_runtime
from scheduler.kube import translate, wire
from tests.support import kube_objects as k
from tests.support.hived import CONFIG, NODES
from tests.support.observe import records_about, requests_total, scraped
from tests.support.server import running_server
from scheduler.kube.names import filter_offered


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    runtime = build_runtime(parse_settings(CONFIG), standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as http:
        yield http


def filter_pod(client: httpx.Client, pod: dict) -> dict:
    response = client.post("/v1/extender/filter", content=k.dumps(k.extender_args(pod, NODES, node_cache_capable=True)))
    assert response.status_code == 200
    return response.json()


def test_filter_returns_the_one_node_hived_placed_the_pod_on(client):
    result = filter_pod(client, k.pod("train-0", gpus=4, labels={"cellfit.io/virtual-cluster": "vision"}))
    assert len(result["NodeNames"]) == 1 and result["NodeNames"][0].startswith("gpu-")
    # The other nodes' reasons are not sent: kube-scheduler would drop them, a node being left.
    assert result["FailedNodes"] == {} and result["FailedAndUnresolvableNodes"] == {}
    scores = client.post("/v1/extender/prioritize", content=k.dumps(k.extender_args(
        k.pod("train-0", gpus=4, labels={"cellfit.io/virtual-cluster": "vision"}), NODES, node_cache_capable=True))).json()
    assert max(scores, key=lambda s: s["Score"])["Host"] == result["NodeNames"][0]


@pytest.mark.parametrize(
    ("labels", "annotations", "gpus", "fragment"),
    [
        ({"cellfit.io/virtual-cluster": "nobody"}, {}, 2, "nobody"),
        ({"cellfit.io/virtual-cluster": "speech"}, {}, 8, "speech"),
        ({"cellfit.io/virtual-cluster": "vision", "cellfit.io/priority": "sometimes"}, {}, 1, "cellfit.io/priority"),
        ({"cellfit.io/virtual-cluster": "vision"}, {"cellfit.io/cell-type": "H100-NODE"}, 1, "H100-NODE"),
        ({"cellfit.io/virtual-cluster": "vision"}, {}, 64, "64"),
    ],
)
def test_unplaceable_pods_get_a_reason_on_every_node(client, labels, annotations, gpus, fragment):
    result = filter_pod(client, k.pod("train-0", gpus=gpus, labels=labels, annotations=annotations))
    assert result["NodeNames"] == [] and result["Error"] == ""
    reasons = {**result["FailedNodes"], **result["FailedAndUnresolvableNodes"]}
    assert set(reasons) == {"gpu-a", "gpu-b", "gpu-c", "cpu-only"}
    assert any(fragment in reason for reason in reasons.values()), reasons
    assert all("\n" not in reason for reason in reasons.values())


def engine_verdicts(pod: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """FailedNodes and FailedAndUnresolvableNodes as the engine itself decides them for ``pod``
    on NODES, on a fresh engine of the same cells: the verb must hand both on unchanged."""
    engine = HivedEngine.from_config(parse_settings(CONFIG).cells)
    info = translate.pod_info(msgspec.convert(pod, wire.Pod), gpu_resource=RESOURCE_NVIDIA_GPU)
    decision = filter_offered(engine, info, [node["metadata"]["name"] for node in NODES])
    assert not decision.feasible
    return decision.failed, decision.unresolvable


def engine_state(client: httpx.Client) -> tuple[Any, Any]:
    return client.get("/v1/inspect/virtual-clusters").json(), client.get("/v1/inspect/cells").json()


def gang(size: int) -> dict[str, str]:
    """A gang member's annotations (the gang is the pod's Job, named after the pod)."""
    return {ANNOTATION_GANG: "true", ANNOTATION_GANG_SIZE: str(size)}


@pytest.mark.parametrize(
    ("refused", "fragment", "valid"),
    [
        pytest.param(
            # speech owns A100-PAIR cells only; A100-NODE is a known type, just not speech's.
            k.pod("pinned-0", gpus=2, labels={LABEL_VIRTUAL_CLUSTER: "speech"}, annotations={ANNOTATION_CELL_TYPE: "A100-NODE"}),
            "virtual cluster 'speech' owns no cell of type 'A100-NODE' or larger",
            k.pod("pair-0", gpus=2, labels={LABEL_VIRTUAL_CLUSTER: "speech"}),
            id="cell-type-the-vc-does-not-own",
        ),
        pytest.param(
            # vision owns two 8-GPU nodes: a gang of three 8-GPU pods can never run there.
            k.pod("big-0", gpus=8, labels={LABEL_VIRTUAL_CLUSTER: "vision"}, annotations=gang(3)),
            "gang ml/big needs 3 pods x 8 GPUs but virtual cluster 'vision' can hold at most 2 such pods",
            # the whole VC as a gang: it fits only if the refused gang booked nothing
            k.pod("whole-0", gpus=8, labels={LABEL_VIRTUAL_CLUSTER: "vision"}, annotations=gang(2)),
            id="gang-larger-than-the-vc",
        ),
    ],
)
def test_requests_the_vc_can_never_hold_get_the_engines_reason_and_change_nothing(client, refused, fragment, valid):
    before = engine_state(client)
    result = filter_pod(client, refused)
    assert result["NodeNames"] == [] and result["Error"] == ""
    # Preemption cannot help or can: whichever the engine says, the answer says the same.
    failed, unresolvable = engine_verdicts(refused)
    assert (result["FailedNodes"], result["FailedAndUnresolvableNodes"]) == (failed, unresolvable)
    reasons = {**result["FailedNodes"], **result["FailedAndUnresolvableNodes"]}
    assert set(reasons) == {"gpu-a", "gpu-b", "gpu-c", "cpu-only"}
    assert all(fragment in reasons[node] for node in ("gpu-a", "gpu-b", "gpu-c")), reasons
    assert all("\n" not in reason for reason in reasons.values())
    # Nothing booked, nothing bound: the inspect API reads as before, and the VC's own valid
    # request is still placed.
    assert engine_state(client) == before
    placed = filter_pod(client, valid)
    assert len(placed["NodeNames"]) == 1 and placed["NodeNames"][0].startswith("gpu-"), placed


def test_an_unknown_vc_is_answered_counted_and_logged(client, caplog):
    caplog.set_level(logging.INFO)
    result = filter_pod(client, k.pod("typo-0", gpus=2, labels={LABEL_VIRTUAL_CLUSTER: "nobody"}))
    assert "unknown virtual cluster 'nobody'" in result["FailedAndUnresolvableNodes"]["gpu-a"]
    # A decision, not a failure of the verb: counted ok, its verdicts counted per node.
    assert requests_total(client, "filter") == {"ok": 1, "rejected": 0, "error": 0}
    assert scraped(client, "cellfit_filter_node_verdicts_total", verdict="unresolvable") == len(NODES)
    # No preemption can help: a WARNING saying why, as the pod's FailedScheduling event does.
    [record] = records_about(caplog.records, "filter", level=logging.WARNING)
    assert record.getMessage() == "no node fits" and record.pod == "ml/typo-0"
    assert "unknown virtual cluster 'nobody'" in record.reason
    assert sum(record.reasons.values()) == len(NODES)  # the CPU-only node has its own reason


def test_cpu_only_pods_pass_every_node(client):
    result = filter_pod(client, k.pod("prep-0"))
    assert result["NodeNames"] == ["gpu-a", "gpu-b", "gpu-c", "cpu-only"]


def test_inspect_api(client):
    vcs = {vc["name"]: vc for vc in client.get("/v1/inspect/virtual-clusters").json()["virtualClusters"]}
    assert set(vcs) == {"vision", "speech"}
    assert vcs["vision"]["cells"] == [{"cellType": "A100-NODE", "gpusPerCell": 8, "quota": 2, "bound": 0, "draining": 0, "pinned": 0}]
    one = client.get("/v1/inspect/virtual-clusters/speech")
    assert one.status_code == 200 and one.json()["cells"][0]["cellType"] == "A100-PAIR"
    missing = client.get("/v1/inspect/virtual-clusters/nobody")
    assert missing.status_code == 404 and "nobody" in missing.json()["detail"]
    cells = client.get("/v1/inspect/cells").json()["cells"]
    assert [cell["id"] for cell in cells] == ["gpu-a", "gpu-b", "gpu-c"]
    assert all(cell["state"] == "free" and cell["gpus"]["idle"] == 8 for cell in cells)
    assert [cell["id"] for cell in client.get("/v1/inspect/cells", params={"node": "gpu-a"}).json()["cells"]] == ["gpu-a"]
    engine = client.get("/v1/inspect/engine").json()
    assert engine["policy"] == "hived" and engine["stats"]["gpus"] == 24


def test_cell_gauges(client):
    text = client.get("/metrics").text
    assert 'cellfit_vc_cells{cell_type="A100-NODE",state="free",vc="vision"} 2.0' in text
    assert 'cellfit_vc_cells{cell_type="A100-PAIR",state="free",vc="speech"} 2.0' in text
    assert 'cellfit_physical_cells{cell_type="A100-NODE",state="used",vc' not in text
    assert 'cellfit_fragmentation_ratio{node_type="all"} 0.0' in text


def test_resource_fit_has_no_cells_to_inspect():
    runtime = build_runtime(parse_settings("policy: {name: resource-fit}"), standalone=True)
    with running_server(runtime.app) as url:
        response = httpx.get(f"{url}/v1/inspect/virtual-clusters")
        assert response.status_code == 404 and "resource-fit" in response.json()["detail"]
        assert httpx.get(f"{url}/v1/inspect/engine").json()["policy"] == "resource-fit"


def test_auto_policy_is_resource_fit_standalone_without_topology_and_hived_with_one():
    assert parse_settings("").resolved_policy(connected=False) == "resource-fit"
    assert parse_settings("").resolved_policy(connected=True) == "hived"
    assert parse_settings(CONFIG).resolved_policy(connected=False) == "hived"


def test_hived_standalone_without_topology_is_a_clear_startup_error(capsys):
    from scheduler.errors import ConfigError

    with pytest.raises(ConfigError, match="policy.name: hived needs cells.topology"):
        build_runtime(parse_settings("policy: {name: hived}"), standalone=True)


def test_check_config_proves_feasibility_or_names_the_level(tmp_path: Path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text(CONFIG)
    assert main(["check-config", str(good)]) == 0
    assert "valid" in capsys.readouterr().out
    bad = tmp_path / "over.yaml"
    bad.write_text(CONFIG.replace("- {cellType: A100-NODE, count: 2}", "- {cellType: A100-NODE, count: 3}"))
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cells.virtualClusters" in err and "over-committed" in err and "A100-NODE" in err
    typo = tmp_path / "typo.yaml"
    typo.write_text(CONFIG.replace("childCount: 4", "childCuont: 4"))
    assert main(["check-config", str(typo)]) == 2
    assert "childCuont" in capsys.readouterr().err
