"""kube-scheduler's throughput with and without the cellfit extender, on fake GPU nodes.

Not a pytest module (pytest collects test_*.py only). Run it against the local control plane:

    python e2e/bench_throughput.py --rounds 5                     # 1,000 nodes, HiveD and resource-fit
    python e2e/bench_throughput.py --nodes 5000 --rounds 3 --keep
    python e2e/bench_throughput.py --policies hived --json out.json

Each round runs, one after another against the same nodes (rounds alternate, so that a noisy
neighbour on a shared machine hits every scheduler):

* ``plain``: kube-scheduler alone, the chart's KubeSchedulerConfiguration without the extender
  (its own DefaultBinder);
* ``hived`` and ``resource-fit``: the chart's configuration (filter, prioritize, preempt and bind
  through cellfit, nodeCacheCapable) and ``cellfit serve`` with the chart's configuration, its
  policy set to HiveD (cells discovered from the Nodes) or resource-fit; ``resource-fit-best``
  (not run by default): resource-fit with ``policy.offerBestNodes: 1``;
* ``control`` (``--control``): kube-scheduler alone, as ``plain``, with ``cellfit serve`` of the
  first policy started and ready beside it, watching the same cluster but never asked. It
  separates what cellfit's presence costs kube-scheduler (its start listing the nodes through the
  same API server, its watch during the burst) from what the extender's calls cost: the first
  binding's extra over ``plain`` is the former, a policy's over ``control`` the latter.

Both kube-schedulers run without leader election (one replica; acquiring a Lease that the
previous round's kube-scheduler still holds would wait out its 15 s) and with the same client
rate limits (qps 200, burst 400) and the chart's ServiceAccount token.

A round: ``--pods`` pending pods (1 GPU each, pinned to the benchmark nodes) are created while
no scheduler of their profile runs; cellfit starts and becomes ready (its start-up is reported
apart: ``cellfit_ready_s``); then the burst starts: kube-scheduler's process starts, and a watch
timestamps each pod's binding. Reported per round:

* ``first_bind_s``: kube-scheduler's start to the first binding (its own start-up included,
  the same for every scheduler);
* ``pods_per_s``: (pods - 1) / (last binding - first binding), the steady rate; and
  ``end_to_end_pods_per_s``: pods / (last binding - kube-scheduler's start);
* ``bind_p50_ms``, ``bind_p99_ms``: cellfit's bind verb, body read to answer, from its
  request-duration histogram (interpolated within its buckets, as Prometheus'
  ``histogram_quantile`` does; the buckets double from 100 µs);
* CPU per scheduled pod (milliseconds), from /proc, over the burst: ``kube-scheduler``,
  ``cellfit`` (the whole process and its children: the AlloX solver process), the API server and etcd; and cellfit's by component, from its
  own counters (``cellfit_extender_cpu_seconds_total``, ``cellfit_thread_cpu_seconds_total``):
  filter, prioritize, preempt, bind (the verb's steps on the event loop, its API request
  written included), watch (the reflector threads: decoding events and applying them), http
  (the rest of the event loop's thread: serving HTTP, reading the API's answers to bindings),
  controllers (the other threads: estimator, AlloX admission, leader election, nudge), other
  (what no live thread accounts for);
* ``kube_scheduler_attempts``: kube-scheduler's attempts by result, and the mean of its
  scheduling cycle and of the algorithm in it (its filters and scorers and the extender's calls):
  it schedules one pod at a time, so the algorithm's mean bounds the rate (``--pprof DIR`` also
  keeps its CPU profile of the burst);
* the API server's own latency for POST pods/binding over the round (its
  ``apiserver_request_duration_seconds``), for every scheduler, and how long cellfit's binds
  waited for it (``cellfit_bind_api_wait_seconds``): the bind verb's latency is mostly that.

The pods are deleted between rounds, so every round sees the same empty nodes. The medians over
rounds are printed with each policy's ratios to kube-scheduler alone, against the targets.

Environment: CELLFIT_E2E_WORKDIR (default /tmp/cellfit-bench) and CELLFIT_E2E_CLUSTER
(default cellfit-bench): an existing cluster there (cluster.env, apiserver answering) is reused,
else e2e/cluster/build.sh and up.sh start one (and down.sh stops it unless --keep). Nodes
already there (a kept cluster) are reused; more are added up to ``--nodes``.
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

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from chart_support import (  # noqa: E402
    EXTENDER_ONLY_SA,
    KWOK_TOLERATION,
    CellfitProcess,
    Cluster,
    KubeSchedulerProcess,
    Release,
    ensure_release,
    local_scheduler_config,
    wait_for,
)

BENCH_LABEL = "cellfit.io/e2e-bench"
# cellfit's configurations measured: its policy section, and the letter its pods' names carry.
POLICIES: dict[str, tuple[dict[str, Any], str]] = {
    "hived": ({"name": "hived"}, "h"),
    "resource-fit": ({"name": "resource-fit"}, "r"),
    # Resource fit passing on only its best-scored node: kube-scheduler skips scoring and prioritize.
    "resource-fit-best": ({"name": "resource-fit", "offerBestNodes": 1}, "b"),
}
# The targets, as ratios measured in the same run.
TARGET_RATE_RATIO = 0.9
TARGET_FIRST_BIND_EXTRA_S = 0.5
TARGET_BIND_P99_MS = 50.0
TARGET_CPU_RATIO = 0.3
# kube-scheduler's paths the benchmark reads without RBAC for them (its attempts, its CPU profile).
SCHEDULER_OPEN_PATHS = ("/healthz", "/readyz", "/livez", "/metrics", "/debug/pprof/profile")
COMPONENTS = ("filter", "prioritize", "preempt", "bind", "http", "watch", "controllers", "other")


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


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (its state first); None when the
    process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = stat_fields(pid) if pid is not None else None
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants_cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process's children so far: the live ones' and their own
    children's (cellfit's AlloX solver process), and the ones it has reaped (Linux /proc)."""
    if pid is None:
        return 0.0
    children: dict[int, list[int]] = {}
    times: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or (fields := stat_fields(int(entry.name))) is None:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        times[int(entry.name)] = (int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]))
    ticks = times.get(pid, (0, 0))[1]  # reaped children's
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        ticks += sum(times.get(child, (0, 0)))
        todo.extend(children.get(child, ()))
    return ticks / os.sysconf("SC_CLK_TCK")


