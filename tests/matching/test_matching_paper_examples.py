"""The worked examples of the AlloX paper (EuroSys'20, §1–3), checked against the matching and
against brute force over every assignment and order."""

from __future__ import annotations

import numpy as np
import pytest

from allox_reference import brute_force_total, check_valid, total_completion
from scheduler.matching.costs import delay_matrix, paper_cost_matrix, processing_matrix
from scheduler.matching.model import Assignment, Job, Machine
from scheduler.matching.solve import prepare, schedule, solve

GPU0 = Machine(name="gpu-0", kind="gpu")
GPU1 = Machine(name="gpu-1", kind="gpu")
CPU0 = Machine(name="cpu-0", kind="cpu")
CPU1 = Machine(name="cpu-1", kind="cpu")
TWO_AND_TWO = [GPU0, GPU1, CPU0, CPU1]


def jobs_of(rows: list[tuple[float, float]], users: list[str] | None = None) -> list[Job]:
    """Rows of (GPU time, CPU time), as the paper's matrices write them."""
    return [
        Job(
            name=f"J{index + 1}",
            user=users[index] if users else "u",
            arrival=0.0,
            processing_time={"gpu": gpu, "cpu": cpu},
        )
        for index, (gpu, cpu) in enumerate(rows)
    ]


def placement(result: list[Assignment]) -> dict[str, str]:
    return {a.job.name: a.machine.name for a in result}


class TestThreeJobExample:
    """§3.1: one GPU, one CPU, P = [[3, 4], [4, 6], [5, 10]]; the optimum is 17.

    Two ambiguities in the text: the sentence introducing P says each row holds the times "on
    CPU and GPU", but the next sentence (and Q's column labels) put the GPU first, which is the
    reading used here. And "the entry (2, 2, 3) … 12 minutes … third last job on GPU" matches
    Q's (G, 3) column for Job 2 (3 × 4 = 12), not the (j, i, k) = (2, CPU, 3) the triple
    spells (3 × 6 = 18). The optimum is also not unique: Job 1 second-last on the GPU, Job 3
    last on the GPU and Job 2 on the CPU costs 6 + 5 + 6 = 17 as well."""

    JOBS = jobs_of([(3, 4), (4, 6), (5, 10)])
    MACHINES = [GPU0, CPU0]

    def test_cost_matrix_is_the_papers(self) -> None:
        processing = processing_matrix(self.JOBS, self.MACHINES)
        delay = delay_matrix(available=np.zeros(2), arrival=np.zeros(3))
        q = paper_cost_matrix(processing, delay)
        expected = np.array(
            [
                [3, 4, 6, 8, 9, 12],
                [4, 6, 8, 12, 12, 18],
                [5, 10, 10, 20, 15, 30],
            ],
            dtype=float,
        )
        np.testing.assert_array_equal(q, expected)

    def test_optimum_is_17(self) -> None:
        result = schedule(jobs=self.JOBS, machines=self.MACHINES)
        check_valid(result, self.JOBS, self.MACHINES)
        assert total_completion(result) == 17
        assert brute_force_total(self.JOBS, self.MACHINES) == 17

    def test_schedule_is_one_of_the_two_optima(self) -> None:
        result = schedule(jobs=self.JOBS, machines=self.MACHINES)
        papers = {"J1": "cpu-0", "J2": "gpu-0", "J3": "gpu-0"}
        other = {"J1": "gpu-0", "J2": "cpu-0", "J3": "gpu-0"}
        assert placement(result) in (papers, other)
        on_gpu = [a.job.name for a in sorted(result, key=lambda a: a.start) if a.machine == GPU0]
        assert on_gpu[-1] == "J3"  # last on the GPU in both optima (G1 in the paper's M)

    def test_queue_order_follows_position_from_the_end(self) -> None:
        problem = prepare(jobs=self.JOBS, machines=self.MACHINES, now=0.0)
        queues = solve(problem)
        gpu = problem.machines.index(GPU0)
        assert problem.jobs[int(queues.queue(gpu)[-1])].name == "J3"
        assert queues.total_completion_time == 17


