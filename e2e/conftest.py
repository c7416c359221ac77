"""Fixtures for cellfit's end-to-end tests against the local control plane.

The session fixture ``control_plane`` builds (or reuses) the binaries with
``e2e/cluster/build.sh``, starts a kwok cluster with ``e2e/cluster/up.sh`` and deletes it
with ``e2e/cluster/down.sh`` at the end of the session. Script output goes to
``$CELLFIT_E2E_WORKDIR/harness.log``; if a script fails, the session's e2e tests fail with
the tail of that log.

Environment:
  CELLFIT_E2E_KUBE_VERSION  which Kubernetes release to build and start: ``newest``, ``oldest``,
                        a minor (``1.35``) or an exact release (``v1.37.2``); default: the
                        ``KUBE_VERSION_DEFAULT`` of e2e/cluster/versions.env. Resolved by the
                        scripts (e2e/cluster/kube-version.sh); shown in pytest's header.
  CELLFIT_E2E_WORKDIR   cluster state, kubeconfig, cluster.env, harness.log
                        (default ~/.cache/cellfit-e2e/run)
  CELLFIT_E2E_KEEP=1    leave the cluster running after the session (debugging)
  CELLFIT_E2E_LOCK_TIMEOUT  seconds to wait for another session using the same workdir
                        (default 1800); under pytest-xdist each worker gets workdir/<worker>
  CELLFIT_E2E_BUILD_TIMEOUT  extra seconds granted to an e2e test while the binaries are
                        built for the first time (default 3600; cold builds take ~20-40 min)
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CLUSTER_DIR = Path(__file__).resolve().parent / "cluster"
DEFAULT_WORKDIR = Path.home() / ".cache" / "cellfit-e2e" / "run"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
RUN_FOR_ANNOTATION = "cellfit.io/e2e-run-for"


def _workdir() -> Path:
    workdir = Path(os.environ.get("CELLFIT_E2E_WORKDIR", str(DEFAULT_WORKDIR))).expanduser()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return workdir / worker if worker else workdir  # one cluster per xdist worker


@contextlib.contextmanager
def _session_lock(workdir: Path, timeout: float) -> Iterator[None]:
    """Serialise test sessions that share a workdir: up.sh replaces the cluster found there."""
    with (workdir / ".session.lock").open("w") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    pytest.fail(
                        f"another e2e session holds {workdir}/.session.lock for more than "
                        f"{timeout:.0f}s; set CELLFIT_E2E_WORKDIR to a directory of your own",
                        pytrace=False,
                    )
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _parse_env_file(path: Path) -> dict[str, str]:
    """Read the ``export KEY='value'`` lines that up.sh writes."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line.startswith("export "):
            continue
        words = shlex.split(line[len("export ") :])
        if len(words) == 1 and "=" in words[0]:
            key, value = words[0].split("=", 1)
            env[key] = value
    return env


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _run_logged(cmd: Sequence[str], log: Path, env: dict[str, str], timeout: float) -> None:
    """Run a harness script, appending its output to ``log``; fail the test on error."""
    with log.open("a") as fh:
        fh.write(f"\n===== {time.strftime('%H:%M:%S')} $ {' '.join(cmd)}\n")
        fh.flush()
        started = time.monotonic()
        try:
            proc = subprocess.run(
                list(cmd), stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            fh.write(f"===== timed out after {timeout:.0f}s\n")
            fh.flush()
            pytest.fail(
                f"{cmd[0]} timed out after {timeout:.0f}s; log {log}:\n{_tail(log)}", pytrace=False
            )
        fh.write(f"===== exit {proc.returncode} after {time.monotonic() - started:.1f}s\n")
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(cmd)} failed with exit code {proc.returncode}; log {log}:\n{_tail(log)}",
            pytrace=False,
        )


