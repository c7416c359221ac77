"""Sharing safety end to end (HiveD §3): a tenant's sequence of pod requests gets exactly the
same answers in the shared cluster as in its own private cluster (a cluster made of just its VC
cells), whatever the other tenants do meanwhile. This is Theorem 1 lifted from cells to pods:
every VC cell the engine needs to bind is a legal request, so it always succeeds, and the
placement inside a VC ignores everything outside it. The invariant of Theorem 1 is checked on
the shared engine after every step."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cells import HivedEngine
from tests.cells.helpers import V100_TYPES, pod, schedule

RACKS, NODES_PER_RACK = 3, 2


def shared_config(owners: list[list[str | None]], rack_owner: list[str | None]) -> dict[str, Any]:
    types = {**V100_TYPES, "V100-RACK": {"childType": "V100-NODE", "childCount": NODES_PER_RACK}}
    physical = [
        {"cellType": "V100-RACK", "cellChildren": [{"nodeName": f"r{r}n{n}"} for n in range(NODES_PER_RACK)]}
        for r in range(RACKS)
    ]
    quotas: dict[str, dict[str, int]] = {}
    for r in range(RACKS):
        if rack_owner[r] is not None:
            quotas.setdefault(rack_owner[r], {}).setdefault("V100-RACK", 0)
            quotas[rack_owner[r]]["V100-RACK"] += 1
            continue
        for n in range(NODES_PER_RACK):
            if owners[r][n] is not None:
                quotas.setdefault(owners[r][n], {}).setdefault("V100-NODE", 0)
                quotas[owners[r][n]]["V100-NODE"] += 1
    vcs = {vc: [{"cellType": t, "count": c} for t, c in q.items()] for vc, q in quotas.items()}
    return {"topology": {"cellTypes": types, "physicalCells": physical}, "virtualClusters": vcs}


def private_config(quota: dict[str, int]) -> dict[str, Any]:
    types = {**V100_TYPES, "V100-RACK": {"childType": "V100-NODE", "childCount": NODES_PER_RACK}}
    physical: list[dict[str, Any]] = []
    for i in range(quota.get("V100-RACK", 0)):
        physical.append({"cellType": "V100-RACK", "cellChildren": [{"nodeName": f"pr{i}n{n}"} for n in range(NODES_PER_RACK)]})
    for i in range(quota.get("V100-NODE", 0)):
        physical.append({"cellType": "V100-NODE", "nodeName": f"pn{i}"})
    cells = [{"cellType": t, "count": c} for t, c in quota.items()]
    return {"topology": {"cellTypes": types, "physicalCells": physical}, "virtualClusters": {"t": cells}}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.data())
def test_each_vc_behaves_like_its_private_cluster(data):
    tenants = ["a", "b", "c"]
    owner = st.sampled_from([*tenants, None])
    rack_owner = [data.draw(st.sampled_from([*tenants, None, None])) for _ in range(RACKS)]
    owners = [[data.draw(owner) for _ in range(NODES_PER_RACK)] for _ in range(RACKS)]
    config = shared_config(owners, rack_owner)
    if not config["virtualClusters"]:
        return
    shared = HivedEngine.from_config(config)
    shared_nodes = [f"r{r}n{n}" for r in range(RACKS) for n in range(NODES_PER_RACK)]
    private: dict[str, tuple[HivedEngine, list[str]]] = {}
    for vc, cells in config["virtualClusters"].items():
        pconf = private_config({c["cellType"]: c["count"] for c in cells})
        engine = HivedEngine.from_config(pconf)
        private[vc] = (engine, list(engine.topology.nodes))
    running: dict[str, list[str]] = {vc: [] for vc in private}
    opportunistic: list[str] = []
    counter = 0
    for _ in range(data.draw(st.integers(10, 60))):
        if data.draw(st.integers(0, 3)) == 0:
            # Noise: opportunistic pods of any tenant on idle cells, and some of them finishing.
            counter += 1
            noise = pod(f"o{counter}", data.draw(st.sampled_from([1, 2, 4, 8])), data.draw(st.sampled_from(sorted(private))), priority="opportunistic")
            if schedule(shared, noise, shared_nodes) is not None:
                opportunistic.append(noise.uid)
            if opportunistic and data.draw(st.booleans()):
                shared.delete_pod(opportunistic.pop(0))
            continue
        vc = data.draw(st.sampled_from(sorted(private)))
        engine, nodes = private[vc]
        if running[vc] and data.draw(st.integers(0, 2)) == 0:
            uid = running[vc].pop(data.draw(st.integers(0, len(running[vc]) - 1)))
            shared.delete_pod(uid)
            engine.delete_pod(uid)
        else:
            counter += 1
            gpus = data.draw(st.sampled_from([1, 2, 3, 4, 8]))
            mine = schedule(engine, pod(f"p{counter}", gpus, "t"), nodes)
            theirs = schedule(shared, pod(f"p{counter}", gpus, vc), shared_nodes)
            victims = shared.pending_preemptions().get(f"p{counter}", [])
            if theirs is None and victims:
                assert set(victims) <= set(opportunistic)
                for victim in victims:  # kube-scheduler preempts; the victims terminate
                    shared.delete_pod(victim)
                    opportunistic.remove(victim)
                theirs = schedule(shared, pod(f"p{counter}", gpus, vc), shared_nodes)
            assert (mine is None) == (theirs is None), (vc, gpus)
            if mine is not None:
                running[vc].append(f"p{counter}")
            else:
                shared.delete_pod(f"p{counter}")
                engine.delete_pod(f"p{counter}")
        for chain in shared.topology.used_chains:
            for remaining, free, derived in shared.allocator.invariant(chain):
                assert remaining <= free + derived
