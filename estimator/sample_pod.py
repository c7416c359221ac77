"""A sampling pod, built: the Job's own pod template in one configuration, told to run k
iterations (``CELLFIT_SAMPLE_ITERATIONS``; a long run also ``CELLFIT_SAMPLE_SPLIT_ITERATIONS``, the
short length it reports the time of), owned by the Job, labelled as a sample.

Its name is a function of the Job and the run (configuration and its digest, pilot, length,
attempt), so a controller that restarts and decides again creates the same name, which the API
server refuses to create twice: no sample ever runs twice.

Pure: builds dictionaries, calls nothing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Final, Mapping, Sequence

from estimator.objects import (
    ANNOTATION_SAMPLE_ATTEMPT,
    ANNOTATION_SAMPLE_CONFIGURATION,
    ANNOTATION_SAMPLE_DIGEST,
    ANNOTATION_SAMPLE_ITERATIONS,
    ANNOTATION_SAMPLE_LENGTH,
    ANNOTATION_SAMPLE_PILOT,
    ANNOTATION_SAMPLE_SPLIT_ITERATIONS,
    ENV_SAMPLE_ITERATIONS,
    ENV_SAMPLE_SPLIT_ITERATIONS,
    LABEL_SAMPLE,
    LABEL_SAMPLE_JOB,
)
from scheduler.constants import ANNOTATION_CONFIGURATIONS, LABEL_PLACEMENT
from estimator.planner import CreateSample
from placer.configuration import Configuration, parse_configurations_cached
from placer.rewrite import apply_configuration, shed_placement
from scheduler.core.resources import Resources
from scheduler.errors import InvalidAnnotation

# Labels a sampling pod never carries: those the Job controller selects its pods by (the Job
# would count it as one of its own), and the placement label of a Job AlloX placed before (the
# pod-create webhook rewrites every pod so labelled into that placement's configuration: a CPU
# sample would run as a GPU pod).
_LABELS_NOT_COPIED: Final = frozenset(
    {"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name", LABEL_PLACEMENT}
)
ANNOTATION_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
_GIB: Final = 2**30
_MAX_NAME: Final = 63
_UID_DIGITS: Final = 12


def configuration_digest(configuration: Configuration) -> str:
    """Five hex digits of what a configuration asks for: a sampling pod ran the configuration of
    this digest, and a Job whose configuration was edited since does not use its run."""
    document = {
        "requests": dict(configuration.requests), "limits": dict(configuration.limits), "env": dict(configuration.env),
        "nodeSelector": dict(configuration.node_selector), "tolerations": [dict(t) for t in configuration.tolerations],
        "annotations": dict(configuration.annotations),
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()[:5]


def recorded_configuration(template: Mapping[str, Any], kind: str | None) -> Configuration | None:
    """The ``kind`` configuration a placement recorded on a pod template (its
    ``cellfit.io/configurations`` annotation); None when it records none, or one that no
    longer parses."""
    text = ((template.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CONFIGURATIONS)
    if kind is None or not text:
        return None
    try:
        recorded = parse_configurations_cached(text)
    except InvalidAnnotation:
        return None
    return recorded[kind] if kind in recorded else None  # type: ignore[index]


def unplaced(template: Mapping[str, Any], configuration: Configuration) -> Mapping[str, Any]:
    """``template`` less what the configuration its Job was placed in added (a Job placed, then
    suspended again: its template was rewritten in that configuration, which it records), unless
    that is the configuration sampled: a CPU sample is not pinned to GPU nodes by the GPU
    configuration's node selector, nor run with its env and tolerations; nor does it ask a resource
    an earlier configuration stated that the Job's configurations state no more, as the Job's
    pods placed in that configuration do not (placer/rewrite.py, ``shed_placement``)."""
    placed = recorded_configuration(template, ((template.get("metadata") or {}).get("labels") or {}).get(LABEL_PLACEMENT))
    return shed_placement(template, previous=placed, configuration=configuration)[0]


def sample_pod_name(*, job_name: str, job_uid: str, digest: str, run: CreateSample) -> str:
    # 12 hex digits of the UID (48 random bits): a sweep's Jobs share their names' kept start and
    # their configurations, and the UID alone must tell their pods apart.
    suffix = f"-{job_uid.replace('-', '')[:_UID_DIGITS]}-{run.key.configuration}-{digest}-{run.key.length[0]}{run.key.pilot}-{run.attempt}"
    prefix = job_name[: _MAX_NAME - len(suffix)].rstrip("-.")
    return f"{prefix}{suffix}".lower()


def build_sample_pod(
    *,
    job_name: str,
    job_namespace: str,
    job_uid: str,
    template: Mapping[str, Any],
    configuration: Configuration,
    run: CreateSample,
    indexed: bool,
    scheduler_name: str,
    priority_class_name: str | None,
    pool: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``pool``: the labels of the nodes the Job would run on (``allox.nodeSelector``), merged
    into the pod's node selector as the placer merges them into the Job's pods (placer/rewrite.py):
    a sample runs where its Job would. Raises :class:`~placer.rewrite.PoolConflict`, naming the
    field, for a template or configuration that selects other nodes (the placer refuses to start
    such a Job there, so it is not sampled there either)."""
    extra_env = {ENV_SAMPLE_ITERATIONS: str(run.iterations)}
    split = {}
    if run.split_iterations is not None:
        extra_env[ENV_SAMPLE_SPLIT_ITERATIONS] = str(run.split_iterations)
        split[ANNOTATION_SAMPLE_SPLIT_ITERATIONS] = str(run.split_iterations)
    digest = configuration_digest(configuration)
    index = {}
    if indexed:  # an Indexed Job's pods find their share of the work by index
        extra_env["JOB_COMPLETION_INDEX"] = str(run.key.pilot)
        # Where Kubernetes' Job controller puts it too: templates read it by the downward API.
        index[ANNOTATION_COMPLETION_INDEX] = str(run.key.pilot)
    pod = apply_configuration(
        unplaced(template, configuration),
        configuration,
        extra_env=extra_env,
        extra_labels={LABEL_SAMPLE: "true", LABEL_SAMPLE_JOB: job_uid},
        extra_annotations={
            ANNOTATION_SAMPLE_CONFIGURATION: run.key.configuration,
            ANNOTATION_SAMPLE_DIGEST: digest,
            ANNOTATION_SAMPLE_PILOT: str(run.key.pilot),
            ANNOTATION_SAMPLE_LENGTH: run.key.length,
            ANNOTATION_SAMPLE_ATTEMPT: str(run.attempt),
            ANNOTATION_SAMPLE_ITERATIONS: str(run.iterations),
            **split,
            **index,
        },
        pool=pool,
    )
    metadata = pod["metadata"]
    metadata["labels"] = {k: v for k, v in metadata.get("labels", {}).items() if k not in _LABELS_NOT_COPIED}
    metadata["name"] = sample_pod_name(job_name=job_name, job_uid=job_uid, digest=digest, run=run)
    metadata["namespace"] = job_namespace
    metadata.pop("generateName", None)
    # An owner, not the controller: garbage collected with the Job, ignored by the Job controller.
    metadata["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job_uid}]
    spec = pod["spec"]
    spec["restartPolicy"] = "Never"  # a crash is a failed attempt, counted, not restarted in place
    spec["schedulerName"] = scheduler_name
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
        # The class's: priority admission refuses a pod whose own differ from its class's.
        spec.pop("priority", None)
        spec.pop("preemptionPolicy", None)
    return {"apiVersion": "v1", "kind": "Pod", **pod}


def beyond_every_node(asks: Resources, nodes: Sequence[Resources], *, pooled: bool) -> str | None:
    """"200 cores a pod, more than any node of allox.nodeSelector's pool has (64 cores at most): no
    node could ever run it" when no node of ``nodes`` (each one's allocatable) holds one pod
    asking ``asks`` (:func:`beyond_largest_node`); None when one holds it, or no node is known."""
    beyond = beyond_largest_node(
        [asks.gpus, asks.cpu_millis, asks.memory_bytes], [[node.gpus, node.cpu_millis, node.memory_bytes] for node in nodes],
        read=[gpu_count, _cores, _gib],
    )
    if beyond is None:
        return None
    asked, at_most = beyond
    where = "any node of allox.nodeSelector's pool" if pooled else "any node"
    return f"{asked} a pod, more than {where} has ({at_most}): no node could ever run it"


def beyond_largest_node(
    asked: Sequence[float], nodes: Sequence[Sequence[float]], *, read: Sequence[Callable[[float], str]]
) -> tuple[str, str] | None:
    """When no node of ``nodes`` (each its amounts of the resources ``asked`` lists, in that
    order) holds one pod asking ``asked``: the amounts it asks more of than the largest node has
    of each (``read`` says each resource's amount as users read it: "200 cores"), and the
    largest node's amounts of those, "64 cores at most"; where every one is on some node but
    none has them all, each resource asked, "... at most, not on one node". None when a node
    holds it, or no node is known. The estimator (a sampling pod) and AlloX's admission (a
    configuration's machine) tell a pod that never fits in these words, each in its units."""
    if not nodes or any(all(amount <= has for amount, has in zip(asked, node)) for node in nodes):
        return None
    largest = [max(node[index] for node in nodes) for index in range(len(asked))]
    wanted = [index for index, amount in enumerate(asked) if amount > 0]
    over = [index for index in wanted if asked[index] > largest[index]]
    said = over or wanted
    at_most = " and ".join(read[index](largest[index]) for index in said) + " at most" + ("" if over else ", not on one node")
    return " and ".join(read[index](asked[index]) for index in said), at_most


def gpu_count(count: float) -> str:
    """A number of GPUs as users read it: "1 GPU", "4 GPUs"."""
    return f"{count:g} GPU" + ("" if count == 1 else "s")


def _cores(millicores: float) -> str:
    return f"{millicores / 1000:g} cores"


def _gib(memory_bytes: float) -> str:
    return f"{round(memory_bytes / _GIB, 1):g} GiB"