def control_plane_pids(workdir: Path) -> dict[str, int]:
    """The API server's and etcd's process ids of this cluster (their command lines name files
    under its work dir; other clusters may run on the same machine)."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        program = os.path.basename(argv[0].decode(errors="replace"))
        if program in ("kube-apiserver", "etcd") and str(workdir).encode() in b" ".join(argv):
            found[program] = int(entry.name)
    return found


def metric_lines(text: str) -> Any:
    """(name, labels, value) of each sample in a Prometheus text exposition."""
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name_labels, value_text = line.rsplit(" ", 1)
        name, _, labels = name_labels.partition("{")
        label = dict(part.split("=", 1) for part in labels.rstrip("}").replace('"', "").split(",") if "=" in part)
        yield name, label, float(value_text)


def scrape(url: str) -> dict[str, Any]:
    """cellfit's CPU counters (by verb and by thread) and its bind histograms, from /metrics."""
    import httpx

    verbs: dict[str, float] = {}
    threads: dict[str, float] = {}
    bind: list[tuple[float, float]] = []
    api_wait: list[tuple[float, float]] = []
    verb_sum: dict[str, float] = {}
    verb_count: dict[str, float] = {}
    for name, label, value in metric_lines(httpx.get(f"{url}/metrics", timeout=10).text):
        if name == "cellfit_extender_cpu_seconds_total":
            verbs[label["verb"]] = value
        elif name == "cellfit_thread_cpu_seconds_total":
            threads[label["thread"]] = value
        elif name == "cellfit_extender_request_duration_seconds_bucket" and label.get("verb") == "bind":
            bind.append((float(label["le"]), value))
        elif name == "cellfit_bind_api_wait_seconds_bucket":
            api_wait.append((float(label["le"]), value))
        elif name == "cellfit_extender_request_duration_seconds_sum":
            verb_sum[label["verb"]] = value
        elif name == "cellfit_extender_request_duration_seconds_count":
            verb_count[label["verb"]] = value
    mean_ms = {verb: 1000 * verb_sum[verb] / count for verb, count in verb_count.items() if count}
    return {"verbs": verbs, "threads": threads, "bind_buckets": sorted(bind), "api_wait_buckets": sorted(api_wait),
            "mean_ms": mean_ms}