@dataclass
class ControlPlane:
    """A running local control plane (see e2e/cluster/README.md)."""

    # Test modules cannot import this conftest (e2e/ is not a package): share constants here.
    KWOK_TOLERATION = KWOK_TOLERATION  # pods must tolerate the kwok node taint
    RUN_FOR_ANNOTATION = RUN_FOR_ANNOTATION  # Go duration after which kwok completes a pod

    workdir: Path
    kubeconfig: Path
    env: dict[str, str]  # the variables of cluster.env: binary paths, KUBECONFIG, apiserver URL
    log: Path
    _namespaces: list[str] = field(default_factory=list)
    _feature_gates: dict[str, bool] = field(default_factory=dict)

    @property
    def apiserver_url(self) -> str:
        return self.env["CELLFIT_E2E_APISERVER_URL"]

    @property
    def kubectl_bin(self) -> str:
        return self.env["CELLFIT_E2E_KUBECTL"]

    @property
    def kube_scheduler_bin(self) -> str:
        return self.env["CELLFIT_E2E_KUBE_SCHEDULER"]

    @property
    def helm_bin(self) -> str:
        return self.env["CELLFIT_E2E_HELM"]

    def process_env(self, **extra: str) -> dict[str, str]:
        """os.environ plus cluster.env: for subprocesses that talk to the cluster."""
        return {**os.environ, **self.env, **extra}

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the cluster; raise AssertionError with stderr when it fails."""
        cmd = [self.kubectl_bin, "--kubeconfig", str(self.kubeconfig), *args]
        proc = subprocess.run(
            cmd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=self.process_env(),  # KUBECACHEDIR: keep kubectl's cache out of ~/.kube
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}"
            )
        return proc

    def kubectl_json(self, *args: str, timeout: float = 60) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", timeout=timeout).stdout)

    def apply(self, manifest: str | dict[str, Any], namespace: str | None = None) -> None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        ns = ["-n", namespace] if namespace else []
        self.kubectl("apply", *ns, "-f", "-", input=text)

    def create_namespace(self, prefix: str = "e2e", timeout: float = 60) -> str:
        """Create a fresh namespace and wait for its ``default`` ServiceAccount (pods are
        rejected until kube-controller-manager has created it). Deleted at teardown."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        self._namespaces.append(name)
        wait_until(
            lambda: self.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode
            == 0,
            timeout,
            f"serviceaccount {name}/default",
        )
        return name

    @property
    def kube_version(self) -> str:
        """The Kubernetes release running (``v1.37.2``)."""
        return self.env["CELLFIT_E2E_KUBE_VERSION"]

    def feature_gates(self) -> dict[str, bool]:
        """kube-apiserver's feature gates as it reports them (``kubernetes_feature_enabled`` in
        its /metrics), e.g. ``MutablePodResourcesForSuspendedJobs`` (KEP-5440)."""
        if not self._feature_gates:
            text = self.kubectl("get", "--raw", "/metrics").stdout
            for match in re.finditer(r'^kubernetes_feature_enabled\{name="([^"]+)"[^}]*\} (\d+)', text, re.M):
                self._feature_gates[match.group(1)] = match.group(2) == "1"
        return dict(self._feature_gates)

    def events_for(self, namespace: str, name: str, kind: str = "Pod") -> list[dict[str, Any]]:
        selector = f"involvedObject.name={name},involvedObject.kind={kind}"
        return self.kubectl_json("-n", namespace, "get", "events", "--field-selector", selector)[
            "items"
        ]

    def wait_until(
        self, predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5
    ) -> Any:
        return wait_until(predicate, timeout, what, interval)

    def cleanup_namespaces(self) -> None:
        for ns in self._namespaces:
            self.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)
        self._namespaces.clear()


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5
) -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


