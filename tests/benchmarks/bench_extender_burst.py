"""cellfit's CPU per scheduled pod under a burst, without a control plane: kube-scheduler's
extender client (``extender_client/``, Go: kube-scheduler v1.37's transport and request, Go's
2 idle connections per host) sends a burst of pods through ``cellfit serve``'s own listener
(``scheduler.extender.server``: the bounded uvicorn protocol, uvloop) one pod at a time, filter
(and prioritize when the filter passes on more than one node), each pod's bind in a goroutine of
its own while the next pod is filtered, as kube-scheduler's binding cycle runs. The client
offers each filter ``--offered`` nodes whose GPUs its own pods do not all hold (kube-scheduler's
own filters run first) and waits ``--cycle-ms`` per pod besides (its scheduling cycle: the
burst goes at kube-scheduler's pace, ~100 pods/s, not as fast as cellfit answers, and cellfit's
CPU per request is twice as high at that pace as back to back).

cellfit runs connected to the test double of the API server (tests/support/api_double.py) with
``--nodes`` 8-GPU nodes and the burst's pods pending in its watch cache; the double's binding
waits ``--bind-ms`` (the API server's latency under a burst, 100-200 ms in e2e/bench_throughput.py)
on the event loop without spending CPU, so the binds overlap as they do in a burst and what is
measured is serving kube-scheduler's HTTP, not the TLS connection to the API server. The pod watch
then shows each binding as the API server and the kubelet do, two MODIFIED events (bound, with the
binding's annotations; then Running), made from templates on the watch's thread: cellfit's watch
path per pod is counted (``--no-watch-events``: a quiet watch, as before).

Reported per run, per pod: cellfit's CPU (the whole process, user and system, from /proc), the
event loop's thread (its user and system), the verbs' own steps
(``cellfit_extender_cpu_seconds_total``), and ``http``: the event loop's thread less the verbs,
``watch`` (the reflectors' threads) and ``controllers`` (every other thread), as
e2e/bench_throughput.py splits it (``cellfit_thread_cpu_seconds_total``); connections
kube-scheduler's client dialled, per pod; context switches per pod: ``loop_waits`` (the event
loop's thread waiting for its next event or for the GIL, each a wake-up to pay for) and
``waits`` (every thread's), ``preempted`` (a thread's CPU taken away).

``--api-tls`` binds through cellfit's own API client (scheduler.cluster.api.KubernetesApi's
create_binding on scheduler/cluster/loop_http.py: its pool, sized as the served checkout sizes
it, TLS, httptools) to a bindings server in the client's binary (``-api-listen``: 201 after the
same wait), so the API client's share, and a bind's wait for a free connection of its pool, are
counted as in a cluster. Each run also reports the bind requests' times as the client saw them
(``bind_p50_ms``, ``bind_p99_ms``, ``bind_max_ms``) and, with ``--allow-failures``, the
requests that failed (a connection refused at the listener's maxConnections) rather than stop.

The first requests, as kube-scheduler's client sees them (sent to answered, the new connection's
dial included): ``filter_first_ms`` and ``bind_first_ms``, the burst's first filter and first
bind; ``*_2_10_ms``, the median of the 2nd to 10th; ``*_median_ms``, the run's median; and
``*_first_x``, ``*_2_10_x``, those against the run's median. A cost the first request pays (a
lazy cache, index or import, the first connection to the API server with ``--api-tls``) shows as
a first far above the rest; one that grows with the nodes, as a ratio that grows with
``--nodes``. With it, cellfit's start: ``ready_s`` (launch to /readyz 200) and ``settle_cpu_ms``,
its CPU in the ``--settle`` seconds (default 1) between readiness and the burst, work left after
readiness that kube-scheduler's own start would compete with (``--settle 0``: the burst at
readiness). ``--bind-ms 150 150`` makes every bind's wait the same, so that the bind's figures
compare.

``--max-idle-per-host N`` lets the client keep N idle connections rather than Go's 2 (what the
connections kube-scheduler opens and closes cost); ``--profile PREFIX`` records each burst with
py-spy, the threads holding the GIL (wall-clock samples: a send on loopback counts while the
receiver runs, so read CPU from the figures above, not from the samples); ``--cprofile PREFIX``
profiles the event loop's thread and the pod watch's with cProfile through each burst (which
slows function calls more than C work: read shares of the calls, not times); with ``--cprofile-cpu``
it times them by the thread's CPU clock instead of the wall clock, so that a send whose receiver
runs meanwhile (loopback, 2 cores) counts only the sender's CPU (each call then costs the
profiler two clock reads, system calls: read shares).

``--source DIR`` serves the cellfit of another checkout (a worktree of an older commit; its C
extensions built); several ``--source`` take turns ABBA, and the medians and the ratios of each
to the first are printed.

    python tests/benchmarks/bench_extender_burst.py [--policy hived] [--pods 1000] [--runs 4] [--source DIR ...]

Needs Go (the client is built into a temporary directory from the module cache or the Go proxy).
This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import itertools
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, cast

ROOT = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).resolve().parent / "extender_client"
TICKS = os.sysconf("SC_CLK_TCK")
_profiles = itertools.count()
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _settings_yaml(*, policy: str, port: int, preemption: str = "fitgpp") -> str:
    return (
        f"server: {{host: 127.0.0.1, port: {port}}}\n"
        f"policy: {{name: {policy}}}\npreemption: {{policy: {preemption}}}\n"
        "estimator: {enabled: false}\nnudge: {enabled: false}\nexchange: {enabled: false}\n"
        "leaderElection: {enabled: false}\nreclaim: {enabled: false}\nadmission: {enabled: false}\n"
    )


def serve(*, config: str, nodes: int, pods: str, bind_ms: tuple[float, float], bindings_server: tuple[int, str] | None = None,
          watch_events: bool = True, cprofile: str = "", cprofile_cpu: bool = False) -> None:
    """``cellfit serve``'s listeners and runtime, connected to the API double (in the server
    process). ``bindings_server``: the port and CA file of the bindings server over TLS (``--api-tls``);
    ``cprofile``: where the event loop's and the pod watch's cProfile statistics of the burst go
    (``.loop``, ``.watch``), timed by the thread's CPU clock with ``cprofile_cpu``."""
    import asyncio
    import cProfile
    import queue
    import random

    from scheduler.cluster.api import KubernetesApi
    from scheduler.config import Settings, parse_settings
    from scheduler.extender import server
    from scheduler.extender.runtime import Runtime, build_runtime
    from tests.support import kube_objects as k
    from tests.support.api_double import ListingApi

    class SlowBindings(ListingApi):
        """The API server's binding latency under a burst, on the loop, without CPU; with
        ``bindings_server``, a real POST of the binding through cellfit's API client to that server.
        With ``watch_events``, the pod watch then shows each binding as the API server does."""

        client: Any = None
        events: queue.SimpleQueue[tuple[str, str, dict[str, str]]] = queue.SimpleQueue()

        async def create_binding(self, **binding: Any) -> None:
            if bindings_server is None:
                await asyncio.sleep(random.uniform(*bind_ms) / 1000)
            else:
                await self._post(**binding)
            await super().create_binding(**binding)
            if watch_events:  # shown by the pod watch, whose thread makes the events (as it reads the API's)
                self.events.put((binding["uid"], binding["node_name"], binding["annotations"]))

        def watch(self, kind: str, *, resource_version: str) -> Iterator[bytes]:
            if kind != "pods" or not watch_events:
                return super().watch(kind, resource_version=resource_version)
            return self._pod_events()

        def _pod_events(self) -> Iterator[bytes]:
            """Each binding's two MODIFIED events (the binding: node, annotations, PodScheduled;
            then the kubelet's Running status), from templates made before the burst."""
            watch_profile = None
            while True:  # until a second passes without a binding: the server ends the watch
                try:
                    uid, node_name, annotations = self.events.get(timeout=1.0)
                except queue.Empty:
                    if watch_profile is not None:
                        watch_profile.disable()
                        watch_profile.dump_stats(f"{cprofile}.watch")
                    return
                if cprofile and watch_profile is None:  # profiles the reflector's thread, which runs this
                    watch_profile = cProfile.Profile(time.thread_time) if cprofile_cpu else cProfile.Profile()
                    watch_profile.enable()
                written = json.dumps(annotations).encode()
                for template in bound_events[uid]:
                    yield template.replace(b'"@annotations@"', written).replace(b"@node@", node_name.encode())

        async def _post(self, **binding: Any) -> None:
            await self.client.create_binding(**binding)

    settings = parse_settings(config)
    listed = json.loads(Path(pods).read_text())
    versions = itertools.count(1000)
    bound_events = {pod["metadata"]["uid"]: _bound_events(pod, versions=versions) for pod in listed}
    api = SlowBindings(nodes=[k.node(f"node-{i:05d}") for i in range(nodes)], pods=listed)
    if bindings_server is not None:  # made now: the Kubernetes client's import is no bind's CPU
        api.client = _bindings_api(settings, bindings_server)

    def connected(settings: Settings) -> Runtime:
        return build_runtime(settings, api=cast(KubernetesApi, api))

    vars(server)["build_runtime"] = connected  # what serve() builds its runtime with: on the double
    if cprofile:  # the event loop's thread, from SIGUSR1 to SIGUSR2 (the burst)
        loop_profile = cProfile.Profile(time.thread_time) if cprofile_cpu else cProfile.Profile()
        signal.signal(signal.SIGUSR1, lambda *_: loop_profile.enable())

        def burst_ended(*_: Any) -> None:
            loop_profile.disable()
            loop_profile.dump_stats(f"{cprofile}.loop")

        signal.signal(signal.SIGUSR2, burst_ended)
    server.serve(settings)


