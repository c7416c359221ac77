"""The estimator's speed: 1,000 interchangeable Jobs created at once, to all their sampling pods
created, against the API server's own pod-creation rate measured in the same run.

Not a pytest module. Run it against the local control plane:

    python e2e/bench_estimator.py                       # starts its own cluster, stops it after
    python e2e/bench_estimator.py --jobs 1000 --rounds 3 --keep

Each round, alternating so that a noisy neighbour hits both:

* api: ``2 × jobs`` pods (what the Jobs' sampling asks for first: the long run of each of two
  configurations, whose splits stand for the short runs) created by 16 concurrent clients
  through cellfit's own API client (``KubernetesApi.create_pod``, the estimator's path), with a
  scheduler name nobody serves, so they stay pending: the API server's creation rate here;
* estimator: ``cellfit serve`` with the chart's configuration (estimator on, its share raised to
  1.0 so that the budget does not pace it) watches while ``jobs`` suspended interchangeable Jobs
  are created at once (``kubectl create`` of one List); the time runs from the first Job sent to
  the last sampling pod seen by a watch. No kube-scheduler runs: sampling pods stay pending, so
  only the estimator's work is measured. cellfit's CPU time (utime + stime of its process) over
  the round, divided by the sampling-pod events it handled (each pod's creation and the watch
  event it causes), is the CPU per sampling-pod event.

Printed per round and as medians: wall seconds, pods/s, the ratio estimator/api of the rates,
and cellfit's CPU ms per sampling pod. Uses bench_throughput's cluster handling
(CELLFIT_E2E_WORKDIR, default /tmp/cellfit-bench).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import yaml  # noqa: E402

from bench_throughput import start_cluster, stop_cluster  # noqa: E402
from chart_support import EXTENDER_ONLY_SA, KWOK_TOLERATION, CellfitProcess, Cluster, ensure_release, wait_for  # noqa: E402

CONFIGURATIONS = json.dumps({
    # No GPUs asked, so that the benchmark's few fake GPUs never pace it (the budget counts them).
    "cpu": {"resources": {"cpu": "10m", "memory": "16Mi"}},
    "gpu": {"resources": {"cpu": "10m", "memory": "16Mi"}, "env": {"CUDA": "1"}},
})

# A Job's first sampling pods: the long run of each configuration (estimator.shortAfterLong).
PODS_PER_JOB = 2


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": {"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "1000"}},
        "spec": {"suspend": True, "template": {"spec": {
            "schedulerName": "nobody", "restartPolicy": "Never", "tolerations": [KWOK_TOLERATION],
            "containers": [{"name": "train", "image": "trainer:fake"}],
        }}},
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count_pods(cluster: Cluster, namespace: str, selector: str) -> int:
    out = cluster.kubectl("-n", namespace, "get", "pods", "-l", selector, "-o", "name", check=False, timeout=120).stdout
    return len(out.split())


def fresh_namespace(cluster: Cluster, prefix: str) -> str:
    name = f"{prefix}-{int(time.time() * 1000) % 10**8}"
    cluster.kubectl("create", "namespace", name)
    wait_for(lambda: cluster.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode == 0, 60, "namespace ready")
    return name


def api_round(cluster: Cluster, count: int) -> dict[str, float]:
    from scheduler.cluster.api import KubernetesApi
    from scheduler.config import ClusterSettings

    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(cluster.kubeconfig)))
    assert api is not None
    namespace = fresh_namespace(cluster, "bench-api")
    bodies = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i}", "namespace": namespace, "labels": {"bench": "api"}},
               "spec": {"schedulerName": "nobody", "tolerations": [KWOK_TOLERATION], "containers": [{"name": "c", "image": "x"}]}}
              for i in range(count)]
    start = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda body: api.create_pod(namespace=namespace, pod=body), bodies))
    wall = time.monotonic() - start
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    return {"seconds": wall, "pods_per_second": count / wall}


def estimator_round(cluster: Cluster, cellfit: CellfitProcess, jobs: int, workdir: Path) -> dict[str, float]:
    namespace = fresh_namespace(cluster, "bench-est")
    listing = {"apiVersion": "v1", "kind": "List", "items": [job(f"job-{i}") for i in range(jobs)]}
    manifest = workdir / "jobs.yaml"
    manifest.write_text(yaml.safe_dump(listing))
    assert cellfit.process is not None
    cpu_before = cpu_seconds(cellfit.process.pid)
    start = time.monotonic()
    cluster.kubectl("-n", namespace, "create", "-f", str(manifest), timeout=600)
    created_jobs = time.monotonic() - start
    expected = PODS_PER_JOB * jobs
    wait_for(lambda: count_pods(cluster, namespace, "cellfit.io/sample=true") >= expected, 900, f"{expected} sampling pods", interval=1)
    wall = time.monotonic() - start
    cpu = cpu_seconds(cellfit.process.pid) - cpu_before
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    return {"seconds": wall, "jobs_created_seconds": created_jobs, "pods_per_second": expected / wall,
            "cpu_ms_per_pod": 1000 * cpu / expected}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)

    workdir = Path(os.environ.get("CELLFIT_E2E_WORKDIR", "/tmp/cellfit-bench"))
    env, started_here = start_cluster(workdir)
    cluster = Cluster(env)
    results: dict[str, list[dict[str, float]]] = {"api": [], "estimator": []}
    try:
        release = ensure_release(cluster)
        work = Path(tempfile.mkdtemp(prefix="bench-estimator-"))
        config = yaml.safe_load(release.cellfit_config_text)
        config["estimator"] = {**config.get("estimator", {}), "maxClusterShare": 1.0}
        config["policy"] = {**config.get("policy", {}), "name": "resource-fit"}
        cellfit = CellfitProcess(yaml.safe_dump(config), cluster.token_kubeconfig(EXTENDER_ONLY_SA, release.namespace, work / "cellfit.kubeconfig"),
                                 work, name="bench-estimator-cellfit")
        cellfit.start()
        try:
            for round_index in range(args.rounds):
                api = api_round(cluster, PODS_PER_JOB * args.jobs)
                results["api"].append(api)
                est = estimator_round(cluster, cellfit, args.jobs, work)
                results["estimator"].append(est)
                print(f"round {round_index + 1}: api {api['pods_per_second']:.0f} pods/s ({api['seconds']:.1f} s); "
                      f"estimator {est['pods_per_second']:.0f} pods/s ({est['seconds']:.1f} s from the first Job, "
                      f"Jobs created in {est['jobs_created_seconds']:.1f} s), cellfit CPU {est['cpu_ms_per_pod']:.2f} ms/pod, "
                      f"ratio {est['pods_per_second'] / api['pods_per_second']:.2f}", flush=True)
        finally:
            cellfit.stop()
    finally:
        if started_here and not args.keep:
            stop_cluster(workdir)
    api_rate = statistics.median(r["pods_per_second"] for r in results["api"])
    est_rate = statistics.median(r["pods_per_second"] for r in results["estimator"])
    print(f"\nmedians over {args.rounds} rounds, {args.jobs} Jobs ({PODS_PER_JOB * args.jobs} sampling pods):")
    print(f"  API server, 16 clients:  {api_rate:.0f} pods/s")
    print(f"  estimator:               {est_rate:.0f} pods/s, {statistics.median(r['seconds'] for r in results['estimator']):.1f} s "
          f"from the first Job to the last sampling pod")
    print(f"  ratio estimator/api:     {est_rate / api_rate:.2f}")
    print(f"  cellfit CPU per sampling pod: {statistics.median(r['cpu_ms_per_pod'] for r in results['estimator']):.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
