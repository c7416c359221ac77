#!/usr/bin/env python3
"""A small real training program that honours cellfit's sampling contract (DESIGN.md).

A multi-layer perceptron trained by minibatch SGD (softmax cross-entropy) on a synthetic,
seeded classification task whose labels come from a random "teacher" network. Pure Python and
numpy. One iteration = one minibatch: forward, backward, SGD update.

The contract:

* ``CELLFIT_SAMPLE_ITERATIONS=k``: run exactly ``k`` iterations instead of the full count and
  exit 0 (a sampling pod). With ``CELLFIT_SAMPLE_SPLIT_ITERATIONS=j`` (``j < k``) it also notes
  the seconds it had reached after ``j`` iterations, as ``"splits": [[j, t_j]]``.
* Either way, on exit it writes ``{"iterations": n, "seconds": t, "startupSeconds": s,
  "splits": [...], "peakMemoryBytes": m}`` to
  ``$CELLFIT_TERMINATION_MESSAGE_PATH`` (default ``/dev/termination-log``); a path it cannot
  write is a warning on stderr, not a failure.
* ``seconds`` is the wall time from the first line of this file to the message: imports, data
  generation and the loop, the start-up a scheduler sees in every run. The interpreter's own
  start-up before this file runs (some tens of milliseconds) is not included.
* ``startupSeconds`` is the part of ``seconds`` before the first iteration, so the estimator
  takes the start-up as measured instead of extrapolating it from two runs.
* ``peakMemoryBytes`` is the process's peak resident set (``getrusage`` ``ru_maxrss``).

Where it computes comes from the configuration's env too: ``CELLFIT_DEVICE=gpu`` trains the same
network with CuPy (numpy's array API on an NVIDIA GPU: one program, two configurations);
``cpu``, the default, with numpy, whose BLAS threads come from ``OMP_NUM_THREADS`` /
``OPENBLAS_NUM_THREADS``. On the GPU every time it reports (start-up, splits, the end) is taken
after the device has finished its queued work, since kernels run asynchronously.

    CELLFIT_ITERATIONS=2000 python train.py --hidden 256 --batch 64 --layers 3
"""

from __future__ import annotations  # older Pythons in training images

import time

_STARTED = time.perf_counter()  # before any other import: start-up counts

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402

DEFAULT_ITERATIONS = 1000
DEFAULT_MESSAGE_PATH = "/dev/termination-log"
DEVICES = ("cpu", "gpu")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=positive_int, default=128, help="units per hidden layer (default 128)")
    parser.add_argument("--layers", type=positive_int, default=2, help="hidden layers (default 2)")
    parser.add_argument("--batch", type=positive_int, default=64, help="minibatch size (default 64)")
    parser.add_argument("--features", type=positive_int, default=64, help="input features (default 64)")
    parser.add_argument("--classes", type=positive_int, default=10, help="output classes (default 10)")
    parser.add_argument("--batches", type=positive_int, default=32, help="distinct minibatches in the data set (default 32)")
    parser.add_argument(
        "--iterations", type=positive_int, default=None,
        help=f"iterations of a full run (default: $CELLFIT_ITERATIONS, else {DEFAULT_ITERATIONS})",
    )
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=0, help="print the loss every n iterations (0: only at the end)")
    parser.add_argument(
        "--device", choices=DEVICES, default=None,
        help="cpu (numpy) or gpu (CuPy) (default: $CELLFIT_DEVICE, else cpu)",
    )
    args = parser.parse_args(argv)
    if args.device is None:
        args.device = os.environ.get("CELLFIT_DEVICE", "").strip().lower() or "cpu"
        if args.device not in DEVICES:
            parser.error(f"$CELLFIT_DEVICE: {args.device!r} is not one of {', '.join(DEVICES)}")  # exits 2
    if args.iterations is None:
        args.iterations = _env_int(parser, "CELLFIT_ITERATIONS") or DEFAULT_ITERATIONS
    args.sample = _env_int(parser, "CELLFIT_SAMPLE_ITERATIONS")
    # Where a sampling run also notes the time it reached (splits): cellfit asks a long sample
    # for its short length, so one run gives both.
    args.split = _env_int(parser, "CELLFIT_SAMPLE_SPLIT_ITERATIONS") if args.sample is not None else None
    return args


