"""The simulator as one stack: every workload's pods go through the one model of
kube-scheduler's cycle (``kube_model.KubeSchedulerCycle``), and ``cellfit simulate`` dispatches
``--workload`` through one registry of workloads."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from scheduler.cli import main as cellfit
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.resources import Resources
import scheduler.simulator as simulator_package
from scheduler.simulator.hived.experiment import HivedExperiment, run_setting
from scheduler.simulator.cli import main as simulate
from scheduler.simulator.kube_model import KubeSchedulerCycle
from scheduler.simulator.workloads import SHARED_OPTIONS, AddsArguments, Produce, register_workload, workloads

NODE = Resources(cpu_millis=8_000, memory_bytes=2**34, gpus=8)


def _cycle() -> KubeSchedulerCycle:
    engine = ResourceFitEngine()
    for name in ("n0", "n1"):
        engine.apply_node(NodeInfo(name=name, allocatable=NODE))
    return KubeSchedulerCycle(engine, [("n0", NODE), ("n1", NODE)])


def _pod(uid: str, gpus: int, *, priority: int = 0) -> PodInfo:
    return PodInfo(uid=uid, namespace="t", name=uid, requests=Resources(gpus=gpus), priority=priority)


def test_a_gang_that_does_not_fit_gives_back_what_it_reserved() -> None:
    cycle = _cycle()
    first = _pod("g-0", 8)
    node = cycle.schedule(first)
    assert node is not None
    cycle.reserve(first, node, at=0.0)
    assert cycle.free(node).gpus == 0  # assumed in kube-scheduler's cache
    second, third = _pod("g-1", 8), _pod("g-2", 8)
    other = cycle.schedule(second)
    assert other is not None and other != node
    cycle.reserve(second, other, at=0.0)
    assert cycle.schedule(third) is None and not cycle.rejected_by_extender  # kube's own fit left no node
    for uid in ("g-0", "g-1"):
        cycle.unreserve(uid)
    assert cycle.free("n0").gpus == cycle.free("n1").gpus == 8 and not cycle.bound
    assert cycle.schedule(third) is not None  # the released room is offered again


def test_a_nominated_pod_keeps_its_room_from_pods_of_no_higher_priority() -> None:
    cycle = _cycle()
    cycle.nominate(_pod("te", 8, priority=1000), "n0")
    assert cycle.schedule(_pod("be", 8, priority=500)) == "n1"
    assert cycle.schedule(_pod("be-2", 8, priority=500)) == "n1"  # not bound: n1 is still free
    assert cycle.free_for_lowest("n0").gpus == 0 and cycle.free("n0").gpus == 8
    cycle.unnominate(_pod("te", 8, priority=1000), "n0")
    assert cycle.free_for_lowest("n0").gpus == 8


@pytest.mark.parametrize("setting", ["hived", "quota-spread", "quota-pack"])
def test_kubes_own_fit_changes_no_gang_decision(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    """The hived workload's gangs go through kube-scheduler's own resource fit before the
    engine's filter; it removes only nodes without the GPUs a pod asks for, which the engines
    refuse too, so under the ``fifo`` queue every job starts when (and where) a filter over
    every node starts it. Under ``kube`` who refused a job decides which events move it in
    kube-scheduler's queue, so the fit matters there
    (``test_hived_kube_queue.py::test_another_tenants_idle_node_alone_reorders_a_tenants_jobs_under_kube``)."""
    experiment = HivedExperiment(jobs=400, seeds=(2,), queue="fifo")
    jobs = experiment.jobs_for(2)
    with_fit = run_setting(experiment, setting, jobs, seed=2)
    monkeypatch.setattr(KubeSchedulerCycle, "offered", lambda self, pod: self.node_names)
    every_node = run_setting(experiment, setting, jobs, seed=2)
    assert np.array_equal(with_fit.start, every_node.start) and np.array_equal(with_fit.finish, every_node.finish)
    assert with_fit.used_node_seconds == every_node.used_node_seconds  # the same nodes, too
    assert np.isfinite(with_fit.start).all()


def test_the_workloads_are_registered_in_order_and_once() -> None:
    assert [w.name for w in workloads()] == ["fitgpp", "allox", "hived"]

    class Again:
        name = "fitgpp"
        title = "again"
        reads = SHARED_OPTIONS

        def add_arguments(self, group: AddsArguments) -> None:
            pass

        def prepare(self, args: argparse.Namespace) -> Produce:
            raise AssertionError

    with pytest.raises(ValueError, match="already registered"):
        register_workload(Again())
    Again.name, Again.reads = "other", frozenset({"tick"})
    with pytest.raises(ValueError, match="no workload shares"):
        register_workload(Again())
    assert [w.name for w in workloads()] == ["fitgpp", "allox", "hived"]


def test_every_workload_runs_through_cellfit(capsys: pytest.CaptureFixture[str]) -> None:
    """``cellfit simulate --workload NAME``, through the ``cellfit`` command's own parser (whose
    namespace carries its own attributes beside the simulator's options)."""
    assert cellfit(["simulate", "--workload", "hived", "--jobs", "60", "--no-progress"]) == 0
    assert "| setting |" in capsys.readouterr().out
    assert cellfit(["simulate", "--jobs", "60", "--nodes", "4", "--policies", "fifo,fitgpp", "--no-progress"]) == 0
    assert "Table 1" in capsys.readouterr().out
    assert cellfit(["simulate", "--workload", "hived", "--nodes", "4", "--no-progress"]) == 2
    assert "--nodes: not an option of workload hived" in capsys.readouterr().err


