"""deploy/examples/interchangeable/train.py keeps cellfit's sampling contract (DESIGN.md): with
CELLFIT_SAMPLE_ITERATIONS=k it runs exactly k iterations and exits 0, and every run writes a
termination message the estimator accepts; a message path it cannot write is no failure."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from estimator.contract import parse_sample_report

TRAIN = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "interchangeable" / "train.py"
SMALL = ["--hidden", "16", "--layers", "2", "--batch", "8", "--batches", "4"]


def run(tmp_path: Path, *, env: dict[str, str], args: list[str] = SMALL, message: Path | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    message = message if message is not None else tmp_path / "termination-log"
    base = {key: value for key, value in os.environ.items() if not key.startswith("CELLFIT_")}
    base |= {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "CELLFIT_TERMINATION_MESSAGE_PATH": str(message)}
    done = subprocess.run([sys.executable, str(TRAIN), *args], env=base | env, capture_output=True, text=True, timeout=60)
    return done, message


def test_a_sampling_run_does_k_iterations_and_reports_them(tmp_path: Path) -> None:
    started = time.perf_counter()
    done, message = run(tmp_path, env={"CELLFIT_SAMPLE_ITERATIONS": "3", "CELLFIT_ITERATIONS": "500"})
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    report = parse_sample_report(message.read_text())
    assert report.iterations == 3
    # Start-up (numpy's import, the data) is in it; the interpreter's own start is not.
    assert 0.01 < report.seconds < wall
    # The start-up ends where the iterations begin: most of a 3-iteration run.
    assert report.startup_seconds is not None and 0.5 * report.seconds < report.startup_seconds < report.seconds
    assert report.peak_memory_bytes is not None and report.peak_memory_bytes > 2**20  # bytes, not KiB
    assert "sample: 3 iterations" in done.stdout


def test_a_long_sample_reports_the_time_it_reached_at_its_split(tmp_path: Path) -> None:
    done, message = run(tmp_path, env={"CELLFIT_SAMPLE_ITERATIONS": "40", "CELLFIT_SAMPLE_SPLIT_ITERATIONS": "15"})
    assert done.returncode == 0, done.stderr
    report = parse_sample_report(message.read_text())
    ((k, t),) = report.splits
    assert k == 15 and report.startup_seconds < t < report.seconds
    # At or past the run's end, or without a sample count, there is no split to note.
    for env in ({"CELLFIT_SAMPLE_ITERATIONS": "15", "CELLFIT_SAMPLE_SPLIT_ITERATIONS": "15"}, {"CELLFIT_SAMPLE_SPLIT_ITERATIONS": "5"}):
        done, message = run(tmp_path, env={"CELLFIT_ITERATIONS": "20", **env})
        assert done.returncode == 0, done.stderr
        assert parse_sample_report(message.read_text()).splits == ()


def test_the_message_is_exactly_the_contract_and_fits_the_kubelet(tmp_path: Path) -> None:
    done, message = run(tmp_path, env={"CELLFIT_SAMPLE_ITERATIONS": "2"})
    assert done.returncode == 0, done.stderr
    text = message.read_text()
    assert set(json.loads(text)) == {"iterations", "seconds", "startupSeconds", "peakMemoryBytes"}
    assert len(text.encode()) < 4096


def test_without_the_sample_env_it_runs_the_full_count(tmp_path: Path) -> None:
    done, message = run(tmp_path, env={"CELLFIT_ITERATIONS": "40"})
    assert done.returncode == 0, done.stderr
    assert parse_sample_report(message.read_text()).iterations == 40
    assert "full run: 40 iterations" in done.stdout


def test_the_iterations_flag_overrides_the_env(tmp_path: Path) -> None:
    done, message = run(tmp_path, env={"CELLFIT_ITERATIONS": "40"}, args=[*SMALL, "--iterations", "7"])
    assert done.returncode == 0, done.stderr
    assert parse_sample_report(message.read_text()).iterations == 7


def test_it_learns(tmp_path: Path) -> None:
    """A real training loop, not a sleep: the loss falls below chance (ln 10 = 2.30)."""
    done, _ = run(tmp_path, env={"CELLFIT_ITERATIONS": "300"})
    assert done.returncode == 0, done.stderr
    loss = float(done.stdout.split("loss ")[1].split(",")[0])
    assert loss < 1.5


def test_an_unwritable_message_path_is_a_warning(tmp_path: Path) -> None:
    unwritable = tmp_path / "missing-directory" / "termination-log"
    done, _ = run(tmp_path, env={"CELLFIT_SAMPLE_ITERATIONS": "3"}, message=unwritable)
    assert done.returncode == 0, done.stderr
    assert "warning: cannot write the termination message" in done.stderr
    assert not unwritable.exists()


@pytest.mark.parametrize("value", ["0", "-1", "three"])
def test_a_bad_sample_count_is_an_error_naming_the_env(tmp_path: Path, value: str) -> None:
    done, message = run(tmp_path, env={"CELLFIT_SAMPLE_ITERATIONS": value})
    assert done.returncode == 2
    assert "CELLFIT_SAMPLE_ITERATIONS" in done.stderr
    assert not message.exists()



def test_a_bad_device_is_an_error_naming_the_env(tmp_path: Path) -> None:
    done, message = run(tmp_path, env={"CELLFIT_DEVICE": "tpu", "CELLFIT_SAMPLE_ITERATIONS": "3"})
    assert done.returncode == 2
    assert "CELLFIT_DEVICE" in done.stderr and "'tpu'" in done.stderr
    assert not message.exists()


def gpu_usable() -> bool:
    try:
        import cupy  # type: ignore[import-not-found]

        return bool(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # not installed, or no driver / device
        return False


def test_without_a_gpu_the_gpu_configuration_fails_saying_why(tmp_path: Path) -> None:
    if gpu_usable():
        pytest.skip("this machine has a usable GPU")
    done, message = run(tmp_path, env={"CELLFIT_DEVICE": "gpu", "CELLFIT_SAMPLE_ITERATIONS": "3"})
    assert done.returncode != 0
    assert "CELLFIT_DEVICE=gpu" in done.stderr
    assert not message.exists()  # a failed sampling pod: the estimator retries it, reads no time


@pytest.mark.skipif(not gpu_usable(), reason="needs CuPy and an NVIDIA GPU")
def test_on_a_gpu_it_trains_the_same_network_and_keeps_the_contract(tmp_path: Path) -> None:
    """CELLFIT_DEVICE=gpu: the same seeded network trained with CuPy; the loss after the same
    iterations matches the CPU's (float32 sums in another order), and the message is the same."""
    losses = {}
    for device in ("cpu", "gpu"):
        done, message = run(tmp_path, env={"CELLFIT_DEVICE": device, "CELLFIT_SAMPLE_ITERATIONS": "40", "CELLFIT_SAMPLE_SPLIT_ITERATIONS": "10"})
        assert done.returncode == 0, done.stderr
        report = parse_sample_report(message.read_text())
        assert report.iterations == 40
        ((k, t),) = report.splits
        assert k == 10 and report.startup_seconds < t < report.seconds
        losses[device] = float(done.stdout.split("loss ")[1].split(",")[0])
    assert losses["gpu"] == pytest.approx(losses["cpu"], abs=1e-3)
