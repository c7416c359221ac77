"""Extender latency over real HTTP: filter and prioritize at 500 and 5,000 NodeNames
(nodeCacheCapable: true), ``cellfit serve``'s listener (scheduler/extender/listeners.py) in its own process, one request at a time on a
kept-alive connection, as kube-scheduler calls it. Each verb is compared with trivial endpoints
of the same app that read the same body and answer "{}", measured in the same run:

* ``trivial``: a FastAPI route (the issue's baseline: the framework's floor);
* ``trivial-raw``: a route on the verbs' own path (answered by the listener's protocol and
  scheduler.extender.dispatch: body read, metrics and errors as for a verb, no decoding or
  deciding), so ``x raw`` shows what cellfit's decoding and deciding alone add.

``filter-python`` and ``prioritize-python`` are the same verbs with the C extension
scheduler.kube._names switched off for the call (as on a machine that installed cellfit without a
C compiler): names decoded into ``str`` and looked up one by one.

    python tests/benchmarks/bench_extender.py [--requests 2000] [--json FILE]

Targets (issue 2): filter p99 <= 0.5 ms at 500 names, p50 <= 1 ms at 5,000, <= 1.5x trivial.
``req/s x trivial`` is one worker's rate (one request at a time) against the trivial endpoint's.
This prints figures; it asserts nothing.
"""


import argparse
import http.client
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support import kube_objects as k  # noqa: E402

SIZES = (500, 5000)


def serve(port: int, nodes: int, ready) -> None:  # runs in the server process
    import logging

    from fastapi import Request, Response

    from scheduler.config import ListenerLimits, Settings
    from scheduler.core.model import NodeInfo, PodInfo
    from scheduler.core.resources import Resources
    from scheduler.extender.dispatch import VerbDispatch, VerbRoute
    from scheduler.extender.listeners import BoundedServer, ListenerConfig
    from scheduler.extender.runtime import build_runtime
    from scheduler.extender.service import Answer

    logging.disable(logging.WARNING)
    runtime = build_runtime(Settings(), standalone=True)
    for i in range(nodes):
        runtime.engine.apply_node(NodeInfo(name=f"gpu-node-{i:05d}", allocatable=Resources(64000, 512 * 2**30, 8)))
        if i % 10 == 0:  # one node in ten is full: those get a reason
            runtime.engine.apply_pod(
                PodInfo(uid=f"busy-{i}", namespace="ml", name=f"busy-{i}", requests=Resources(1000, 2**30, 8), node_name=f"gpu-node-{i:05d}", phase="Running")
            )

    @runtime.app.api.post("/bench/trivial", include_in_schema=False)
    async def trivial(request: Request) -> Response:
        await request.body()
        return Response(b"{}", media_type="application/json")

    from scheduler.kube import names

    def without_native(handler):  # this server answers one request at a time
        def answer(body: bytes) -> Answer:
            saved, names.native = names.native, None
            try:
                return handler(body)
            finally:
                names.native = saved

        return answer

    filter_route = runtime.app.routes["/v1/extender/filter"]
    python_routes = {
        f"/bench/{verb}-python": VerbRoute(
            handler=without_native(runtime.app.routes[f"/v1/extender/{verb}"].handler),
            observe_seconds=filter_route.observe_seconds,
            count_rejected=filter_route.count_rejected,
            count_failed=filter_route.count_failed,
        )
        for verb in ("filter", "prioritize")
    }
    raw_trivial = VerbRoute(
        handler=lambda body: Answer(200, b"{}"),
        observe_seconds=filter_route.observe_seconds,  # a histogram observation, as a verb's
        count_rejected=filter_route.count_rejected,
        count_failed=filter_route.count_failed,
    )
    app = VerbDispatch(
        api=runtime.app.api,
        routes={**runtime.app.routes, "/bench/trivial-raw": raw_trivial, **python_routes},
        max_request_bytes=runtime.app.max_request_bytes,
    )
    # cellfit serve's listener (scheduler/extender/server.py): the verbs (and trivial-raw) are
    # answered by its protocol itself, the FastAPI routes (trivial) through ASGI.
    config = ListenerConfig(app, limits=ListenerLimits(), setting="server.extenderListener", host="127.0.0.1", port=port,
                            log_config=None, access_log=False)
    server = BoundedServer(config)
    ready.set()
    server.run()


def measure(port: int, paths: dict[str, str], body: bytes, requests: int) -> dict[str, list[float]]:
    """Latency samples per endpoint. The endpoints take turns, one request each, so that the
    machine's speed drifting during the run (it does, by up to 1.7x on a shared VM) weighs on
    every endpoint alike instead of skewing the ratios."""
    connections = {name: http.client.HTTPConnection("127.0.0.1", port) for name in paths}
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for i in range(requests + requests // 10):  # the first tenth warms up
        for name, path in paths.items():
            connection = connections[name]
            started = time.perf_counter()
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            elapsed = time.perf_counter() - started
            if response.status != 200:
                raise SystemExit(f"{path}: HTTP {response.status}: {payload[:200]!r}")
            if i >= requests // 10:
                samples[name].append(elapsed)
    for connection in connections.values():
        connection.close()
    return samples


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    results = []
    from scheduler.kube import names

    print(f"C extension scheduler.kube._names: {'built' if names.NATIVE else 'NOT BUILT (the verbs run the Python path)'}")
    print(
        f"{'names':>6} {'endpoint':<17} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'p50 x trivial':>14} {'p99 x trivial':>14}"
        f" {'req/s x trivial':>16} {'p50 x raw':>10} {'p99 x raw':>10}"
    )
    for size in SIZES:
        port = 18000 + size % 1000 + 17
        ready = multiprocessing.Event()
        process = multiprocessing.Process(target=serve, args=(port, size, ready), daemon=True)
        process.start()
        ready.wait(30)
        time.sleep(1.0)
        nodes = [{"metadata": {"name": f"gpu-node-{i:05d}"}} for i in range(size)]
        body = k.dumps(k.extender_args(k.pod("train-0", gpus=1), nodes, node_cache_capable=True))
        figures = measure(port, {
            "trivial": "/bench/trivial", "trivial-raw": "/bench/trivial-raw",
            "filter": "/v1/extender/filter", "prioritize": "/v1/extender/prioritize",
            "filter-python": "/bench/filter-python", "prioritize-python": "/bench/prioritize-python"}, body, args.requests)
        base50, base99 = percentile(figures["trivial"], 0.5), percentile(figures["trivial"], 0.99)
        raw50, raw99 = percentile(figures["trivial-raw"], 0.5), percentile(figures["trivial-raw"], 0.99)
        base_rate = 1 / statistics.fmean(figures["trivial"])
        for name, samples in figures.items():
            p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
            row = {"names": size, "endpoint": name, "p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3,
                   "requests_per_second": 1 / statistics.fmean(samples), "p50_ratio": p50 / base50, "p99_ratio": p99 / base99,
                   "p50_ratio_raw": p50 / raw50, "p99_ratio_raw": p99 / raw99, "body_bytes": len(body)}
            row["requests_per_second_ratio"] = row["requests_per_second"] / base_rate
            results.append(row)
            print(f"{size:>6} {name:<17} {row['p50_ms']:>8.3f} {row['p99_ms']:>8.3f} {row['requests_per_second']:>8.0f} {row['p50_ratio']:>14.2f} {row['p99_ratio']:>14.2f}"
                  f" {row['requests_per_second_ratio']:>16.2f} {row['p50_ratio_raw']:>10.2f} {row['p99_ratio_raw']:>10.2f}")
        process.terminate()
        process.join(5)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
