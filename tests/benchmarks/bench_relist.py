"""Verb latency while the watch cache relists 10,000 pods (issue 14, "Concurrency").

A relist (after the API server expired the watch, HTTP 410) is applied one event per hold of the
engine lock that the verbs share (a node's departures and new bookings together, where the list
shows both). This runs the production pieces in one process: ClusterCache over the listing test
double (10,000 running pods on 100 nodes, every one new to the cache: the worst case) and
ExtenderService over the same FitGpp engine and lock; while the pods' relist runs in its thread,
the filter verb is called with kube-scheduler's JSON (nodeCacheCapable, 100 node names) again
and again. Prints, median of ``--rounds``: the relist's length, one pod event's share of it, and
the filter's latency p50 / p99 / max during the relist against the same verb with no relist
(baseline, same run).

With ``--http``, the same relist in ``cellfit serve`` as production wires it (connected to the
listing double, its own watch cache and lock, served by uvicorn on a local port, the relist
paced on its event loop), and the filter verb and ``/healthz`` requested over HTTP in turn by
another process while it runs, against both with no relist.

    python tests/benchmarks/bench_relist.py [--pods 10000] [--rounds 5] [--http | --pages]

With ``--pages``, only the first part of a relist, the list's pages split into items in the
reflector's thread: the longest time a thread that needs the GIL (the verbs' loop) waits while
another splits the pages, with msgspec (the GIL held for each page) and with the C extension's
scan (``scheduler/kube/lists.py``: the GIL released), in turn.

Figures only; nothing is asserted (the structural property is tested in
tests/cluster/test_relist_concurrency.py).
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from scheduler.cluster.cache import LIST_PAGE_SIZE, ClusterCache  # noqa: E402
from scheduler.config import parse_settings  # noqa: E402
from scheduler.kube import wire  # noqa: E402
from scheduler.kube.lists import read_page  # noqa: E402
from scheduler.extender.runtime import build_runtime  # noqa: E402
from scheduler.core.pods import PodStore  # noqa: E402
from scheduler.core.fit import ResourceFitEngine  # noqa: E402
from scheduler.extender.metrics import ExtenderMetrics  # noqa: E402
from scheduler.extender.service import AlwaysReady, ExtenderService  # noqa: E402
from scheduler.preemption import FitGppSettings  # noqa: E402
from scheduler.preemption.engine import FitGppEngine  # noqa: E402
from tests.support.api_double import ListingApi  # noqa: E402
from tests.support.kube_objects import dumps, extender_args, node, pod  # noqa: E402
from tests.support.server import running_server, wait_until_ready  # noqa: E402

NODES = 100
BASELINE_SECONDS = 1.0  # of requests before the relist begins


class EncodedListing(ListingApi):
    """The listing double with each list encoded once, before the clock starts: the API
    server's bytes arrive over a socket, not from json.dumps in this process (0.5 s for 10,000
    pods, holding the GIL, which would be measured as a stall that production never has)."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.encoded: dict[tuple[str, str | None], bytes] = {}
        for kind in ("nodes", "pods", "jobs"):
            token: str | None = None
            while True:  # the pages the cache asks for, as the API server would send them
                page = super().list_raw(kind, limit=LIST_PAGE_SIZE, continue_token=token)
                self.encoded[kind, token] = page
                token = json.loads(page)["metadata"].get("continue")
                if not token:
                    break

    def list_raw(self, kind: str, *, limit: int | None = None, continue_token: str | None = None) -> bytes:
        return self.encoded[kind, continue_token]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def one_round(pods: int) -> dict[str, float]:
    nodes = [node(f"node-{i:03d}", gpus=8, cpu="256") for i in range(NODES)]
    listed = [
        pod(f"train-{i:05d}", uid=f"uid-{i:05d}", cpu="1", node_name=f"node-{i % NODES:03d}", phase="Running") for i in range(pods)
    ]
    api = EncodedListing(nodes=nodes, pods=listed)
    del listed
    # The fixtures (10,000 pod dicts: a million objects) are this benchmark's, not cellfit's:
    # out of the collector's sight, so its full collections during the relist scan what cellfit
    # holds, as they would in production.
    gc.collect()
    gc.freeze()
    lock = threading.RLock()
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = ClusterCache(api=api, engine=engine, lock=lock, gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)  # type: ignore[arg-type]
    service = ExtenderService(
        engine=engine, lock=lock, metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu", cluster=None, readiness=AlwaysReady(),
    )
    cache.nodes._list_and_replace()
    body = dumps(extender_args(pod("probe-0", gpus=1), nodes, node_cache_capable=True))

    def filter_latencies(*, until: threading.Thread | None, count: int = 200) -> list[float]:
        latencies = []
        while (until.is_alive() if until is not None else len(latencies) < count):
            started = time.perf_counter()
            service.filter(body)
            latencies.append(time.perf_counter() - started)
        return latencies

    baseline = filter_latencies(until=None)
    relist = threading.Thread(target=cache.pods._list_and_replace)
    started = time.perf_counter()
    relist.start()
    during = filter_latencies(until=relist)
    relist.join()
    relist_seconds = time.perf_counter() - started
    assert cache.sizes()["pods"] == pods
    gc.unfreeze()
    return {
        "relist_s": relist_seconds,
        "per_pod_ms": 1000 * relist_seconds / pods,
        "base_p50_ms": 1000 * statistics.median(baseline),
        "base_p99_ms": 1000 * percentile(baseline, 0.99),
        "p50_ms": 1000 * statistics.median(during),
        "p99_ms": 1000 * percentile(during, 0.99),
        "max_ms": 1000 * max(during),
        "verbs": len(during),
    }


