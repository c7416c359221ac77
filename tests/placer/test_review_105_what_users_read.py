"""What a user reads of AlloX's decisions (helper-103's session as a user): a Job started on its
slower kind is told why, from what the decision knew; the Placed Event names no internal
mechanism; a queued Job gets one ``Queued`` Event (``kubectl describe job`` shows Events, not
conditions) when it enters the queue, and again only when the kind it waits for changes."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why import interchangeable
from tests.placer.test_controller import Jobs, RecordingApi, controller, job
from tests.placer.test_review_97_queue_writes import ConditionsApi, a_queue_behind_four_running_jobs, passes_over, placer_over

MATCHING_AIM = "AlloX places the waiting Jobs so that their total completion time is least, not each Job's own"


def placed_events(api: RecordingApi) -> dict[str, str]:
    return {name: message for name, reason, message in api.events if reason == "Placed"}


def test_a_job_started_on_cpu_while_every_gpu_is_busy_is_told_when_the_first_frees() -> None:
    # The one GPU runs r, started 100 s ago with a 600 s estimate: it frees in 500 s. w runs
    # 100 s on cpu, 27 s on gpu: waiting 500 s for the GPU would end later.
    api = RecordingApi()
    running = job("r", cpu=6000, gpu=600, suspend=False, placement="gpu", started="2026-01-01T00:00:00Z", version="7")
    placer = controller(api, [running, job("w", cpu=100, gpu=27, created=1)], gpus=1)
    (start,) = placer.admit().starts
    assert (start.key, start.kind) == ("alice/w", "cpu")
    assert placed_events(api) == {"w": "started on cpu: AlloX chose cpu (estimated 100 s; gpu 27 s) "
                                       "because no GPU was free for it, the first expected free in 8 min"}
    ((name, condition),) = [(name, c) for name, c in api.conditions if c["reason"] == "Started"]
    assert condition["message"] == ("running on cpu: AlloX chose cpu (estimated 100 s; gpu 27 s) "
                                    "because no GPU was free for it, the first expected free in 8 min")


def test_a_job_started_on_cpu_while_no_gpu_exists_at_all_is_told_so_without_a_time() -> None:
    api = RecordingApi()
    placer = controller(api, [job("w", cpu=100, gpu=27)], gpus=0)
    (start,) = placer.admit().starts
    assert start.kind == "cpu"
    assert placed_events(api) == {"w": "started on cpu: AlloX chose cpu (estimated 100 s; gpu 27 s) because AlloX's nodes have no GPU"}


def test_jobs_started_on_their_faster_kind_get_no_reason() -> None:
    api = RecordingApi()
    placer = controller(api, [job("a", cpu=100, gpu=10), job("b", cpu=20, gpu=40, created=1)], gpus=1)
    assert {(s.key, s.kind) for s in placer.admit().starts} == {("alice/a", "gpu"), ("alice/b", "cpu")}
    assert placed_events(api) == {"a": "started on gpu: AlloX chose gpu (estimated 10 s; cpu 100 s)",
                                  "b": "started on cpu: AlloX chose cpu (estimated 20 s; gpu 40 s)"}


def test_two_jobs_on_cpu_while_the_two_gpus_went_to_others() -> None:
    api = RecordingApi()
    jobs = [job("fast-0", cpu=1000, gpu=10), job("fast-1", cpu=1000, gpu=10, created=1),
            job("slow", cpu=50, gpu=40, created=2)]
    placer = controller(api, jobs, gpus=2)
    assert {(s.key, s.kind) for s in placer.admit().starts} == {("alice/fast-0", "gpu"), ("alice/fast-1", "gpu"), ("alice/slow", "cpu")}
    assert placed_events(api)["slow"] == ("started on cpu: AlloX chose cpu (estimated 50 s; gpu 40 s) "
                                          f"because the 2 free GPUs went to other Jobs: {MATCHING_AIM}")


def test_kubectl_cellfit_why_reads_the_reason_the_controller_wrote() -> None:
    api = RecordingApi()
    running = job("r", cpu=6000, gpu=600, suspend=False, placement="gpu", started="2026-01-01T00:00:00Z", version="7")
    placer = controller(api, [running, job("w", cpu=100, gpu=27, created=1)], gpus=1)
    placer.admit()
    ((_, condition),) = [(name, c) for name, c in api.conditions if name == "w" and c["reason"] == "Started"]
    started = job_from(interchangeable(suspend=False, placement="cpu", conditions=[condition], estimate=True))
    assert explain_job(started, CellfitView()).summary == (
        "on CPU instead of GPU: AlloX chose cpu (estimated 100 s; gpu 27 s) because no GPU was free for it, the first expected free in 8 min")


def queued_events(api: ConditionsApi | RecordingApi) -> list[tuple[str, str]]:
    return [(name, message) for name, reason, message in api.events if reason == "Queued"]


def test_each_queued_job_gets_one_queued_event_however_often_its_place_changes() -> None:
    api, watch, clock, placer = a_queue_behind_four_running_jobs(queued=200)
    first = queued_events(api)
    assert len(first) == 200
    told = dict(api.writes)
    assert dict(first)["q-000"] == (f"queued by AlloX: {told['q-000'].removesuffix(' (AlloX)')} "
                                    "(kubectl cellfit why job/q-000 -n alice for its current place)")
    # 15 minutes of passes, then Jobs ahead deleted: every place behind them changes (their
    # conditions are written again), their Events are not.
    passes_over(api, watch, clock, placer, minutes=15)
    for name in ("q-000", "q-001", "q-002"):
        del api.jobs[name]
    assert passes_over(api, watch, clock, placer, minutes=1) > 0
    assert len(queued_events(api)) == 200


def test_a_restarted_cellfit_sends_no_queued_event_its_condition_already_told() -> None:
    api, watch, clock, _ = a_queue_behind_four_running_jobs(queued=20)
    before = len(queued_events(api))
    clock.now += 60
    watch.jobs = api.watched()
    placer_over(api, watch, clock).admit()
    assert len(queued_events(api)) == before


def test_a_job_that_would_have_ended_sooner_waiting_for_the_gpu_is_told_allox_weighs_the_others() -> None:
    # The GPU frees in 500 s; w2 would end 500 + 27 s from now there, 540 s on cpu: the GPU's
    # next turn went to w1, which gains more from it (30 s there, 6000 s on cpu), and w2 after
    # w1 would end at 557 s.
    api = RecordingApi()
    running = job("r", cpu=6000, gpu=600, suspend=False, placement="gpu", started="2026-01-01T00:00:00Z", version="7")
    jobs = [running, job("w1", cpu=6000, gpu=30, created=1), job("w2", cpu=540, gpu=27, created=2)]
    placer = controller(api, jobs, gpus=1)
    assert {(s.key, s.kind) for s in placer.admit().starts} == {("alice/w2", "cpu")}
    # As AlloX counted it, the GPU frees at 540 s (its end on the minute grid), and w2 there
    # would end at 567 s, after 540 s on cpu: said as what decided it (user26), not the aim.
    assert placed_events(api) == {"w2": "started on cpu: AlloX chose cpu (estimated 9 min; gpu 27 s) because no GPU was free "
                                         "for it, the first expected free in 8 min; waiting for it would have ended this Job "
                                         "~13 s sooner by the estimates, but AlloX counts a busy machine free at its estimated "
                                         "end rounded up to its grid (allox.omegaGridSeconds), in 9 min here, so waiting as it "
                                         "counted it would have ended this Job ~27 s later than on cpu"}


def test_a_queued_job_gets_another_queued_event_only_when_the_kind_it_waits_for_changes() -> None:
    # Both machines run a Job for 500 s more; w waits for the faster of them.
    api = RecordingApi()
    running = [job("r-gpu", cpu=6000, gpu=600, suspend=False, placement="gpu", started="2026-01-01T00:00:00Z", version="7"),
               job("r-cpu", cpu=600, gpu=6000, suspend=False, placement="cpu", started="2026-01-01T00:00:00Z", version="7")]
    placer = controller(api, [*running, job("w", cpu=2000, gpu=100, created=1, version="1")], gpus=1)
    placer.admit()
    placer.admit()
    assert [message.split(",")[0] for _, message in queued_events(api)] == ["queued by AlloX: 1st on gpu"]
    # Its user's new estimates make cpu the faster: it waits there now, and is told so once.
    watch = placer._jobs  # the watch controller() made
    assert isinstance(watch, Jobs)
    watch.jobs = [*running, job("w", cpu=200, gpu=2000, created=1, version="2")]
    placer.admit()
    placer.admit()
    assert [message.split(",")[0] for _, message in queued_events(api)] == ["queued by AlloX: 1st on gpu", "queued by AlloX: 1st on cpu"]