def _env_int(parser: argparse.ArgumentParser, name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as error:
        parser.error(f"${name}: {error}")  # exits 2
    return None  # unreachable


def peak_memory_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # KiB on Linux, bytes on macOS


def write_message(iterations: int, *, startup_seconds: float, splits: list[list[float]]) -> None:
    message = json.dumps(
        {
            "iterations": iterations,
            "seconds": round(time.perf_counter() - _STARTED, 6),
            "startupSeconds": round(startup_seconds, 6),
            **({"splits": splits} if splits else {}),
            "peakMemoryBytes": peak_memory_bytes(),
        },
        separators=(",", ":"),
    )
    path = os.environ.get("CELLFIT_TERMINATION_MESSAGE_PATH") or DEFAULT_MESSAGE_PATH
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(message)
    except OSError as error:
        print(f"warning: cannot write the termination message to {path}: {error}; message: {message}", file=sys.stderr)


def array_module(device: str):
    """The array library and a function that waits for the device's queued work: numpy on CPUs
    (nothing to wait for), CuPy on the GPU. Imported after the clock started: start-up."""
    import numpy

    if device == "cpu":
        return numpy, lambda: None
    try:
        import cupy
    except ImportError as error:
        raise SystemExit(f"--device gpu / CELLFIT_DEVICE=gpu needs CuPy (pip install cupy-cuda12x or cupy-cuda13x): {error}") from None
    try:
        gpu = cupy.cuda.Device(0)
        gpu.use()
    except Exception as error:  # CUDARuntimeError and the driver's own: no usable GPU
        raise SystemExit(f"--device gpu / CELLFIT_DEVICE=gpu: no usable GPU: {error}") from None
    return cupy, gpu.synchronize


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import numpy as np  # after the clock started, so its import counts as start-up

    xp, synchronize = array_module(args.device)
    rng = np.random.default_rng(args.seed)
    dtype = np.float32

    # Synthetic task: inputs drawn once, labels from a random teacher network.
    rows = args.batch * args.batches
    inputs = rng.standard_normal((rows, args.features), dtype=dtype)
    teacher = rng.standard_normal((args.features, args.classes), dtype=dtype)
    labels = np.argmax(np.tanh(inputs @ teacher) + 0.1 * rng.standard_normal((rows, args.classes), dtype=dtype), axis=1)
    targets = xp.asarray(np.eye(args.classes, dtype=dtype)[labels])
    inputs = xp.asarray(inputs)

    widths = [args.features] + [args.hidden] * args.layers + [args.classes]
    depth = len(widths) - 1
    weights = [xp.asarray(rng.standard_normal((a, b), dtype=dtype) * np.sqrt(2.0 / a), dtype=dtype) for a, b in zip(widths, widths[1:])]
    biases = [xp.zeros(b, dtype=dtype) for b in widths[1:]]
    # Every buffer allocated once, as a framework's memory pool does: the iterations that follow
    # allocate (almost) nothing, so each costs the same from the first one on.
    outputs = [xp.empty((args.batch, b), dtype=dtype) for b in widths[1:]]  # layer outputs; the last: probabilities
    deltas = [xp.empty((args.batch, b), dtype=dtype) for b in widths[1:]]  # loss gradient at each layer's output
    active = [xp.empty((args.batch, b), dtype=bool) for b in widths[1:-1]]  # where each ReLU let through
    grad_weights = [xp.empty_like(w) for w in weights]
    grad_biases = [xp.empty_like(b) for b in biases]
    row_stat = xp.empty((args.batch, 1), dtype=dtype)

    total = args.sample if args.sample is not None else args.iterations
    split = args.split if args.split is not None and args.split < total else None
    splits: list[list[float]] = []
    loss = float("nan")
    synchronize()
    startup_seconds = time.perf_counter() - _STARTED  # everything before the first iteration
    for step in range(total):
        start = (step % args.batches) * args.batch
        x = inputs[start : start + args.batch]
        y = targets[start : start + args.batch]
        # Forward: ReLU hidden layers, softmax output.
        below = x
        for layer in range(depth):
            out = outputs[layer]
            xp.matmul(below, weights[layer], out=out)
            out += biases[layer]
            if layer < depth - 1:
                xp.maximum(out, 0, out=out)
                xp.greater(out, 0, out=active[layer])
            below = out
        probabilities = outputs[-1]
        xp.max(probabilities, axis=1, keepdims=True, out=row_stat)
        probabilities -= row_stat
        xp.exp(probabilities, out=probabilities)
        xp.sum(probabilities, axis=1, keepdims=True, out=row_stat)
        probabilities /= row_stat
        # Backward (cross-entropy through softmax), then the SGD update of each layer.
        xp.subtract(probabilities, y, out=deltas[-1])
        deltas[-1] *= 1.0 / args.batch
        for layer in range(depth - 1, -1, -1):
            below = outputs[layer - 1] if layer else x
            xp.matmul(below.T, deltas[layer], out=grad_weights[layer])
            xp.sum(deltas[layer], axis=0, out=grad_biases[layer])
            if layer:
                xp.matmul(deltas[layer], weights[layer].T, out=deltas[layer - 1])
                deltas[layer - 1] *= active[layer - 1]
            grad_weights[layer] *= args.learning_rate
            weights[layer] -= grad_weights[layer]
            grad_biases[layer] *= args.learning_rate
            biases[layer] -= grad_biases[layer]
        if args.log_every and (step + 1) % args.log_every == 0 or step + 1 == total:
            loss = float(-xp.log(xp.maximum((probabilities * y).sum(axis=1), 1e-12)).mean())
            if args.log_every:
                print(f"iteration {step + 1}/{total} loss {loss:.4f}", flush=True)
        if step + 1 == split:
            synchronize()
            splits.append([split, round(time.perf_counter() - _STARTED, 6)])

    synchronize()
    write_message(total, startup_seconds=startup_seconds, splits=splits)
    kind = "sample" if args.sample is not None else "full run"
    print(f"{kind}: {total} iterations, loss {loss:.4f}, {time.perf_counter() - _STARTED:.3f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