@functools.cache
def _selected_kube_version() -> tuple[str | None, str]:
    """The release CELLFIT_E2E_KUBE_VERSION selects, as build.sh resolves it: (version, "") or
    (None, why not)."""
    proc = subprocess.run(
        [str(CLUSTER_DIR / "build.sh"), "--print-version"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return None, (proc.stderr or proc.stdout).strip()
    return proc.stdout.strip(), ""


def pytest_report_header(config: pytest.Config) -> str | None:
    external = _external_env_file()
    if external is not None:
        return f"e2e: external cluster {external} (CELLFIT_E2E_EXTERNAL_ENV)"
    version, error = _selected_kube_version()
    asked = os.environ.get("CELLFIT_E2E_KUBE_VERSION", "")
    how = f"CELLFIT_E2E_KUBE_VERSION={asked}" if asked else "the default; CELLFIT_E2E_KUBE_VERSION selects"
    return f"e2e: Kubernetes {version} ({how})" if version else f"e2e: {error}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """While the binaries are not cached yet, the first e2e test's setup builds them
    (20-40 min on 2 cores): grant e2e tests the build time on top of their timeout."""
    e2e_items = [item for item in items if item.get_closest_marker("e2e")]
    if not e2e_items or _external_env_file() is not None:
        return
    cached = subprocess.run(
        [str(CLUSTER_DIR / "build.sh"), "--check"], capture_output=True, check=False
    ).returncode == 0
    if cached:
        return
    extra = float(os.environ.get("CELLFIT_E2E_BUILD_TIMEOUT", "3600"))
    base = 0.0
    try:  # pytest-timeout: --timeout wins over the ini value
        opt = config.getoption("timeout", default=None)
        base = float(opt if opt is not None else (config.getini("timeout") or 0))
    except (ValueError, TypeError):
        pass
    for item in e2e_items:
        marker = item.get_closest_marker("timeout")
        current = float(marker.args[0]) if marker and marker.args else base
        if current > 0:
            item.add_marker(pytest.mark.timeout(current + extra))


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    external = _external_env_file()
    if external is not None:
        yield from _external_control_plane(external)
        return
    workdir = _workdir()
    workdir.mkdir(parents=True, exist_ok=True)
    with _session_lock(workdir, timeout=float(os.environ.get("CELLFIT_E2E_LOCK_TIMEOUT", "1800"))):
        yield from _control_plane(workdir)


def _external_env_file() -> Path | None:
    """``CELLFIT_E2E_EXTERNAL_ENV``: a cluster someone else runs (e2e/kind/run.sh writes one, in
    cluster.env's ``export K='v'`` format); the suite then neither builds, starts nor stops one."""
    value = os.environ.get("CELLFIT_E2E_EXTERNAL_ENV")
    return Path(value).expanduser() if value else None


def _external_control_plane(env_file: Path) -> Iterator[ControlPlane]:
    if not env_file.is_file():
        pytest.fail(f"CELLFIT_E2E_EXTERNAL_ENV={env_file}: no such file", pytrace=False)
    cluster_env = _parse_env_file(env_file)
    workdir = Path(cluster_env.get("CELLFIT_E2E_WORKDIR", str(env_file.parent)))
    cp = ControlPlane(
        workdir=workdir, kubeconfig=Path(cluster_env["KUBECONFIG"]), env=cluster_env, log=workdir / "harness.log"
    )
    yield cp
    cp.cleanup_namespaces()


def _control_plane(workdir: Path) -> Iterator[ControlPlane]:
    version, error = _selected_kube_version()
    if version is None:
        pytest.fail(error, pytrace=False)
    log = workdir / "harness.log"
    log.write_text(f"cellfit e2e harness log, {time.strftime('%Y-%m-%d %H:%M:%S')}, Kubernetes {version}\n")
    env = {**os.environ, "CELLFIT_E2E_WORKDIR": str(workdir)}
    build_timeout = float(os.environ.get("CELLFIT_E2E_BUILD_TIMEOUT", "3600")) + 600

    _run_logged([str(CLUSTER_DIR / "build.sh")], log, env, timeout=build_timeout)
    try:
        _run_logged([str(CLUSTER_DIR / "up.sh")], log, env, timeout=300)
        cluster_env = _parse_env_file(workdir / "cluster.env")
        if cluster_env.get("CELLFIT_E2E_KUBE_VERSION") != version:
            pytest.fail(
                f"up.sh started Kubernetes {cluster_env.get('CELLFIT_E2E_KUBE_VERSION')}, "
                f"but {version} was selected; log {log}",
                pytrace=False,
            )
        cp = ControlPlane(
            workdir=workdir,
            kubeconfig=Path(cluster_env["KUBECONFIG"]),
            env=cluster_env,
            log=log,
        )
        yield cp
        cp.cleanup_namespaces()
    finally:
        if os.environ.get("CELLFIT_E2E_KEEP") == "1":
            with log.open("a") as fh:
                fh.write("CELLFIT_E2E_KEEP=1: leaving the cluster running; stop it with e2e/cluster/down.sh\n")
        else:
            # Teardown must not hide the test result: report, do not fail.
            with log.open("a") as fh:
                proc = subprocess.run(
                    [str(CLUSTER_DIR / "down.sh")], stdout=fh, stderr=subprocess.STDOUT,
                    env=env, timeout=120, check=False,
                )
            if proc.returncode != 0:
                print(f"e2e/cluster/down.sh failed ({proc.returncode}); see {log}")