def test_a_cleared_nomination_gives_its_room_back_to_pods_that_found_none() -> None:
    """The memo of pods kube's own filter found no node for holds while room only shrinks; a
    nomination cleared gives room back, so the memo goes with it."""
    cycle = _cycle()
    cycle.bind(_pod("full", 8), "n1", at=0.0)
    te = _pod("te", 8, priority=1000)
    cycle.nominate(te, "n0")
    be = _pod("be", 8, priority=500)
    assert cycle.schedule(be) is None and not cycle.rejected_by_extender
    cycle.unnominate(te, "n0")
    assert cycle.schedule(be) == "n0"


def test_no_room_for_a_lower_priority_pod_is_not_no_room_for_a_higher_one() -> None:
    """Nominated pods keep their room from pods of no higher priority only: a pod above them
    is offered the node that a pod below them was not."""
    cycle = _cycle()
    cycle.bind(_pod("full", 8), "n1", at=0.0)
    cycle.nominate(_pod("te", 8, priority=1000), "n0")
    assert cycle.schedule(_pod("be", 8, priority=500)) is None
    assert cycle.schedule(_pod("urgent", 8, priority=2000)) == "n0"


def test_a_given_choice_picks_among_the_feasible_nodes() -> None:
    engine = ResourceFitEngine()
    for name in ("n0", "n1"):
        engine.apply_node(NodeInfo(name=name, allocatable=NODE))
    seen: list[list[str]] = []

    def last(pod: PodInfo, feasible: Sequence[str]) -> str:
        seen.append(list(feasible))
        return feasible[-1]

    cycle = KubeSchedulerCycle(engine, [("n0", NODE), ("n1", NODE)], choice=last)
    assert cycle.schedule(_pod("p", 4)) == "n1" and seen == [["n0", "n1"]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # --sweep-values without --sweep: refused by every workload, not ignored for a full run.
        (["--jobs", "0", "--sweep-values", "1,2"], "--sweep-values: only with --sweep"),
        (["--workload", "allox", "--jobs", "0", "--sweep-values", "0.1"], "--sweep-values: only with --sweep"),
        (["--workload", "hived", "--sweep-values", "1"], "--sweep-values: only with --sweep"),
        # Another workload's --set key names that workload, as its options do.
        (["--set", "hived.queue=kube"], "--set hived.queue: a parameter of workload hived only (add --workload hived)"),
        (["--set", "allox.sample_noise=0.04"], "--set allox.sample_noise: a parameter of workload allox only (add --workload allox)"),
        (["--workload", "fitgpp", "--set", "hived.queue=kube"], "--set hived.queue: not a parameter of workload fitgpp"),
    ],
)
def test_options_a_run_would_not_read_are_refused(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate([*args, "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == f"cellfit simulate: {message}"


def test_every_shared_module_is_under_the_contract_that_keeps_it_free_of_workloads() -> None:
    """pyproject.toml's exhaustive layers contract over scheduler.simulator: the command on top,
    then exactly the registered workloads (which may not import each other), then every other
    module, shared (which may import no workload). import-linter itself fails on a module in no
    layer; this checks that a workload is not filed among the shared modules, nor a shared module
    among the workloads."""
    root = Path(simulator_package.__file__).parent
    config = tomllib.loads((root.parents[1] / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c.get("containers") == ["scheduler.simulator"]]
    assert contract["type"] == "layers" and contract["exhaustive"] is True
    command, workload_layer, shared_layer = contract["layers"]
    names = {w.name for w in workloads()}
    top_level = {
        path.stem if path.is_file() else path.name
        for path in root.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert command == "cli"
    assert set(workload_layer.split(" | ")) == names
    assert set(shared_layer.split(" : ")) == top_level - names - {"cli"}