def http_round(pods: int) -> dict[str, float]:
    """The relist inside ``cellfit serve``: its verbs and /healthz over HTTP meanwhile, asked by
    another process (as kube-scheduler and the kubelet ask): a client thread in this process
    would wait for the GIL itself and measure its own waits."""
    nodes = [node(f"node-{i:03d}", gpus=8, cpu="256") for i in range(NODES)]
    listed = [
        pod(f"train-{i:05d}", uid=f"uid-{i:05d}", cpu="1", node_name=f"node-{i % NODES:03d}", phase="Running") for i in range(pods)
    ]
    api = EncodedListing(nodes=nodes, pods=[])
    after_the_outage = EncodedListing(nodes=nodes, pods=listed)
    del listed
    gc.collect()
    gc.freeze()
    settings = parse_settings(
        "policy: {name: resource-fit}\nestimator: {enabled: false}\nleaderElection: {enabled: false}\nnudge: {enabled: false}\n"
    )
    runtime = build_runtime(settings, api=api)  # type: ignore[arg-type]
    assert runtime.cache is not None
    body = dumps(extender_args(pod("probe-0", gpus=1), nodes, node_cache_capable=True))
    with running_server(runtime.app) as url, tempfile.NamedTemporaryFile(suffix=".json") as body_file:
        with httpx.Client(base_url=url, timeout=10) as client:
            wait_until_ready(client)
        body_file.write(body)
        body_file.flush()
        client_process = subprocess.Popen(
            [sys.executable, __file__, "--client", url, body_file.name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert client_process.stdin is not None and client_process.stdout is not None
        assert client_process.stdout.readline().strip() == "ready"
        client_process.stdin.write("go\n")
        client_process.stdin.flush()
        time.sleep(BASELINE_SECONDS)
        # The pods bound while the watch was down, listed after its HTTP 410.
        api.pods = after_the_outage.pods
        api.encoded.update({key: page for key, page in after_the_outage.encoded.items() if key[0] == "pods"})
        relist = threading.Thread(target=runtime.cache.pods._list_and_replace)
        began = time.monotonic()
        relist.start()
        relist.join()
        ended = time.monotonic()
        out, _ = client_process.communicate("stop\n", timeout=60)
        assert runtime.cache.sizes()["pods"] == pods
    gc.unfreeze()
    samples = json.loads(out)
    figures: dict[str, float] = {"relist_s": ended - began}
    for kind in ("filter", "healthz"):
        base = [latency for k, at, latency in samples if k == kind and at + latency < began]
        during = [latency for k, at, latency in samples if k == kind and at < ended and at + latency > began]
        figures |= {
            f"{kind}_base_p99_ms": 1000 * percentile(base, 0.99),
            f"{kind}_p50_ms": 1000 * statistics.median(during),
            f"{kind}_p99_ms": 1000 * percentile(during, 0.99),
            f"{kind}_max_ms": 1000 * max(during),
        }
        figures["requests"] = figures.get("requests", 0) + len(during)
    return figures


def gil_waits(pods: int, read: Callable[[bytes], object]) -> list[float]:
    """The gaps, in seconds, between consecutive steps of a thread that needs the GIL for each
    (as the verbs' loop does) while another thread reads a relist's pages with ``read``. A gap
    longer than a step is time the reader held the GIL."""
    listed = [
        pod(f"train-{i:05d}", uid=f"uid-{i:05d}", cpu="1", node_name=f"node-{i % NODES:03d}", phase="Running") for i in range(pods)
    ]
    pages = [page for (kind, _), page in EncodedListing(nodes=[], pods=listed).encoded.items() if kind == "pods"]
    del listed
    done = threading.Event()

    def read_pages() -> None:
        for page in pages:
            read(page)
        done.set()

    reader = threading.Thread(target=read_pages)
    gaps: list[float] = []
    last = time.perf_counter()
    reader.start()
    while not done.is_set():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    reader.join()
    return gaps


def pages_rounds(pods: int, rounds: int) -> None:
    """msgspec's decode of each page (the GIL held for the page) against lists.read_page (the C
    scan with the GIL released), in turn, ``rounds`` times each."""
    readers: dict[str, Callable[[bytes], object]] = {"msgspec": wire.RAW_LIST_DECODER.decode, "split_list": read_page}
    longest: dict[str, list[float]] = {name: [] for name in readers}
    tail: dict[str, list[float]] = {name: [] for name in readers}
    for number in range(1, rounds + 1):
        for name, read in readers.items():
            gaps = gil_waits(pods, read)
            longest[name].append(1000 * max(gaps))
            tail[name].append(1000 * percentile(gaps, 0.999))
            print(f"round {number}, {name}: longest wait for the GIL {longest[name][-1]:.2f} ms, p99.9 {tail[name][-1]:.3f} ms "
                  f"({len(gaps)} steps)")
    for name in readers:
        print(f"median of {rounds} rounds, {pods} pods in pages of {LIST_PAGE_SIZE}, {name}: longest wait "
              f"{statistics.median(longest[name]):.2f} ms, p99.9 {statistics.median(tail[name]):.3f} ms")


def client_loop(url: str, body_path: str) -> None:
    """The other process: filter then /healthz, again and again, from "go" on stdin until
    "stop"; prints each request's kind, start (time.monotonic, one clock for every process of
    the machine) and latency as JSON."""
    address = urllib.parse.urlsplit(url)
    body = Path(body_path).read_bytes()
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    connection.connect()
    print("ready", flush=True)
    sys.stdin.readline()
    samples: list[tuple[str, float, float]] = []

    def timed(kind: str, method: str, path: str, payload: bytes | None) -> None:
        started = time.monotonic()
        connection.request(method, path, body=payload, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        answer.read()
        samples.append((kind, started, time.monotonic() - started))
        assert answer.status == 200, answer.status

    while not select.select([sys.stdin], [], [], 0)[0]:
        timed("filter", "POST", "/v1/extender/filter", body)
        timed("healthz", "GET", "/healthz", None)
    sys.stdin.readline()
    print(json.dumps(samples), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--http", action="store_true", help="the relist inside cellfit serve, verbs and /healthz over HTTP")
    parser.add_argument("--pages", action="store_true", help="only the list's pages split, msgspec against the C scan")
    parser.add_argument("--client", nargs=2, metavar=("URL", "BODY"), help=argparse.SUPPRESS)  # http_round's other process
    args = parser.parse_args()
    if args.client:
        client_loop(*args.client)
        return
    if args.pages:
        pages_rounds(args.pods, args.rounds)
        return
    if args.http:
        http_rounds = []
        for number in range(1, args.rounds + 1):
            figures = http_round(args.pods)
            http_rounds.append(figures)
            print(f"round {number}: relist {figures['relist_s']:.2f} s, {figures['requests']:.0f} requests meanwhile: "
                  f"filter p50 {figures['filter_p50_ms']:.2f} / p99 {figures['filter_p99_ms']:.2f} / max {figures['filter_max_ms']:.2f} ms "
                  f"(no relist p99 {figures['filter_base_p99_ms']:.2f}); /healthz p50 {figures['healthz_p50_ms']:.2f} / p99 "
                  f"{figures['healthz_p99_ms']:.2f} / max {figures['healthz_max_ms']:.2f} ms (no relist p99 {figures['healthz_base_p99_ms']:.2f})")
        median = {key: statistics.median(r[key] for r in http_rounds) for key in http_rounds[0]}
        print(f"median of {args.rounds} rounds over HTTP, {args.pods} pods: relist {median['relist_s']:.2f} s; filter p99 "
              f"{median['filter_p99_ms']:.2f} ms, max {median['filter_max_ms']:.2f} ms (no relist p99 {median['filter_base_p99_ms']:.2f}); "
              f"/healthz p99 {median['healthz_p99_ms']:.2f} ms, max {median['healthz_max_ms']:.2f} ms "
              f"(no relist p99 {median['healthz_base_p99_ms']:.2f})")
        return
    rounds = []
    for number in range(1, args.rounds + 1):
        figures = one_round(args.pods)
        rounds.append(figures)
        print(f"round {number}: relist {figures['relist_s']:.2f} s ({figures['per_pod_ms']:.3f} ms a pod, the lock free between pods), "
              f"{figures['verbs']:.0f} filter calls meanwhile: p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms, "
              f"max {figures['max_ms']:.2f} ms; without a relist p50 {figures['base_p50_ms']:.2f} ms, p99 {figures['base_p99_ms']:.2f} ms")
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    print(f"median of {args.rounds} rounds, {args.pods} pods: relist {median['relist_s']:.2f} s; filter during it p50 "
          f"{median['p50_ms']:.2f} ms, p99 {median['p99_ms']:.2f} ms, max {median['max_ms']:.2f} ms "
          f"({median['max_ms'] / median['relist_s'] / 1000:.1%} of the relist; a whole-relist hold would make it ~100%); "
          f"without a relist p99 {median['base_p99_ms']:.2f} ms; CPython hands the GIL between threads every "
          f"{1000 * sys.getswitchinterval():.0f} ms")


if __name__ == "__main__":
    main()