def scheduler_attempts(scheduler: KubeSchedulerProcess, token: str) -> dict[str, float]:
    """kube-scheduler's scheduling attempts by result (``scheduler_schedule_attempts_total``:
    more than pods are retries, each a whole cycle of its CPU), and the mean of its scheduling
    cycle (``attempt_ms``) and of the algorithm within it (``algorithm_ms``: its filters and
    scorers and the extender's filter and prioritize, round trips included). kube-scheduler runs
    one cycle at a time, so the cycle's mean bounds the rate: 1,000 / attempt_ms pods/s."""
    import httpx

    text = httpx.get(f"https://127.0.0.1:{scheduler.secure_port}/metrics", verify=False,
                     headers={"Authorization": f"Bearer {token}"}, timeout=10).text
    found: dict[str, float] = {}
    for name, label, value in metric_lines(text):
        if name == "scheduler_schedule_attempts_total":
            found[label["result"]] = found.get(label["result"], 0.0) + value
        elif name in ("scheduler_scheduling_attempt_duration_seconds_sum", "scheduler_scheduling_attempt_duration_seconds_count",
                      "scheduler_scheduling_algorithm_duration_seconds_sum", "scheduler_scheduling_algorithm_duration_seconds_count"):
            found[name] = found.get(name, 0.0) + value
    attempts = {kind: found[kind] for kind in ("scheduled", "unschedulable", "error") if kind in found}
    for key, metric in (("attempt_ms", "scheduler_scheduling_attempt_duration_seconds"),
                        ("algorithm_ms", "scheduler_scheduling_algorithm_duration_seconds")):
        count = found.get(f"{metric}_count")
        if count:
            attempts[key] = 1000 * found[f"{metric}_sum"] / count
    return attempts


def components(before: dict[str, Any], after: dict[str, Any], process_seconds: float) -> dict[str, float]:
    """cellfit's CPU seconds over a round by component: the verbs' own steps; the rest of the
    event loop's thread (HTTP serving, reading the API's answers to bindings, timers); the watch
    threads; the controllers' threads; and what no live thread accounts for."""
    def delta(kind: str, key: str) -> float:
        return after[kind].get(key, 0.0) - before[kind].get(key, 0.0)

    parts = {verb: delta("verbs", verb) for verb in ("filter", "prioritize", "preempt", "bind")}
    parts["http"] = delta("threads", "MainThread") - sum(parts.values())
    parts["watch"] = sum(delta("threads", name) for name in after["threads"] if name.startswith("reflector-"))
    parts["controllers"] = sum(delta("threads", name) for name in after["threads"]
                               if name != "MainThread" and not name.startswith("reflector-"))
    parts["other"] = process_seconds - sum(parts.values())
    return parts


def apiserver_bindings(cluster: Cluster) -> list[tuple[float, float]]:
    """The API server's own latency histogram for POST pods/binding (cumulative buckets)."""
    text = cluster.kubectl("get", "--raw", "/metrics", timeout=60).stdout
    return sorted(
        (float(label["le"]), value) for name, label, value in metric_lines(text)
        if name == "apiserver_request_duration_seconds_bucket" and label.get("subresource") == "binding"
        and label.get("verb") == "POST"
    )