def test_table_1_two_users() -> None:
    """Table 1 / Figure 1: two users, two GPUs, two CPUs, six jobs at time 0.

    The paper reports the optimal average JCT as 76/6 minutes. Brute force over every
    assignment and order of the table's numbers finds 75/6 (e.g. J1, J2 on the CPUs; J4 then
    J5, and J6 then J3, on the GPUs: 15 + 10 + 5 + 15 + 10 + 20), so either the figure's schedule
    is one minute off optimal or a number of the table was lost in the text we have. The
    matching must equal brute force, and beat the paper's 76."""
    jobs = jobs_of(
        [(10, 15), (8, 10), (10, 50), (5, 75), (10, 15), (10, 15)],
        users=["u1", "u2", "u1", "u2", "u1", "u2"],
    )
    result = schedule(jobs=jobs, machines=TWO_AND_TWO)
    check_valid(result, jobs, TWO_AND_TWO)
    assert total_completion(result) == brute_force_total(jobs, TWO_AND_TWO) == 75
    assert total_completion(result) / 6 <= 76 / 6 < 181 / 6


def test_jsq_plus_counter_example() -> None:
    """§2.2, Figure 4: JSQ+ puts Jobs 1, 2 on the GPUs and 3, 4 on the CPUs (AJCT 100); the optimum
    swaps them (AJCT 45)."""
    jobs = jobs_of([(40, 50), (40, 50), (40, 160), (40, 160)])
    result = schedule(jobs=jobs, machines=TWO_AND_TWO)
    check_valid(result, jobs, TWO_AND_TWO)
    assert total_completion(result) / 4 == 45 == brute_force_total(jobs, TWO_AND_TWO) / 4
    assert {placement(result)[name][:3] for name in ("J3", "J4")} == {"gpu"}
    jsq = (40 + 40 + 160 + 160) / 4
    assert jsq == 100


def test_sjf_plus_counter_example() -> None:
    """§2.2, Figure 5: SJF+ runs Jobs 1, 2 on the GPUs and 3, 4 on the CPUs (AJCT 50); the paper's
    optimum runs 3, 4 on the GPUs and 1, 2 on the CPUs (AJCT 20). That optimum is not unique:
    all four on the GPUs (10, 10, then 30, 30) is also 20."""
    jobs = jobs_of([(10, 20), (10, 20), (20, 90), (20, 90)])
    result = schedule(jobs=jobs, machines=TWO_AND_TWO)
    check_valid(result, jobs, TWO_AND_TWO)
    assert total_completion(result) / 4 == 20 == brute_force_total(jobs, TWO_AND_TWO) / 4
    assert all(placement(result)[name].startswith("gpu") for name in ("J3", "J4"))
    sjf = (10 + 10 + 90 + 90) / 4
    assert sjf == 50


def test_figure_8_delay() -> None:
    """§3.2, Figure 8: machine i is busy until 10, job j arrived at 4, the schedule is updated at
    T = 6 and p = 5: waiting ω − a = 6 plus processing 5 gives a completion time of 11."""
    job = Job(name="j", user="u", arrival=4.0, processing_time={"gpu": 5.0})
    result = schedule(jobs=[job], machines=[GPU0], now=6.0, busy_until={"gpu-0": 10.0})
    assert [(a.start, a.finish) for a in result] == [(10.0, 15.0)]
    assert total_completion(result) == 11


@pytest.mark.parametrize("total_jobs", [1, 2, 3])
def test_sum_of_k_times_p_identity(total_jobs: int) -> None:
    """§3.1's observation: jobs 3, 4, 5 on one machine complete at 3, 7, 12 (22 in total), which is
    3·3 + 2·4 + 1·5."""
    sizes = [3.0, 4.0, 5.0][:total_jobs]
    jobs = [Job(name=f"j{i}", user="u", arrival=0.0, processing_time={"gpu": p}) for i, p in enumerate(sizes)]
    result = schedule(jobs=jobs, machines=[GPU0])
    expected = sum(k * p for k, p in zip(range(total_jobs, 0, -1), sizes))
    assert total_completion(result) == expected
