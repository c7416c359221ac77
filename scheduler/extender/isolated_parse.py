"""Live reload parses a new configuration file in a child process, so the verbs never wait on it.

A thread is not enough: parsing and validating hold the interpreter lock in long stretches
(pydantic's validation is compiled code that never lets it go; 200,000 problems in one file
hold it for ~0.5 s), and a thread cannot be stopped. The child gets the file's text, runs
``parse_settings`` exactly as ``cellfit check-config`` and startup do (bounds included, and the
topology's feasibility proof, which builds the whole cell tree), and sends back the settings as
plain data or the error. It runs under a time limit (:data:`PARSE_TIMEOUT_SECONDS`) and a
memory limit (:data:`PARSE_MEMORY_BYTES` above what it holds once started): past either it is
stopped and the file counts as invalid, the process keeping its configuration. The bounds in
``scheduler.safe_yaml`` and ``scheduler.cells.config`` already keep a hostile file's cost to
milliseconds; these limits are what holds should a file get past them anyway.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from scheduler.config import Settings, parse_settings
from scheduler.errors import ConfigError

PARSE_TIMEOUT_SECONDS: Final = 60.0
PARSE_MEMORY_BYTES: Final = 2**30


def parse_settings_isolated(
    text: str,
    *,
    source: str,
    timeout_seconds: float = PARSE_TIMEOUT_SECONDS,
    memory_bytes: int = PARSE_MEMORY_BYTES,
) -> Settings:
    """``parse_settings(text, source=source)``, computed in a child process; the settings, or
    :class:`ConfigError` with the child's message or the limit it ran into. Blocks the calling
    thread (not the interpreter) until the child answers: call it from a worker thread."""
    # A plain child running this module, not multiprocessing's spawn: that one would import the
    # parent's __main__ (scheduler.cli and every tool behind it) first, seconds on a busy node.
    command = [sys.executable, "-m", __name__, source, str(memory_bytes)]
    # The parent's import path, so the child imports this same cellfit; one BLAS thread, because
    # the child does no linear algebra and each thread reserves address space.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run(
            command, input=text.encode("utf-8"), capture_output=True, timeout=timeout_seconds, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{source}: not checked: parsing it took longer than {timeout_seconds:g} s, the limit; stopped") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise ConfigError(
            f"{source}: not checked: the process parsing it ended without an answer (exit code {done.returncode}); "
            f"it may have needed more than {memory_bytes:,} bytes of memory, the limit"
        ) from None
    if "error" in answer:
        raise ConfigError(answer["error"])
    # The child's settings as plain data: validating them again costs milliseconds (no YAML, no
    # cell tree) and gives the parent objects of its own.
    return Settings.model_validate(answer["settings"])


def _answer(text: str, *, source: str, memory_bytes: int) -> dict[str, Any]:
    try:
        settings = parse_settings(text, source=source)
    except ConfigError as error:
        return {"error": str(error)}
    except MemoryError:
        return {"error": f"{source}: not checked: parsing it needed more than {memory_bytes:,} bytes of memory, the limit"}
    except RecursionError:  # the bounds make this unreachable; should one slip, it is still an answer
        return {"error": f"{source}: not checked: nested too deeply to parse"}
    dumped = settings.model_dump(mode="json", by_alias=True)
    # The dump writes each VC as {cells: [...]}; one the file wrote as the bare list goes back as
    # that list, so that the parent's settings name its fields as the file does, as at startup
    # ('vision[0].cellType', not 'vision.cells[0].cellType', in a reload's refusal).
    written = dumped["cells"]["virtualClusters"]
    for name, spec in settings.cells.virtual_clusters.items():
        if spec._bare:
            written[name] = written[name]["cells"]
    return {"settings": dumped}


def _limit_memory(memory_bytes: int) -> None:
    """At most ``memory_bytes`` of address space more than the child holds now: counted from
    now, after the imports, which differ from one machine to the next and are not the file's."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return  # not Linux: the time limit still holds
    limit = pages * resource.getpagesize() + memory_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _main(argv: list[str]) -> int:
    source, memory = argv[0], int(argv[1])
    _limit_memory(memory)
    text = sys.stdin.buffer.read().decode("utf-8")
    sys.stdout.write(json.dumps(_answer(text, source=source, memory_bytes=memory)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