def bucket_delta(after: list[tuple[float, float]], before: list[tuple[float, float]]) -> list[tuple[float, float]]:
    earlier = dict(before)
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in after]


def histogram_quantile(quantile: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (upper bound, count) buckets."""
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = quantile * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = upper, count
    return lower


class Bench:
    def __init__(self, cluster: Cluster, release: Release, workdir: Path, args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.release = release
        self.workdir = workdir
        self.work = workdir / "bench"
        self.work.mkdir(parents=True, exist_ok=True)
        self.args = args
        self.namespace = "bench"
        self.scheduler_kubeconfig = cluster.token_kubeconfig(release.service_account, release.namespace, self.work / "scheduler.kubeconfig")
        self.cellfit_kubeconfig = cluster.token_kubeconfig(EXTENDER_ONLY_SA, release.namespace, self.work / "cellfit.kubeconfig")
        self.scheduler_token = str(yaml.safe_load(self.scheduler_kubeconfig.read_text())["users"][0]["user"]["token"])

    def profile(self, scheduler: KubeSchedulerProcess, label: str) -> threading.Thread:
        """kube-scheduler's CPU profile over the burst's first ``--pprof-seconds``, written to
        ``--pprof``/<label>.pprof (read it with ``go tool pprof -top``)."""
        import httpx

        def run() -> None:
            try:
                scheduler.wait_healthy()
                response = httpx.get(f"https://127.0.0.1:{scheduler.secure_port}/debug/pprof/profile",
                                     params={"seconds": self.args.pprof_seconds}, verify=False,
                                     headers={"Authorization": f"Bearer {self.scheduler_token}"}, timeout=self.args.pprof_seconds + 30)
                response.raise_for_status()
                Path(self.args.pprof).mkdir(parents=True, exist_ok=True)
                (Path(self.args.pprof) / f"{label}.pprof").write_bytes(response.content)
            except (httpx.HTTPError, AssertionError) as error:
                print(f"{label}: no CPU profile: {error}", file=sys.stderr, flush=True)

        thread = threading.Thread(target=run, name=f"pprof-{label}", daemon=True)
        thread.start()
        return thread

    def scheduler_config(self, *, cellfit_port: int | None, scheduler_name: str) -> dict[str, Any]:
        """The chart's KubeSchedulerConfiguration (without the extender when ``cellfit_port`` is
        None), one replica: no leader election."""
        config = local_scheduler_config(self.release, cellfit_port=cellfit_port or 1)
        if cellfit_port is None:
            del config["extenders"]
        config["profiles"] = [{**config["profiles"][0], "schedulerName": scheduler_name}]
        config["leaderElection"] = {"leaderElect": False}
        return config

    def cellfit_config(self, policy: str) -> str:
        document = yaml.safe_load(self.release.cellfit_config_text)
        document["policy"] = {**document.get("policy", {}), **POLICIES[policy][0]}
        return yaml.safe_dump(document, sort_keys=False)

    def run_round(self, kind: str, round_no: int) -> dict[str, Any]:
        """One burst of ``kind``: plain, or a cellfit policy."""
        label = f"{kind}-{round_no}"
        extender = kind in POLICIES  # kube-scheduler asks cellfit (else plain, or control: cellfit beside it)
        policy = kind if extender else self.args.control_policy
        scheduler_name = self.release.scheduler_name if extender else "bench-plain"
        letter = POLICIES[kind][1] if extender else kind[0]
        create_pods(self.cluster, self.namespace, self.args.pods, scheduler_name, f"r{round_no}{letter}")
        cellfit: CellfitProcess | None = None
        scheduler: KubeSchedulerProcess | None = None
        watch = BindWatch(self.cluster, self.namespace)
        result: dict[str, Any] = {"pods": self.args.pods}
        try:
            if kind != "plain":
                cellfit = CellfitProcess(self.cellfit_config(policy), self.cellfit_kubeconfig, self.work, name=f"{label}-cellfit")
                started = time.monotonic()
                cellfit.start()
                result["cellfit_ready_s"] = time.monotonic() - started
            config = self.scheduler_config(cellfit_port=cellfit.port if cellfit and extender else None, scheduler_name=scheduler_name)
            scheduler = KubeSchedulerProcess(self.cluster.env["CELLFIT_E2E_KUBE_SCHEDULER"], config, self.scheduler_kubeconfig,
                                             self.work, name=f"{label}-kube-scheduler", verbosity=1,
                                             extra_args=[f"--authorization-always-allow-paths={','.join(SCHEDULER_OPEN_PATHS)}"])
            watch.start()
            control_plane = control_plane_pids(self.workdir)
            cellfit_pid = cellfit.process.pid if cellfit and cellfit.process else None
            before = {"cellfit": cpu_seconds(cellfit_pid), "cellfit children": descendants_cpu_seconds(cellfit_pid),
                      **{name: cpu_seconds(pid) for name, pid in control_plane.items()}}
            counters_before = scrape(cellfit.url) if cellfit else {}
            bindings_before = apiserver_bindings(self.cluster)
            started = time.monotonic()
            scheduler.start()
            profile = self.profile(scheduler, label) if self.args.pprof else None
            wait_for(lambda: len(watch.bound) >= self.args.pods or scheduler.process.poll() is not None,  # type: ignore[union-attr]
                     self.args.timeout, f"{self.args.pods} pods bound by {label}", interval=0.2)
            if len(watch.bound) < self.args.pods:
                raise AssertionError(f"kube-scheduler exited; log {scheduler.log}:\n{scheduler.tail()}")
            scheduler_pid = scheduler.process.pid if scheduler.process else None
            result["kube_scheduler_attempts"] = scheduler_attempts(scheduler, self.scheduler_token)
            if profile is not None:
                profile.join(self.args.pprof_seconds + 30)
            # cellfit with its children (the AlloX solver process, started at its first AlloX pass)
            children = descendants_cpu_seconds(cellfit_pid) - before["cellfit children"]
            own = cpu_seconds(cellfit_pid) - before["cellfit"]
            used = {"kube-scheduler": cpu_seconds(scheduler_pid), "cellfit": own + children,
                    **{name: cpu_seconds(pid) - before[name] for name, pid in control_plane.items()}}
            bindings = bucket_delta(apiserver_bindings(self.cluster), bindings_before)
            result["apiserver_binding_p50_ms"] = _ms(histogram_quantile(0.5, bindings))
            result["apiserver_binding_p99_ms"] = _ms(histogram_quantile(0.99, bindings))
            if cellfit is None:
                del used["cellfit"]
            else:
                after = scrape(cellfit.url)
                parts = components(counters_before, after, own)
                parts["children"] = children
                result["cellfit_cpu_ms_per_pod"] = {part: 1000 * seconds / self.args.pods for part, seconds in parts.items()}
                # Each thread's share (the JSON only): which controller a component's CPU is.
                result["cellfit_thread_cpu_ms_per_pod"] = {
                    name: 1000 * (seconds - counters_before["threads"].get(name, 0.0)) / self.args.pods
                    for name, seconds in sorted(after["threads"].items())}
            if cellfit is not None and extender:
                result["bind_p50_ms"] = _ms(histogram_quantile(0.5, after["bind_buckets"]))
                result["bind_p99_ms"] = _ms(histogram_quantile(0.99, after["bind_buckets"]))
                result["bind_api_wait_p50_ms"] = _ms(histogram_quantile(0.5, after["api_wait_buckets"]))
                result["bind_api_wait_p99_ms"] = _ms(histogram_quantile(0.99, after["api_wait_buckets"]))
                result["verb_mean_ms"] = after["mean_ms"]
            result["cpu_ms_per_pod"] = {name: 1000 * seconds / self.args.pods for name, seconds in used.items()}
        finally:
            watch.stop()
            if scheduler is not None:
                scheduler.stop()
            if cellfit is not None:
                cellfit.stop()
            delete_pods(self.cluster, self.namespace)
        times = sorted(watch.bound.values())
        span = times[-1] - times[0]
        result.update(
            first_bind_s=times[0] - started,
            span_s=span,
            pods_per_s=(len(times) - 1) / span if span > 0 else float("inf"),
            end_to_end_pods_per_s=len(times) / (times[-1] - started),
        )
        return result


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000, help="pods per round")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per scheduler (alternating)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed for one round")
    parser.add_argument("--policies", default="hived,resource-fit",
                        help=f"cellfit's policies to measure, comma-separated: {', '.join(POLICIES)}")
    parser.add_argument("--no-plain", action="store_true", help="skip kube-scheduler alone (no ratios then)")
    parser.add_argument("--control", action="store_true",
                        help="also run kube-scheduler alone with cellfit (the first policy) started beside it, never asked")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--pprof", metavar="DIR", help="write kube-scheduler's CPU profile of each round's burst into DIR")
    parser.add_argument("--pprof-seconds", type=int, default=8, help="seconds each profile covers, from kube-scheduler's start")
    args = parser.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        parser.error(f"--policies: unknown {', '.join(unknown)} (known: {', '.join(POLICIES)})")
    if args.control and not policies:
        parser.error("--control: needs a policy in --policies for the cellfit beside kube-scheduler")
    args.control_policy = policies[0] if policies else None
    kinds = ([] if args.no_plain else ["plain"]) + (["control"] if args.control else []) + policies

    workdir = Path(os.environ.get("CELLFIT_E2E_WORKDIR", "/tmp/cellfit-bench"))
    env, started_here = start_cluster(workdir)
    cluster = Cluster(env)
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    load: list[float] = []
    try:
        t0 = time.monotonic()
        ready = _ready_nodes(cluster)
        if ready < args.nodes:  # a kept cluster already has some
            add_nodes(cluster, args.nodes - ready, start=ready)
        wait_for(lambda: _ready_nodes(cluster) >= args.nodes, 1800, f"{args.nodes} benchmark nodes Ready", interval=5)
        print(f"{args.nodes} nodes Ready in {time.monotonic() - t0:.0f}s", flush=True)
        release = ensure_release(cluster)
        cluster.kubectl("create", "namespace", "bench", check=False)
        wait_for(lambda: cluster.kubectl("-n", "bench", "get", "serviceaccount", "default", check=False).returncode == 0,
                 60, "namespace bench ready")
        bench = Bench(cluster, release, workdir, args)
        delete_pods(cluster, bench.namespace)  # what an interrupted run left
        for round_no in range(args.rounds):
            for kind in kinds:
                result = bench.run_round(kind, round_no)
                result["load_average"] = os.getloadavg()[0]
                load.append(result["load_average"])
                results[kind].append(result)
                print(f"round {round_no + 1} {kind + ':':13} {_fmt(result)}", flush=True)
                if args.json:  # the rounds so far, should a later one fail
                    Path(args.json).write_text(json.dumps({"nodes": args.nodes, "pods": args.pods, "results": results}, indent=2))
    finally:
        if started_here and not args.keep:
            stop_cluster(workdir)

    summary = summarise(results, policies, plain=not args.no_plain)
    print()
    print(f"nodes {args.nodes}, pods per round {args.pods}, rounds {args.rounds}, medians; "
          f"1-minute load average {min(load):.1f}-{max(load):.1f} on {os.cpu_count()} CPUs")
    print_summary(summary)
    if args.json:
        Path(args.json).write_text(json.dumps({"nodes": args.nodes, "pods": args.pods, "results": results,
                                               "summary": summary}, indent=2))
    return 0


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarise(results: dict[str, list[dict[str, Any]]], policies: list[str], *, plain: bool) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for kind, rounds in results.items():
        if not rounds:
            continue
        row: dict[str, Any] = {key: _median([r.get(key) for r in rounds]) for key in
                               ("pods_per_s", "end_to_end_pods_per_s", "first_bind_s", "cellfit_ready_s", "bind_p50_ms", "bind_p99_ms",
                                "bind_api_wait_p50_ms", "bind_api_wait_p99_ms", "apiserver_binding_p50_ms", "apiserver_binding_p99_ms")}
        names = sorted({name for r in rounds for name in r["cpu_ms_per_pod"]})
        row["cpu_ms_per_pod"] = {name: _median([r["cpu_ms_per_pod"].get(name) for r in rounds]) for name in names}
        if kind != "plain":
            row["cellfit_cpu_ms_per_pod"] = {part: _median([r["cellfit_cpu_ms_per_pod"][part] for r in rounds]) for part in COMPONENTS}
        summary[kind] = row
    if plain and "plain" in summary:
        base = summary["plain"]
        for policy in policies + (["control"] if "control" in summary else []):
            row = summary[policy]
            row["rate_ratio"] = row["pods_per_s"] / base["pods_per_s"]
            row["end_to_end_ratio"] = row["end_to_end_pods_per_s"] / base["end_to_end_pods_per_s"]
            row["first_bind_extra_s"] = row["first_bind_s"] - base["first_bind_s"]
            # cellfit's CPU per pod against kube-scheduler's own in the same rounds (with cellfit).
            row["cpu_ratio"] = row["cpu_ms_per_pod"]["cellfit"] / row["cpu_ms_per_pod"]["kube-scheduler"]
            # Round by round, against the plain round next to it.
            row["rate_ratios_by_round"] = [
                ext["pods_per_s"] / alone["pods_per_s"] for ext, alone in zip(results[policy], results["plain"])
            ]
            if "control" in summary and policy != "control":
                # The extender's own part of the extra: against kube-scheduler with cellfit beside it.
                row["first_bind_extra_over_control_s"] = row["first_bind_s"] - summary["control"]["first_bind_s"]
    return summary


def _met(value: float, target: float, *, at_most: bool) -> str:
    return "met" if (value <= target if at_most else value >= target) else "NOT met"


def print_summary(summary: dict[str, Any]) -> None:
    for kind, row in summary.items():
        cpu = ", ".join(f"{name} {ms:.2f}" for name, ms in row["cpu_ms_per_pod"].items())
        text = (f"  {kind + ':':13} {row['pods_per_s']:6.1f} pods/s steady, {row['end_to_end_pods_per_s']:6.1f} end to end; "
                f"first binding {row['first_bind_s']:.2f}s; CPU ms/pod: {cpu}")
        print(text + f"; the API server's bindings p50 {_num(row['apiserver_binding_p50_ms'])} ms, "
                     f"p99 {_num(row['apiserver_binding_p99_ms'])} ms")
        if kind == "plain":
            continue
        parts = ", ".join(f"{part} {ms:.2f}" for part, ms in row["cellfit_cpu_ms_per_pod"].items())
        if kind == "control":
            against = (f"; throughput ratio {row['rate_ratio']:.2f} (rounds {', '.join(f'{r:.2f}' for r in row['rate_ratios_by_round'])}); "
                       f"first binding {row['first_bind_extra_s']:+.2f}s against kube-scheduler alone") if "rate_ratio" in row else ""
            print(f"  {'':13} cellfit beside it, never asked: ready in {row['cellfit_ready_s']:.1f}s; cellfit CPU ms/pod by "
                  f"component: {parts}{against}")
            continue
        print(f"  {'':13} cellfit ready in {row['cellfit_ready_s']:.1f}s; bind p50 {row['bind_p50_ms']:.1f} ms, "
              f"p99 {row['bind_p99_ms']:.1f} ms, of which waiting for the API p50 {_num(row['bind_api_wait_p50_ms'])} ms, "
              f"p99 {_num(row['bind_api_wait_p99_ms'])} ms; cellfit CPU ms/pod by component: {parts}")
        if "rate_ratio" in row:
            print(f"  {'':13} throughput ratio {row['rate_ratio']:.2f} (target >= {TARGET_RATE_RATIO}: "
                  f"{_met(row['rate_ratio'], TARGET_RATE_RATIO, at_most=False)}; rounds "
                  f"{', '.join(f'{r:.2f}' for r in row['rate_ratios_by_round'])}), end to end {row['end_to_end_ratio']:.2f}; "
                  f"first binding +{row['first_bind_extra_s']:.2f}s (target <= {TARGET_FIRST_BIND_EXTRA_S}: "
                  f"{_met(row['first_bind_extra_s'], TARGET_FIRST_BIND_EXTRA_S, at_most=True)}); bind p99 "
                  f"{_met(row['bind_p99_ms'], TARGET_BIND_P99_MS, at_most=True)} (<= {TARGET_BIND_P99_MS:g} ms); "
                  f"cellfit CPU {row['cpu_ratio']:.2f}x kube-scheduler's (target <= {TARGET_CPU_RATIO}: "
                  f"{_met(row['cpu_ratio'], TARGET_CPU_RATIO, at_most=True)})")
        if "first_bind_extra_over_control_s" in row:
            print(f"  {'':13} first binding {row['first_bind_extra_over_control_s']:+.2f}s against kube-scheduler with "
                  f"cellfit beside it (control): the extender's own part")


def add_nodes(cluster: Cluster, count: int, *, start: int) -> None:
    """bench-gpu-<start>..: 8 GPUs each, in one rack, labelled for the benchmark's pods."""
    proc = subprocess.run(
        [str(HERE / "cluster" / "add-gpu-nodes.sh"), str(count), "--prefix", "bench-gpu", "--start", str(start),
         "--gpus", "8", "--rack", "bench", "--label", f"{BENCH_LABEL}=true", "--no-wait"],
        env=cluster.process_env(), capture_output=True, text=True, timeout=1800, check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"add-gpu-nodes.sh failed:\n{proc.stderr}{proc.stdout}")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ready_nodes(cluster: Cluster) -> int:
    out = cluster.kubectl("get", "nodes", "-l", f"{BENCH_LABEL}=true", "-o",
                          "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}", timeout=120).stdout
    return sum(1 for line in out.splitlines() if line.strip() == "True")


