"""kube-scheduler throughput with and without the cellfit extender, on ~1,000 fake GPU nodes.

Not a pytest module (pytest collects test_*.py only). Run it against the local control plane:

    python e2e/bench_throughput.py                      # starts its own cluster, stops it after
    python e2e/bench_throughput.py --nodes 1000 --pods 1000 --rounds 2 --keep

Both schedulers run here as processes, one at a time, against the same nodes, with the same
client rate limits (qps 200, burst 400) and the chart's ServiceAccount token:

* plain: kube-scheduler, one profile, no extender (its own DefaultBinder);
* extender: the chart's kube-scheduler configuration (filter, prioritize, preempt, bind through
  cellfit, nodeCacheCapable) and ``cellfit serve`` with the chart's cellfit configuration
  (policy auto: HiveD cells discovered from the Nodes).

One round per scheduler: ``--pods`` pending pods (1 GPU each, pinned to the benchmark nodes)
are created while no scheduler of their profile runs; then the scheduler starts, and a watch
timestamps each pod's binding. Throughput = (pods - 1) / (last binding - first binding): the
scheduler's steady rate, without its start-up. The pods are deleted between rounds, so every
round sees the same empty nodes. Rounds alternate (plain, extender, plain, extender...) so that
a noisy neighbour on a shared machine hits both. The ratio extender/plain is printed (target >= 0.85).

Environment: CELLFIT_E2E_WORKDIR (default /tmp/cellfit-bench) and CELLFIT_E2E_CLUSTER
(default cellfit-bench): an existing cluster there (cluster.env, apiserver answering) is reused,
else e2e/cluster/build.sh and up.sh start one (and down.sh stops it unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from chart_support import (  # noqa: E402
    KWOK_TOLERATION,
    Cluster,
    KubeSchedulerProcess,
    chart_scheduler,
    ensure_release,
    wait_for,
)

BENCH_LABEL = "cellfit.io/e2e-bench"


def parse_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("export "):
            words = shlex.split(line[len("export "):])
            if len(words) == 1 and "=" in words[0]:
                key, value = words[0].split("=", 1)
                env[key] = value
    return env


def start_cluster(workdir: Path) -> tuple[dict[str, str], bool]:
    """(cluster.env, started_here)"""
    env_file = workdir / "cluster.env"
    if env_file.is_file():
        env = parse_env_file(env_file)
        cluster = Cluster(env)
        if cluster.kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0:
            print(f"reusing the cluster in {workdir}")
            return env, False
    environ = {**os.environ, "CELLFIT_E2E_WORKDIR": str(workdir)}
    environ.setdefault("CELLFIT_E2E_CLUSTER", "cellfit-bench")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "bench-harness.log"
    for script in ("build.sh", "up.sh"):
        print(f"e2e/cluster/{script} ...", flush=True)
        with log.open("a") as out:
            proc = subprocess.run([str(HERE / "cluster" / script)], env=environ, stdout=out, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            sys.exit(f"e2e/cluster/{script} failed; see {log}")
    return parse_env_file(env_file), True


def stop_cluster(workdir: Path) -> None:
    environ = {**os.environ, "CELLFIT_E2E_WORKDIR": str(workdir)}
    environ.setdefault("CELLFIT_E2E_CLUSTER", "cellfit-bench")
    subprocess.run([str(HERE / "cluster" / "down.sh")], env=environ, capture_output=True)


class BindWatch:
    """Timestamps the first time each pod of a namespace shows a nodeName (one raw watch
    stream, JSON lines, so the observer costs the shared CPUs little)."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        from kubernetes import client, config

        self.core = client.CoreV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
        self.namespace = namespace
        self.bound: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            listing: Any = self.core.list_namespaced_pod(self.namespace, _preload_content=False)
            data = json.loads(listing.data)
            for pod in data["items"]:
                if pod["spec"].get("nodeName"):
                    self.bound.setdefault(pod["metadata"]["uid"], time.monotonic())
            response: Any = self.core.list_namespaced_pod(
                self.namespace, watch=True, resource_version=data["metadata"]["resourceVersion"],
                timeout_seconds=600, _preload_content=False,
            )
            self._ready.set()
            pending = b""
            for chunk in response.stream(amt=65536):
                if self._stop.is_set():
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                now = time.monotonic()
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    pod = event.get("object", {})
                    if event.get("type") in ("ADDED", "MODIFIED") and pod.get("spec", {}).get("nodeName"):
                        self.bound.setdefault(pod["metadata"]["uid"], now)
            response.release_conn()

    def stop(self) -> None:
        self._stop.set()