def _bindings_api(settings: Any, bindings_server: tuple[int, str] | None) -> Any:
    """The served checkout's own Kubernetes API client (scheduler.cluster.api.KubernetesApi:
    its event loop's pool, TLS, httptools) for the bindings server, its pool sized as that
    checkout's runtime sizes it (``KubernetesApi.connect``'s ``loop_connections`` where it takes
    one: the extender listener's maxConnections; else its fixed pool)."""
    import inspect

    from kubernetes import client as k8s

    from scheduler.cluster.api import KubernetesApi

    assert bindings_server is not None
    port, ca_file = bindings_server
    configuration = k8s.Configuration()
    configuration.host = f"https://127.0.0.1:{port}"
    configuration.ssl_ca_cert = ca_file
    configuration.api_key = {"authorization": "Bearer bench"}
    sized = {}
    if "loop_connections" in inspect.signature(KubernetesApi).parameters:
        sized["loop_connections"] = settings.server.extender_listener.max_connections
    return KubernetesApi(k8s.ApiClient(configuration), settings=settings.cluster, source="bench", **sized)


def _bound_events(pending: dict[str, Any], *, versions: Iterator[int]) -> tuple[bytes, bytes]:
    """The watch events of ``pending`` bound (node ``@node@``, the binding's annotations in
    place of ``"@annotations@"``), then Running."""
    pod = copy.deepcopy(pending)
    pod["metadata"]["annotations"] = "@annotations@"
    pod["metadata"]["resourceVersion"] = str(next(versions))
    pod["spec"]["nodeName"] = "@node@"
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                    "lastTransitionTime": "2026-01-01T00:00:01Z"}]
    bound = json.dumps({"type": "MODIFIED", "object": pod}).encode()
    pod["metadata"]["resourceVersion"] = str(next(versions))
    pod["status"].update(phase="Running", hostIP="10.0.0.1", podIP="10.244.0.5", startTime="2026-01-01T00:00:02Z")
    pod["status"]["conditions"] += [{"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:02Z"}
                                    for kind in ("Initialized", "Ready", "ContainersReady")]
    pod["status"]["containerStatuses"] = [{"name": "trainer", "ready": True, "restartCount": 0, "started": True,
                                           "image": "ghcr.io/example/trainer:1.4", "imageID": "", "containerID": "kwok://1",
                                           "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}}]
    return bound, json.dumps({"type": "MODIFIED", "object": pod}).encode()


def _pending_pods(count: int) -> list[dict[str, Any]]:
    from tests.support import kube_objects as k

    pods = []
    for i in range(count):  # one pod each, as the e2e benchmark's: no Job, no gang
        pod = k.pod(f"burst-{i}", namespace="bench", gpus=1, cpu="100m", memory="128Mi", priority=500)
        del pod["metadata"]["ownerReferences"], pod["metadata"]["generateName"]
        pod["metadata"]["labels"] = {"bench": "burst"}
        pods.append(pod)
    return pods


def _build_client(directory: Path) -> Path:
    binary = directory / "extender_client"
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=CLIENT, check=True)
    return binary


def _thread_ticks(pid: int, tid: int | None = None) -> tuple[float, float]:
    """User and system CPU seconds of the process, or of its thread ``tid``."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def _switches(pid: int, tid: int | None = None) -> tuple[int, int]:
    """Voluntary context switches (waits: for a read, a lock, the GIL) and involuntary ones (the
    CPU taken away) of thread ``tid``, or of every thread of the process."""
    tasks = [tid] if tid is not None else [int(task) for task in os.listdir(f"/proc/{pid}/task")]
    voluntary = involuntary = 0
    for task in tasks:
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            for line in Path(f"/proc/{pid}/task/{task}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    involuntary += int(line.split()[1])
    return voluntary, involuntary


def _cpu_counters(port: int) -> dict[str, float]:
    """cellfit's own CPU counters: each verb's steps (``verb:NAME``) and each thread's (``thread:NAME``)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = {}
    for match in re.finditer(r'^cellfit_(extender|thread)_cpu_seconds_total\{(?:verb|thread)="([^"]+)"\} (\S+)$', text, re.M):
        found[f"{'verb' if match[1] == 'extender' else 'thread'}:{match[2]}"] = float(match[3])
    return found


def _wait_ready(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"cellfit exited with {process.returncode}")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("cellfit did not become ready")


def _stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL if it has not ended 10 s later."""
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)
    if process.poll() is None:
        process.kill()


def run_once(*, source: Path, client: Path, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    port = _free_port()
    pods_file = workdir / "pods.json"
    pods = _pending_pods(args.pods)
    pods_file.write_text(json.dumps(pods))
    (workdir / "client.json").write_text(json.dumps({"pods": pods, "nodeNames": [f"node-{i:05d}" for i in range(args.nodes)]}))
    serve_call = (
        f"import sys; sys.path[:0] = [{str(source)!r}, {str(ROOT)!r}];"
        f"import importlib.util as u; spec = u.spec_from_file_location('burst', {__file__!r});"
        f"burst = u.module_from_spec(spec); spec.loader.exec_module(burst);"
        f"burst.serve(config={_settings_yaml(policy=args.policy, port=port, preemption=args.preemption)!r}, nodes={args.nodes}, pods={str(pods_file)!r},"
        f" bind_ms=({args.bind_ms[0]}, {args.bind_ms[1]}), watch_events={not args.no_watch_events},"
        f" cprofile={(f'{args.cprofile}.{source.name}.{next(_profiles)}' if args.cprofile else '')!r},"
        f" cprofile_cpu={args.cprofile_cpu})"
    )
    # The source's own scheduler package first, this checkout's tests/ for the harness.
    env = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{ROOT}"}
    bindings = None
    if args.api_tls:
        from tests.support.tls import make_serving_certificate

        pair = make_serving_certificate(workdir / "tls")
        api_port = _free_port()
        bindings = subprocess.Popen([str(client), "-api-listen", f"127.0.0.1:{api_port}", "-api-cert", str(pair.cert_file),
                                     "-api-key", str(pair.key_file), "-api-min", f"{args.bind_ms[0]}ms", "-api-max", f"{args.bind_ms[1]}ms"])
        serve_call = serve_call[:-1] + f", bindings_server=({api_port}, {str(pair.ca_file)!r}))"
    launched = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", serve_call], cwd=source, env=env,
                               stdout=subprocess.DEVNULL, stderr=None if args.verbose else subprocess.DEVNULL)
    try:
        _wait_ready(port, process)
        ready_s = time.monotonic() - launched
        ready_cpu = sum(_thread_ticks(process.pid))
        time.sleep(args.settle)
        settle_cpu = sum(_thread_ticks(process.pid)) - ready_cpu
        counters_before = _cpu_counters(port)
        process_before, loop_before = _thread_ticks(process.pid), _thread_ticks(process.pid, process.pid)
        switches_before, loop_switches_before = _switches(process.pid), _switches(process.pid, process.pid)
        profiler = None
        if args.cprofile:
            process.send_signal(signal.SIGUSR1)
        if args.perf:  # perf's CPU samples of the burst, C and kernel included (perf report --sort dso,sym)
            profiler = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-p", str(process.pid), "-o",
                                         f"{args.perf}.{source.name}.{next(_profiles)}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        elif args.profile:  # py-spy's samples of the burst, folded stacks (flamegraph.pl, speedscope)
            profiler = subprocess.Popen(["py-spy", "record", "--pid", str(process.pid), "--rate", "250", "--gil",
                                         "--format", "raw", "--output", f"{args.profile}.{source.name}.{next(_profiles)}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        finished = subprocess.run(
            [str(client), "-url", f"http://127.0.0.1:{port}/v1/extender", "-input", str(workdir / "client.json"),
             "-offered", str(args.offered), "-cycle", f"{args.cycle_ms}ms",
             "-max-idle-per-host", str(args.max_idle_per_host)],
            check=True, capture_output=True, text=True,
        )
        time.sleep(0.5)  # the watch shows the last bindings
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(30)
        process_after, loop_after = _thread_ticks(process.pid), _thread_ticks(process.pid, process.pid)
        switches_after, loop_switches_after = _switches(process.pid), _switches(process.pid, process.pid)
        if args.cprofile:
            process.send_signal(signal.SIGUSR2)
            time.sleep(1.0)  # the statistics written; the watch's after its idle second
        counters_after = _cpu_counters(port)
    finally:
        _stop(process)
        if bindings is not None:
            _stop(bindings)
    burst = json.loads(finished.stdout)
    if burst["failures"] and not args.allow_failures:
        raise SystemExit(f"{source}: {burst['failures']} requests failed, the first: {burst.get('first_failures')}")
    if burst["failures"]:
        print(f"{source}: {burst['failures']} requests failed, the first: {burst.get('first_failures')}", file=sys.stderr)
    per_pod = 1000 / args.pods
    first_requests = _first_requests(burst)
    spent = {key: (counters_after[key] - counters_before.get(key, 0.0)) * per_pod for key in counters_after}
    verbs = {key.removeprefix("verb:"): ms for key, ms in spent.items() if key.startswith("verb:")}
    threads = {key.removeprefix("thread:"): ms for key, ms in spent.items() if key.startswith("thread:")}
    loop_user, loop_system = ((after - before) * per_pod for before, after in zip(loop_before, loop_after))
    return {
        "cpu_ms": sum(process_after) * per_pod - sum(process_before) * per_pod,
        "user_ms": (process_after[0] - process_before[0]) * per_pod,
        "system_ms": (process_after[1] - process_before[1]) * per_pod,
        "loop_user_ms": loop_user, "loop_system_ms": loop_system,
        "http_ms": loop_user + loop_system - sum(verbs.values()),
        **{f"{verb}_ms": ms for verb, ms in verbs.items()},
        # As e2e/bench_throughput.py splits it: the reflectors' threads, and every other thread.
        "watch_ms": sum(ms for name, ms in threads.items() if name.startswith("reflector-")),
        "controllers_ms": sum(ms for name, ms in threads.items() if name != "MainThread" and not name.startswith("reflector-")),
        "dials_per_pod": burst["dials"] / args.pods,
        # The event loop's waits (epoll, the GIL) per pod, and every thread's; then CPU taken away.
        "loop_waits_per_pod": (loop_switches_after[0] - loop_switches_before[0]) / args.pods,
        "waits_per_pod": (switches_after[0] - switches_before[0]) / args.pods,
        "preempted_per_pod": (switches_after[1] - switches_before[1]) / args.pods,
        "requests_per_pod": sum(burst["requests"].values()) / args.pods,
        "seconds": burst["seconds"],
        # Each bind request's time as kube-scheduler's binding cycle waits for it (sent to answered).
        "bind_p50_ms": burst.get("bind_p50_ms", float("nan")),
        "bind_p99_ms": burst.get("bind_p99_ms", float("nan")),
        "bind_max_ms": burst.get("bind_max_ms", float("nan")),
        "failures": burst["failures"],
        # Start-up: launch to /readyz 200, and cellfit's CPU in the --settle seconds after it
        # (work left after readiness, which would compete with kube-scheduler's own start).
        "ready_s": ready_s,
        "settle_cpu_ms": settle_cpu * 1000,
        **first_requests,
    }


def _first_requests(burst: dict[str, Any]) -> dict[str, float]:
    """The burst's first filter and first bind as the client saw them (sent to answered, a new
    connection's dial included), the median of the 2nd to 10th, and the run's median, in ms; and
    the first's and the 2nd-10th's ratios to that median: a first-request cost (a lazy cache, an
    index, a first connection) shows as a first far above the rest."""
    found: dict[str, float] = {}
    for verb in ("filter", "bind"):
        times = burst.get(f"{verb}_ms") or []  # in the burst's order; -1: not sent or failed
        sent = [ms for ms in times if ms >= 0]
        if not sent:
            continue
        median = statistics.median(sent)
        next_nine = statistics.median(sent[1:10]) if len(sent) > 1 else float("nan")
        found |= {f"{verb}_first_ms": sent[0], f"{verb}_2_10_ms": next_nine, f"{verb}_median_ms": median,
                  f"{verb}_first_x": sent[0] / median if median else float("nan"),
                  f"{verb}_2_10_x": next_nine / median if median else float("nan")}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="hived", choices=("hived", "resource-fit"))
    parser.add_argument("--preemption", default="fitgpp", choices=("fitgpp", "placement"),
                        help="preemption.policy: placement leaves FitGpp's bookkeeping out (what it costs per pod)")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--offered", type=int, default=420, help="node names per filter (kube-scheduler offers 42%% of 1,000)")
    parser.add_argument("--bind-ms", type=float, nargs=2, default=(100.0, 200.0), metavar=("MIN", "MAX"))
    parser.add_argument("--api-tls", action="store_true",
                        help="bind through cellfit's API client over TLS to a bindings server (the client's -api-listen), "
                             "not the double's wait")
    parser.add_argument("--no-watch-events", action="store_true",
                        help="the pod watch stays quiet (by default it shows each binding and the pod's Running status)")
    parser.add_argument("--cycle-ms", type=float, default=8.0,
                        help="kube-scheduler's own work per pod between its extender calls (its cycle was ~8 ms in e2e)")
    parser.add_argument("--max-idle-per-host", type=int, default=0,
                        help="the client's idle connections kept per host; 0: kube-scheduler's (Go's default, 2)")
    parser.add_argument("--profile", metavar="PREFIX", help="record each burst with py-spy into PREFIX.<source>.<n>")
    parser.add_argument("--perf", metavar="PREFIX", help="record each burst with perf (CPU samples, C and kernel) into PREFIX.<source>.<n>")
    parser.add_argument("--cprofile", metavar="PREFIX",
                        help="cProfile the event loop's thread and the pod watch's through each burst, into "
                             "PREFIX.<source>.<n>.loop and .watch (deterministic: it slows what it profiles; read shares)")
    parser.add_argument("--cprofile-cpu", action="store_true",
                        help="--cprofile times calls by the thread's CPU clock, not the wall clock")
    parser.add_argument("--allow-failures", action="store_true",
                        help="count failed requests (a connection refused at the listener's maxConnections, a bind's timeout) "
                             "as the figure failures rather than stop")
    parser.add_argument("--settle", type=float, default=1.0,
                        help="seconds between cellfit's readiness and the burst (its CPU meanwhile: settle_cpu_ms)")
    parser.add_argument("--runs", type=int, default=4, help="runs per source, ABBA")
    parser.add_argument("--source", type=Path, action="append", help="checkout to serve (default: this one)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--verbose", action="store_true", help="show cellfit's log")
    args = parser.parse_args()
    sources = [path.resolve() for path in (args.source or [ROOT])]
    results: dict[Path, list[dict[str, Any]]] = {source: [] for source in sources}
    with tempfile.TemporaryDirectory() as workdir:
        client = _build_client(Path(workdir))
        for run in range(args.runs):
            order = sources if run % 2 == 0 else sources[::-1]
            for source in order:
                figures = run_once(source=source, client=client, args=args, workdir=Path(workdir))
                results[source].append(figures)
                print(f"run {run} {source}: " + ", ".join(f"{key} {value:.3f}" for key, value in figures.items()), flush=True)
    keys = list(results[sources[0]][0])
    first = {key: statistics.median(r[key] for r in results[sources[0]]) for key in keys}
    print(f"\nmedians over {args.runs} runs, {args.pods} pods, policy {args.policy}, load average {os.getloadavg()[0]:.1f}")
    for source in sources:
        medians = {key: statistics.median(r[key] for r in results[source]) for key in keys}
        print(f"{source}:")
        for key in keys:
            ratio = medians[key] / first[key] if first[key] else float("nan")
            print(f"  {key:<16} {medians[key]:8.3f}  x first {ratio:5.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({str(source): runs for source, runs in results.items()}, indent=2))


if __name__ == "__main__":
    main()