def _fmt(result: dict[str, Any]) -> str:
    cpu = ", ".join(f"{name} {ms:.2f}" for name, ms in result["cpu_ms_per_pod"].items())
    text = (f"{result['pods_per_s']:6.1f} pods/s steady, {result['end_to_end_pods_per_s']:6.1f} end to end; first binding "
            f"{result['first_bind_s']:.2f}s; CPU ms/pod {cpu}")
    text += f"; API server bindings p50 {_num(result['apiserver_binding_p50_ms'])} / p99 {_num(result['apiserver_binding_p99_ms'])} ms"
    if "bind_p99_ms" in result:
        parts = ", ".join(f"{part} {ms:.2f}" for part, ms in result["cellfit_cpu_ms_per_pod"].items())
        text += (f"; cellfit ready {result['cellfit_ready_s']:.1f}s, bind p50 {_num(result['bind_p50_ms'])} / "
                 f"p99 {_num(result['bind_p99_ms'])} ms (API wait p50 {_num(result['bind_api_wait_p50_ms'])} / "
                 f"p99 {_num(result['bind_api_wait_p99_ms'])}), components {parts}; verb means ms "
                 f"{ {verb: round(ms, 2) for verb, ms in result['verb_mean_ms'].items()} }")
    attempts = ", ".join(f"{kind} {count:.0f}" if kind in ("scheduled", "unschedulable", "error") else f"{kind} {count:.2f}"
                         for kind, count in sorted(result.get("kube_scheduler_attempts", {}).items()))
    return text + f"; kube-scheduler attempts {attempts or '-'}; load {result.get('load_average', os.getloadavg()[0]):.1f}"


if __name__ == "__main__":
    sys.exit(main())