def pending_pods(count: int, scheduler_name: str, prefix: str) -> dict[str, Any]:
    items = []
    for i in range(count):
        items.append({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{prefix}-{i}", "labels": {"bench": prefix}},
            "spec": {
                "schedulerName": scheduler_name,
                "priorityClassName": "cellfit-best-effort",
                "nodeSelector": {BENCH_LABEL: "true"},
                "tolerations": [KWOK_TOLERATION],
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "trainer:fake",
                                "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "100m", "memory": "128Mi"}}}],
            },
        })
    return {"apiVersion": "v1", "kind": "List", "items": items}


def create_pods(cluster: Cluster, namespace: str, count: int, scheduler_name: str, prefix: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(pending_pods(count, scheduler_name, prefix), fh)
    try:
        cluster.kubectl("-n", namespace, "create", "-f", fh.name, timeout=600)
    finally:
        os.unlink(fh.name)


def delete_pods(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("-n", namespace, "delete", "pods", "--all", "--wait=false", timeout=300)
    wait_for(lambda: not cluster.kubectl_json("-n", namespace, "get", "pods")["items"], 300, "benchmark pods deleted", interval=2)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cellfit_verb_times(url: str) -> dict[str, tuple[int, float]]:
    """verb -> (requests, mean seconds) from cellfit's request-duration histogram."""
    import httpx

    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        for suffix, target in (("_sum", sums), ("_count", counts)):
            prefix = f"cellfit_extender_request_duration_seconds{suffix}{{"
            if line.startswith(prefix):
                verb = line.split('verb="', 1)[1].split('"', 1)[0]
                value = float(line.rsplit(" ", 1)[1])
                target[verb] = int(value) if suffix == "_count" else value  # type: ignore[assignment]
    return {verb: (counts[verb], sums[verb] / counts[verb]) for verb in counts if counts[verb]}


def measure(cluster: Cluster, namespace: str, count: int, scheduler_name: str, prefix: str, start: Any, stop: Any,
            timeout: float, processes: Any) -> dict[str, Any]:
    """``processes()`` -> {name: pid} of the processes whose CPU time to report."""
    create_pods(cluster, namespace, count, scheduler_name, prefix)
    watch = BindWatch(cluster, namespace)
    watch.start()
    started = time.monotonic()
    start()
    cpu_before = {name: cpu_seconds(pid) for name, pid in processes().items()}
    extra: dict[str, Any] = {}
    try:
        wait_for(lambda: len(watch.bound) >= count, timeout, f"{count} pods bound by {scheduler_name}", interval=0.5)
        extra["cpu_s"] = {name: round(cpu_seconds(pid) - cpu_before.get(name, 0.0), 2) for name, pid in processes().items()}
        url = processes.__dict__.get("cellfit_url") if hasattr(processes, "__dict__") else None
        if url:
            extra["cellfit_verbs"] = {verb: {"requests": n, "mean_ms": round(mean * 1000, 3)}
                                      for verb, (n, mean) in cellfit_verb_times(url()).items()}
    finally:
        stop()
        watch.stop()
    times = sorted(watch.bound.values())
    span = times[-1] - times[0]
    return {
        "pods": count,
        "first_bind_s": times[0] - started,
        "span_s": span,
        "pods_per_s": (count - 1) / span if span > 0 else float("inf"),
        "end_to_end_pods_per_s": count / (times[-1] - started),
        **extra,
    }


def run_plain(cluster: Cluster, env: dict[str, str], namespace: str, args: argparse.Namespace, config: dict[str, Any],
              kubeconfig: Path, work: Path, round_no: int) -> dict[str, Any]:
    plain = KubeSchedulerProcess(env["CELLFIT_E2E_KUBE_SCHEDULER"], config, kubeconfig, work, name=f"plain-{round_no}", verbosity=1)
    return measure(cluster, namespace, args.pods, "bench-plain", f"plain{round_no}", plain.start, plain.stop, args.timeout,
                   lambda: {"kube-scheduler": plain.process.pid if plain.process else None})


def run_extender(cluster: Cluster, release: Any, namespace: str, args: argparse.Namespace, work: Path,
                 round_no: int, bind: bool = True) -> dict[str, Any]:
    holder: dict[str, Any] = {}

    def no_bind(config: dict[str, Any]) -> None:
        config["extenders"][0].pop("bindVerb")

    def start() -> None:
        # chart_scheduler starts cellfit, waits until it is ready, then starts kube-scheduler:
        # all of that lies before the first binding, outside the measured span.
        label = f"extender-{round_no}" if bind else f"extender-nobind-{round_no}"
        context = chart_scheduler(cluster, release, work / label, name=label, edit_scheduler_config=None if bind else no_bind)
        holder["context"] = context
        holder["procs"] = context.__enter__()

    def stop() -> None:
        context = holder.pop("context", None)
        if context is not None:
            context.__exit__(None, None, None)

    def processes() -> dict[str, int | None]:
        procs = holder.get("procs")
        if procs is None:
            return {}
        return {"kube-scheduler": procs.scheduler.process.pid if procs.scheduler.process else None,
                "cellfit": procs.cellfit.process.pid if procs.cellfit.process else None}

    processes.cellfit_url = lambda: holder["procs"].cellfit.url  # type: ignore[attr-defined]
    return measure(cluster, namespace, args.pods, release.scheduler_name, f"ext{round_no}", start, stop, args.timeout,
                   processes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000, help="pods per round")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per scheduler (alternating)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed for one round")
    parser.add_argument("--schedulers", default="plain,extender",
                        help="which to measure, comma-separated: plain, extender, and extender-nobind (the chart's "
                             "configuration without bindVerb: kube-scheduler binds, cellfit only filters; a diagnostic)")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)

    workdir = Path(os.environ.get("CELLFIT_E2E_WORKDIR", "/tmp/cellfit-bench"))
    env, started_here = start_cluster(workdir)
    cluster = Cluster(env)
    results: dict[str, list[dict[str, Any]]] = {"plain": [], "extender": [], "extender-nobind": []}
    try:
        t0 = time.monotonic()
        if _ready_nodes(cluster) < args.nodes:  # a kept cluster already has them
            cluster.add_gpu_nodes(args.nodes, "bench-gpu", labels={BENCH_LABEL: "true"}, rack="bench", wait=False, timeout=900)
        wait_for(lambda: _ready_nodes(cluster) >= args.nodes, 600, f"{args.nodes} benchmark nodes Ready", interval=3)
        print(f"{args.nodes} nodes Ready in {time.monotonic() - t0:.0f}s", flush=True)
        release = ensure_release(cluster)
        namespace = "bench"
        cluster.kubectl("create", "namespace", namespace, check=False)
        wait_for(lambda: cluster.kubectl("-n", namespace, "get", "serviceaccount", "default", check=False).returncode == 0,
                 60, "namespace bench ready")
        work = workdir / "bench"
        work.mkdir(parents=True, exist_ok=True)
        token = cluster.token_kubeconfig(release.service_account, release.namespace, work / "plain.kubeconfig")
        plain_config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": "bench-plain"}],
        }
        which = [w for w in args.schedulers.split(",") if w]
        for round_no in range(args.rounds):
            for kind in which:
                if kind == "plain":
                    result = run_plain(cluster, env, namespace, args, plain_config, token, work, round_no)
                elif kind in ("extender", "extender-nobind"):
                    result = run_extender(cluster, release, namespace, args, work, round_no, bind=kind == "extender")
                else:
                    parser.error(f"unknown scheduler {kind!r}")
                results[kind].append(result)
                print(f"round {round_no + 1} {kind + ':':9} {result['pods_per_s']:7.1f} pods/s  ({_fmt(result)})", flush=True)
                delete_pods(cluster, namespace)
    finally:
        if started_here and not args.keep:
            stop_cluster(workdir)

    if not results["plain"] or not results["extender"]:
        return 0
    plain_rate = statistics.median(r["pods_per_s"] for r in results["plain"])
    ext_rate = statistics.median(r["pods_per_s"] for r in results["extender"])
    ratio = ext_rate / plain_rate
    print()
    print(f"nodes {args.nodes}, pods per round {args.pods}, rounds {args.rounds} (median)")
    print(f"  kube-scheduler alone:          {plain_rate:7.1f} pods/s")
    print(f"  kube-scheduler + cellfit:      {ext_rate:7.1f} pods/s")
    print(f"  ratio:                         {ratio:7.2f}  (target >= 0.85: {'met' if ratio >= 0.85 else 'NOT met'})")
    if results["extender-nobind"]:
        nobind = statistics.median(r["pods_per_s"] for r in results["extender-nobind"])
        print(f"  diagnostic, without bindVerb:  {nobind:7.1f} pods/s, ratio {nobind / plain_rate:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"nodes": args.nodes, "results": results, "ratio": ratio}, indent=2))
    return 0


def _ready_nodes(cluster: Cluster) -> int:
    out = cluster.kubectl("get", "nodes", "-l", f"{BENCH_LABEL}=true", "-o",
                          "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}", timeout=120).stdout
    return sum(1 for line in out.splitlines() if line.strip() == "True")


def _fmt(result: dict[str, float]) -> str:
    text = (f"{result['pods']:.0f} pods bound over {result['span_s']:.1f}s; first binding {result['first_bind_s']:.1f}s "
            f"after start; end to end {result['end_to_end_pods_per_s']:.1f} pods/s; CPU s {result.get('cpu_s')}")
    if result.get("cellfit_verbs"):
        text += f"; cellfit verbs {result['cellfit_verbs']}"
    return text


if __name__ == "__main__":
    sys.exit(main())
