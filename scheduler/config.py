"""cellfit's configuration: one YAML file, validated on load.

Every setting has a default, so ``cellfit serve`` with no file runs on the embedded default
(``scheduler/default-config.yaml`` spells it out; a test keeps the two identical). Keys are
camelCase in YAML like every Kubernetes config; units are in the names (``...Seconds``,
``...Bytes``). Unknown keys are errors: a misspelled key silently ignored is a production outage
waiting to happen.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from scheduler.cells import CellsConfig, check_config
from scheduler.cells.config import written_path
from scheduler.constants import DEFAULT_PORT, LABEL_RACK, REQUEUE_SIGNAL_IMAGE, RESOURCE_NVIDIA_GPU
from scheduler.errors import ConfigError
from scheduler.messages import MAX_PROBLEMS, first_problems, quoted
from scheduler.safe_yaml import LIMITS as YAML_LIMITS
from scheduler.safe_yaml import load_yaml


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads YAML's true as 1: "port: true" would listen on port 1, "offerBestNodes:
        # true" offer one node, "maxClusterShare: true" give sampling the whole cluster.
        if isinstance(value, bool) and info.field_name is not None and _numeric(cls.model_fields[info.field_name].annotation):
            raise ValueError("a number, not true or false")
        return value


def _numeric(annotation: Any) -> bool:
    """Whether a field holds an int or a float (None allowed or not), never a bool."""
    kinds = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return bool(kinds) and all(kind in (int, float, type(None)) for kind in kinds) and any(kind in (int, float) for kind in kinds)


class ListenerLimits(_Section):
    """What the clients of one listener may hold of the process. Each listener has its own, so
    that flooding one (the metrics port is reachable on the pod IP) cannot spend the others'
    connections, nor the file descriptors the extender verbs need."""

    max_connections: int = Field(
        256,
        ge=1,
        le=65536,
        description=(
            "Connections open at once, TLS handshakes in progress included; one more is closed "
            "as soon as it is accepted. Each holds a file descriptor: the listeners' sum must "
            "fit the process's RLIMIT_NOFILE (checked at start)."
        ),
    )
    max_header_bytes: int = Field(
        16384,
        ge=1024,
        le=2**20,
        description=(
            "Request line and headers of one request, in bytes; more: HTTP 431 and the "
            "connection closed, before the rest is buffered."
        ),
    )
    max_header_count: int = Field(
        100, ge=8, le=10000, description="Header fields of one request; more: HTTP 431 and the connection closed."
    )
    read_timeout_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description=(
            "Seconds from a request's first byte until its headers and body are read (and for a "
            "TLS handshake); slower: HTTP 408 and the connection closed. Time the body waits on "
            "cellfit to read it does not count."
        ),
    )
    idle_timeout_seconds: float = Field(
        120.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description=(
            "Seconds a connection stays open with no request in progress (new, or kept alive "
            "between requests) before it is closed. Longer than Go clients' 90 s idle timeout "
            "(kube-scheduler, the API server), so that they close first and never send a "
            "request on a connection cellfit is closing."
        ),
    )


class MetricsListenerLimits(ListenerLimits):
    """The metrics listener's: the kubelet's probes and a Prometheus or two, on the pod IP."""

    max_connections: int = Field(32, ge=1, le=65536, description=ListenerLimits.model_fields["max_connections"].description)


class ServerSettings(_Section):
    """The HTTP listener kube-scheduler calls, and an optional second one for probes and
    Prometheus; the limits of every listener, the admission webhook's included."""

    # Not empty: an empty address binds every interface, the extender verbs with it.
    host: str = Field("127.0.0.1", min_length=1, description="Address to listen on; 0.0.0.0 in a container.")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="TCP port.")
    max_request_bytes: int = Field(
        8 * 2**20,
        ge=4096,
        le=2**30,
        description=(
            "Largest request body accepted, in bytes. With nodeCacheCapable: false kube-scheduler "
            "sends every candidate Node in full (~4 KB each): raise this for big clusters, or "
            "better, use nodeCacheCapable: true."
        ),
    )
    metrics_host: str = Field(
        "0.0.0.0",
        min_length=1,
        description=(
            "Address of the metrics listener (used only when metricsPort is set). Every address "
            "by default, because that listener exists to be reached from outside the pod; :: for "
            "IPv6."
        ),
    )
    metrics_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description=(
            "TCP port of a second listener, in the same process, that serves only /metrics, "
            "/healthz and /readyz: no extender verb, no /v1/inspect. Lets the kubelet's probes "
            "and Prometheus reach cellfit while host keeps the verbs on loopback. null: no "
            "second listener (all three paths are served on port as well, either way)."
        ),
    )
    inspect_host: str = Field(
        "0.0.0.0",
        min_length=1,
        description=(
            "Address of the inspect listener (used only when inspectPort is set): every address "
            "by default, because the API server's service proxy (kubectl cellfit) reaches it on "
            "the pod IP; :: for IPv6."
        ),
    )
    inspect_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description=(
            "TCP port of a listener, in the same process, that serves only the read-only "
            "GET /v1/inspect/... and /healthz: no extender verb, no metrics. kubectl cellfit "
            "reads it through the API server's service proxy, so that RBAC (services/proxy) "
            "decides who may. null: no such listener (inspect stays on port only)."
        ),
    )
    config_reload_seconds: float = Field(
        10.0,
        ge=0,
        allow_inf_nan=False,
        description=(
            "How often, in seconds, the file given to cellfit serve --config is checked for new "
            "content. A changed cells.virtualClusters is applied without a restart (a shrunk VC "
            "drains as its pods finish); other changes are logged as needing a restart. 0: never "
            "checked."
        ),
    )
    node_name_fast_path: bool = Field(
        True,
        description=(
            "Resolve kube-scheduler's node names and write the answers with cellfit's C extension "
            "(scheduler.kube._names, built at install when a C compiler is there). false: decode "
            "them in Python, ~2x slower at 5,000 names, the same answers; a switch should you "
            "suspect the extension. Needs a restart."
        ),
    )

    paired_scheduler_health_url: str | None = Field(
        None,
        description=(
            "URL of the /healthz of the kube-scheduler that calls this cellfit (the chart's: "
            "https://127.0.0.1:<kubeScheduler.securePort>/healthz). When set, the metrics listener "
            "also serves /healthz/kube-scheduler, which fails when that kube-scheduler's /healthz "
            "does (HTTPS not verified: loopback, its own certificate) or cellfit does not answer: "
            "with several replicas the chart makes it kube-scheduler's liveness probe, so a "
            "kube-scheduler whose cellfit died is restarted and hands its Lease over. Needs "
            "metricsPort. null: no such path."
        ),
    )

    extender_listener: ListenerLimits = Field(
        default_factory=ListenerLimits,
        description="Limits of the extender's listener (port): kube-scheduler's calls, inspect.",
    )
    metrics_listener: MetricsListenerLimits = Field(
        default_factory=MetricsListenerLimits, description="Limits of the metrics listener (metricsPort)."
    )
    inspect_listener: MetricsListenerLimits = Field(
        default_factory=MetricsListenerLimits, description="Limits of the inspect listener (inspectPort)."
    )
    admission_listener: ListenerLimits = Field(
        default_factory=ListenerLimits, description="Limits of the admission webhook's HTTPS listener (admission.port)."
    )

    @model_validator(mode="after")
    def _metrics_port_differs(self) -> ServerSettings:
        # The same port twice fails at bind time, after the cell tree was built and the
        # cluster listed: say so while loading the file instead.
        if self.metrics_port is not None and self.metrics_port == self.port:
            raise ValueError(f"metricsPort must differ from port (both {self.port})")
        if self.inspect_port is not None and self.inspect_port in (self.port, self.metrics_port):
            raise ValueError(f"inspectPort {self.inspect_port} must differ from port and metricsPort")
        if self.paired_scheduler_health_url is not None and self.metrics_port is None:
            raise ValueError("pairedSchedulerHealthUrl is served on the metrics listener: set metricsPort too")
        return self

    @field_validator("paired_scheduler_health_url")
    @classmethod
    def _an_http_url_with_a_host(cls, url: str | None) -> str | None:
        if url is None:
            return None
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port that is no number or out of range
        except ValueError as error:
            raise ValueError(f"pairedSchedulerHealthUrl {url!r} does not read as a URL: {error}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"pairedSchedulerHealthUrl must be an http:// or https:// URL with a host, not {url!r}")
        return url


class ClusterSettings(_Section):
    """How cellfit reaches the Kubernetes API (watch cache of Nodes and Pods, bindings)."""

    mode: Literal["auto", "standalone", "kubeconfig", "in-cluster"] = Field(
        "auto",
        description=(
            "auto: in-cluster credentials when running in a pod, else $KUBECONFIG or "
            "~/.kube/config when present, else standalone. standalone: no API; node capacity "
            "comes only from the Node objects kube-scheduler sends, and bind is unavailable."
        ),
    )
    kubeconfig: str | None = Field(
        None, description="Path to a kubeconfig; set in mode auto, it makes the mode kubeconfig (a pod's ServiceAccount is not used)."
    )
    context: str | None = Field(
        None, description="kubeconfig context; default: current-context. Set in mode auto, it makes the mode kubeconfig."
    )
    watch_timeout_seconds: int = Field(
        300, ge=10, le=3600, description="Server-side timeout of one watch request before re-watching."
    )
    request_timeout_seconds: float = Field(
        10.0, gt=0, le=120, description="Client timeout of one API call (list, bind)."
    )

    @model_validator(mode="before")
    @classmethod
    def _named_kubeconfig_is_used(cls, data: Any) -> Any:
        # Mode auto takes a pod's ServiceAccount before any kubeconfig: one named here (or a
        # context) would be dropped without a word, so naming one chooses it.
        if isinstance(data, dict) and data.get("mode", "auto") == "auto" and (data.get("kubeconfig") or data.get("context")):
            return {**data, "mode": "kubeconfig"}
        return data

    @model_validator(mode="after")
    def _kubeconfig_only_where_read(self) -> ClusterSettings:
        if self.mode in ("standalone", "in-cluster") and (self.kubeconfig is not None or self.context is not None):
            raise ValueError(f"kubeconfig and context are read only in mode kubeconfig; mode is {self.mode}")
        return self


PolicyName = Literal["auto", "hived", "resource-fit"]


class PolicySettings(_Section):
    """Which decisions the engine makes."""

    name: PolicyName = Field(
        "auto",
        description=(
            "hived: HiveD virtual clusters of GPU cells (section cells). resource-fit: CPU, "
            "memory and GPU requests against allocatable minus bound pods. auto: hived when "
            "cells.topology is set or a cluster is connected (cells discovered from its Nodes), "
            "resource-fit otherwise."
        ),
    )
    gpu_resource_name: str = Field(
        RESOURCE_NVIDIA_GPU, min_length=1, description="Extended resource that counts GPUs."
    )
    rack_label: str | None = Field(
        LABEL_RACK,
        description="Node label naming a node's rack; discovery groups racks into rack cells. null: no rack level.",
    )
    offer_best_nodes: int | None = Field(
        None,
        ge=1,
        description=(
            "resource-fit: the filter passes on only this many of the nodes that fit, those "
            "cellfit's prioritize scores highest (ties: kube-scheduler's order). With 1, "
            "kube-scheduler neither scores nodes with its own plugins nor calls prioritize, as "
            "under HiveD, whose filter keeps one node: less CPU per pod, but kube-scheduler's "
            "scorers (spreading, preferred affinity) no longer weigh in. null: every node that fits."
        ),
    )


class PreemptionSettings(_Section):
    """How victims are chosen when kube-scheduler asks to preempt (FitGpp, arXiv:1902.01613)."""

    policy: Literal["fitgpp", "placement"] = Field(
        "fitgpp",
        description=(
            "fitgpp: trial pods preempt the best-effort pod cheapest to suspend and quickest to "
            "resume; best-effort pods never preempt. placement: the placement policy's own "
            "choice (resource-fit: the fewest lowest-priority pods; hived: opportunistic pods)."
        ),
    )
    grace_period_weight: float = Field(
        4.0, ge=0, allow_inf_nan=False, description="FitGpp's s: weight of the grace period against size (dimensionless)."
    )
    max_preemptions: int | None = Field(
        1, ge=0, description="FitGpp's P: how often one job may be preempted; null: no limit."
    )
    seed: int = Field(0, description="Seed of the fallback's random order (no single victim suffices).")
    resume_hold_seconds: float | None = Field(
        120.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "The room FitGpp's victims leave on a node is kept for their preemptor until it is "
            "bound, then for the preempted Job's next pod, turning away lower-priority pods that "
            "would take it, so the preemptor and then the resumed Job go first; a hold gives up "
            "this many seconds after it first turned a pod away (the pod it keeps room for may "
            "never be placed there). null: until that pod is bound."
        ),
    )


class AdmissionSettings(_Section):
    """The admission webhooks, served over HTTPS on a listener of its own.

    The pod-create webhook gives the new pods of a best-effort Job that FitGpp preempted the
    resumed PriorityClass, so that kube-scheduler takes them before other best-effort pods (the
    head of the BE queue), and rewrites a placed Job's pods; it never refuses a pod. The
    validating webhook checks cellfit's labels and annotations on new Pods and on new and
    updated Jobs (warnings, or refusals with rejectInvalid). The API server must trust the
    certificate (the chart makes one and registers the webhooks with its CA).
    """

    enabled: bool = Field(False, description="Serve the webhook (needs certFile and keyFile).")
    host: str = Field("0.0.0.0", min_length=1, description="Address of the webhook listener; the API server calls it.")
    port: int = Field(9443, ge=1, le=65535, description="TCP port of the webhook listener (HTTPS).")
    cert_file: str | None = Field(None, description="PEM certificate (chain) the listener presents.")
    key_file: str | None = Field(None, description="PEM private key of certFile.")
    cert_reload_seconds: float = Field(
        60.0,
        gt=0,
        description=(
            "How often certFile and keyFile are checked for a new pair (a rotated Secret, a "
            "renewal), which new connections then get without a restart."
        ),
    )
    resumed_priority_class: str = Field(
        "cellfit-resumed",
        min_length=1,
        description=(
            "PriorityClass given to new pods of preempted best-effort Jobs: its value should lie "
            "between the trial and best-effort classes'. Read from the API server (value and "
            "preemptionPolicy), so it must exist; while it does not, pods keep their own class."
        ),
    )
    reject_invalid: bool = Field(
        False,
        description=(
            "false: a Pod or Job whose cellfit labels or annotations cellfit cannot use is "
            "admitted with a warning per problem (kubectl apply prints them); true: it is "
            "refused, the message naming each field (an update only for a problem it brings). "
            "Unknown or misplaced cellfit.io/ keys are only ever warned about."
        ),
    )

    @model_validator(mode="after")
    def _certificate_when_enabled(self) -> AdmissionSettings:
        if self.enabled:
            missing = [name for name, value in (("certFile", self.cert_file), ("keyFile", self.key_file)) if not value]
            if missing:
                raise ValueError(f"{' and '.join(missing)} must be set when enabled is true (the API server calls webhooks over HTTPS)")
        return self


class AlloxSettings(_Section):
    """AlloX admission and the placer (placer/README.md): estimated interchangeable Jobs are
    queued, matched to the cluster's GPUs and CPU slots by min-cost matching (AlloX §3), and the
    ones that start now are put in the chosen configuration and unsuspended."""

    enabled: bool = Field(True, description="Admit interchangeable Jobs (when connected to a cluster).")
    policy: Literal["allox", "allox+"] = Field(
        "allox", description="allox: Algorithm 2 with fairness alpha; allox+: §4.4's heuristic for very large queues."
    )
    alpha: float = Field(
        0.1, ge=0, le=1, allow_inf_nan=False,
        description="Fairness (§3.3): the share of users, by least progress, whose Jobs are matched (1: all, pure performance).",
    )
    allox_plus_timeout_seconds: float | None = Field(
        None, gt=0, description="AlloX+: a Job that waited this long goes first; null: never."
    )
    user_label: str | None = Field(
        None, description="Label on the Job naming its user for fairness; null: the Job's namespace."
    )
    reserved_cpu_per_gpu: float = Field(
        1.0, ge=0, allow_inf_nan=False, description="Cores kept beside each GPU for its Job before CPU slots are cut (§4.4)."
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Labels a node must carry for AlloX to count its GPUs and CPU slots as machines (the "
            "nodes interchangeable Jobs run on: the placer adds them to every placed pod's node "
            "selector, and the estimator to its sampling pods'); empty: every Ready node."
        ),
    )
    mechanism: Literal["auto", "template", "webhook"] = Field(
        "auto",
        description=(
            "How a placed Job's pods get the configuration: template (patch the suspended Job's pod "
            "template; needs KEP-5440, Kubernetes >= 1.36), webhook (the pod-create webhook rewrites "
            "each pod; needs admission.enabled), auto (template, else webhook)."
        ),
    )
    debounce_seconds: float = Field(
        1.0, ge=0, allow_inf_nan=False, description="Changes within this long share one matching."
    )
    omega_grid_seconds: float = Field(
        60.0,
        ge=0,
        allow_inf_nan=False,
        description=(
            "Busy machines' expected end (ω) is rounded up to this grid (ten steps, then 25% wider "
            "ones) so that machines freeing close together share one column of the matching; 0: "
            "exact. Lower it when Jobs run for seconds rather than minutes."
        ),
    )
    solver_process: bool = Field(
        True,
        description=(
            "Solve the matching in a child process: a large matching holds the interpreter for "
            "tens of milliseconds or more, which the extender's verbs would otherwise wait behind."
        ),
    )
    solver_timeout_seconds: float = Field(
        60.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description=(
            "With solverProcess: a solver process that answers nothing for this long (stopped, or "
            "stuck) is killed, that pass starts no Job and the next starts another process. A "
            "matching of thousands of Jobs takes tens of milliseconds there. A new process is given "
            "at least 60 s for its start (an interpreter importing the matching) and first answer."
        ),
    )
    resync_seconds: float = Field(10.0, gt=0, allow_inf_nan=False, description="A matching at least this often (capacity freed by other pods).")
    decision_budget_seconds: float | None = Field(
        None,
        gt=0,
        le=1800,
        allow_inf_nan=False,
        description=(
            "Seconds one decision's Algorithm 2 walk may run before it stops (after its first start): "
            "the Jobs it started so far start, the free machines it did not visit are decided by a "
            "pass run at once. With many users at a small alpha a decision takes seconds to minutes "
            "(1,000 users: 4-6 s of CPU), and past solverTimeoutSeconds the solver process was killed at every "
            "pass and no Job started. null: 10 with solverProcess (it only delays starts; at most a "
            "quarter of solverTimeoutSeconds), 1 without (the walk holds the interpreter the "
            "extender's verbs need). With solverProcess at most half of solverTimeoutSeconds."
        ),
    )

    @model_validator(mode="after")
    def _budget_within_solver_timeout(self) -> AlloxSettings:
        if self.solver_process and self.decision_budget_seconds is not None and self.decision_budget_seconds > self.solver_timeout_seconds / 2:
            raise ValueError(
                f"decisionBudgetSeconds ({self.decision_budget_seconds:g}) must be at most half of solverTimeoutSeconds "
                f"({self.solver_timeout_seconds:g}): the solver process reads, decides past its budget up to one visit, "
                "and writes its answer within solverTimeoutSeconds, or is killed and the pass starts no Job"
            )
        return self

    @property
    def decision_budget(self) -> float:
        """decisionBudgetSeconds, or its default for ``solver_process`` (seconds)."""
        if self.decision_budget_seconds is not None:
            return self.decision_budget_seconds
        return min(DEFAULT_DECISION_BUDGET_SECONDS, self.solver_timeout_seconds / 4) if self.solver_process else DEFAULT_IN_PROCESS_BUDGET_SECONDS


# allox.decisionBudgetSeconds' defaults: in the solver process a longer walk only delays starts;
# in process it holds the interpreter the extender's verbs need.
DEFAULT_DECISION_BUDGET_SECONDS = 10.0
DEFAULT_IN_PROCESS_BUDGET_SECONDS = 1.0


class EstimatorSettings(_Section):
    """The sampling-pod estimator (estimator/README.md): Jobs with ``cellfit.io/configurations``
    are run briefly in each configuration and their processing times written to
    ``cellfit.io/estimate``. Runs only with a cluster connection."""

    enabled: bool = Field(True, description="Sample interchangeable Jobs (when connected to a cluster).")
    priority_class_name: str | None = Field(
        "cellfit-sampling",
        description=(
            "PriorityClass of sampling pods: below trial, above best-effort (SLearn's sampling "
            "queue). It must exist; null keeps the Job template's class."
        ),
    )
    scheduler_name: str = Field("cellfit", min_length=1, description="schedulerName of sampling pods.")
    max_cluster_share: float = Field(
        0.1,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "Sampling pods together request at most this share of the cluster's CPUs and of its "
            "GPUs (AlloX §4.4); one sampling pod may always run, so sampling never stalls."
        ),
    )
    short_fraction: float = Field(0.01, gt=0, lt=0.5, description="Short sample: this fraction of the Job's iterations.")
    long_fraction: float = Field(0.02, gt=0, lt=0.5, description="Long sample: this fraction of the Job's iterations.")
    short_after_long: bool = Field(
        True,
        description=(
            "Run a configuration's short sample only after its long one, and not at all when the long "
            "one reports the time it reached at the short length (splits in its termination message): "
            "one start-up paid instead of two. false: both at once (sampling ends sooner for workloads "
            "that report no splits)."
        ),
    )
    thin_limit: int = Field(3, ge=1, description="Jobs with fewer pods are sampled as one pod, never a pilot set (SLearn).")
    max_pilots: int = Field(16, ge=1, description="Most pilot pods sampled of one wide Job.")
    long_factor: float = Field(
        10.0, gt=1, allow_inf_nan=False, description="A sample running this many times what its peers predict is stopped as long."
    )
    long_min_seconds: float = Field(120.0, ge=0, allow_inf_nan=False, description="... but never before this many seconds.")
    max_attempts: int = Field(3, ge=1, le=20, description="Runs of one sample before its configuration counts as failed.")
    pending_limit_seconds: float = Field(
        1800.0,
        ge=60,
        allow_inf_nan=False,
        description=(
            "Seconds a sampling pod may stay Pending after its creation (unscheduled, or scheduled "
            "and never started: a volume that never attaches) before the run counts as failed: "
            "deleted and retried, up to maxAttempts. At least 60: a pod pulling its image is "
            "Pending too. Raise it where GPUs are scarce, or a GPU configuration fails after "
            "maxAttempts waits and AlloX sees only CPU."
        ),
    )
    nodes_may_join: list[dict[str, str]] = Field(
        default_factory=list,
        description=(
            "Node pools an autoscaler scales up from zero (cluster-autoscaler, Karpenter), each the labels "
            "its nodes carry beyond allox.nodeSelector's, e.g. [{pool: cpu-big}]. A configuration whose "
            "node selector (or required node affinity) no current node meets, but a node carrying one "
            "entry's labels would, is sampled anyway: its sampling pod stays Pending, which is what makes "
            "the autoscaler add the node, for up to pendingLimitSeconds a run and maxAttempts runs. One only "
            "such a pool runs is not judged by the sizes of the pool's nodes up now (the autoscaler sizes "
            "the node it adds), and AlloX starts it though no node of it is up. Empty: a configuration no "
            "current node meets is not sampled."
        ),
    )
    running_alone_warning_seconds: float = Field(
        3600.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Seconds a sample may run with no sample of its Job finished (so no long deadline) "
            "before a SampleRunningAlone Warning Event tells the Job's user."
        ),
    )
    history_skip_cov: float = Field(
        0.05, ge=0, allow_inf_nan=False,
        description="A Job family whose past runs vary less than this (σ0/μ) skips sampling ...",
    )
    history_skip_min_jobs: int = Field(3, ge=1, description="... once it has this many past Jobs.")
    history_window: int = Field(20, ge=1, description="Past Jobs of a family the prior is computed from (most recent).")
    memory_headroom: float = Field(1.25, ge=1, allow_inf_nan=False, description="Memory demand = the samples' peak times this.")
    timing_noise_fraction: float = Field(
        0.02, gt=0, lt=1, allow_inf_nan=False, description="Relative timing noise of one sample (one standard deviation)."
    )
    resync_seconds: float = Field(
        5.0, gt=0, allow_inf_nan=False,
        description="How often running samples are checked against their long deadline and the budget is refilled.",
    )

    @field_validator("nodes_may_join")
    @classmethod
    def _each_pool_named(cls, pools: list[dict[str, str]]) -> list[dict[str, str]]:
        # An empty entry (a YAML slip, "- {}") or label key names no pool an admin means: refused,
        # not read as a node carrying allox.nodeSelector's labels alone.
        for index, labels in enumerate(pools):
            if not labels or not all(labels):
                raise ValueError(f"nodesMayJoin[{index}]: name the labels of the autoscaled pool's nodes (a key each, not empty)")
        return pools

    @model_validator(mode="after")
    def _short_below_long(self) -> EstimatorSettings:
        if self.short_fraction >= self.long_fraction:
            raise ValueError("shortFraction must be below longFraction (two sample lengths fit start-up and rate)")
        return self


class LeaderElectionSettings(_Section):
    """Which replica runs the live drivers (the estimator, AlloX admission and the placer, the
    requeue nudge): the holder of a coordination.k8s.io Lease of cellfit's own. Every replica
    serves the extender verbs to the kube-scheduler beside it, leader or not; a standby starts
    the drivers within leaseDurationSeconds (plus one retryPeriodSeconds) of the leader's last
    renewal."""

    enabled: bool = Field(
        True, description="Elect a leader (when connected to a cluster); false: every replica runs the drivers."
    )
    lease_name: str = Field("cellfit-controllers", min_length=1, max_length=253, description="The Lease's name.")
    namespace: str | None = Field(
        None, description="The Lease's namespace; null: the pod's own (its service account's), else default."
    )
    identity: str | None = Field(
        None,
        description=(
            "This replica's name in the Lease; null: the host name (the pod's name, unique per replica, "
            "and the same after a container restart, which then takes the Lease back at once)."
        ),
    )
    lease_duration_seconds: int = Field(
        15, ge=2, le=300,
        description="A standby takes over once the Lease has gone unrenewed this long.",
    )
    renew_deadline_seconds: float = Field(
        10.0, gt=0, allow_inf_nan=False,
        description="The leader stops its drivers when it could not renew for this long (< leaseDurationSeconds).",
    )
    retry_period_seconds: float = Field(
        2.0, gt=0, allow_inf_nan=False, description="How often the Lease is renewed, or tried for by a standby."
    )

    @model_validator(mode="after")
    def _deadlines_in_order(self) -> LeaderElectionSettings:
        if not self.retry_period_seconds < self.renew_deadline_seconds < self.lease_duration_seconds:
            raise ValueError(
                "leaderElection: need retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds "
                f"(got {self.retry_period_seconds}, {self.renew_deadline_seconds}, {self.lease_duration_seconds})"
            )
        return self


class NudgeSettings(_Section):
    """After an outage, pods kube-scheduler parked as unschedulable are retried within seconds,
    not at its 5-minute flush: the leader lists the profile's pending pods and, when some were
    found unschedulable before it took charge or met an extender error, makes kube-scheduler
    requeue them (scheduler/cluster/nudge.py)."""

    enabled: bool = Field(
        True,
        description="Nudge (when connected to a cluster): the leader's pass over parked pods, and on every replica a "
                    "signal once the victims of its preemptions are gone.",
    )
    scheduler_name: str = Field("cellfit", min_length=1, description="The kube-scheduler profile whose pending pods are watched.")
    period_seconds: float = Field(
        5.0, ge=0.5, le=600, allow_inf_nan=False, description="How often the leader lists the profile's pending pods."
    )
    min_interval_seconds: float = Field(
        10.0, ge=1, le=3600, allow_inf_nan=False,
        description="At most one requeue signal (two API calls; kube-scheduler retries every parked pod once) this "
                    "often, from the leader's pass and from each replica's signals after preemption alike.",
    )
    signal_image: str = Field(
        REQUEUE_SIGNAL_IMAGE, min_length=1, max_length=512, pattern=r"^[^\s]+$",
        description="The image the requeue signal pod names. It never runs (the pod is bound to a node that does not "
                    "exist), so it is never pulled; a cluster whose admission allows only its own registry names one "
                    "from there.",
    )


class ExchangeSettings(_Section):
    """HiveD's cell exchange (scheduler/cells/README.md, "Cell exchange"): tenants post CellOffer
    and CellRequest objects in namespaces labelled with their VC; the leader matches them and
    records each match in a ConfigMap (the ledger, in the leader election's namespace), and every
    replica moves the VCs' quotas at the windows' edges."""

    enabled: bool = Field(True, description="Run the exchange (when connected to a cluster and the policy is hived).")
    return_grace_seconds: float | None = Field(
        300.0, ge=0, le=7 * 86400, allow_inf_nan=False,
        description=(
            "Guaranteed pods still on cells that changed hands this long after a window opened (the "
            "lender's) or ended (the borrower's) are preempted; null: they drain, however long they run."
        ),
    )
    ledger_name: str = Field(
        "cellfit-exchange-ledger", min_length=1, max_length=253,
        description="The ConfigMap keeping every match and so each VC's surplus (restart-safe).",
    )
    resync_seconds: float = Field(
        10.0, ge=0.5, le=3600, allow_inf_nan=False,
        description="A round runs on every change of the objects, at every window edge, and at least this often.",
    )


class ReclaimSettings(_Section):
    """HiveD's guarantee whatever the pods' PriorityClasses (scheduler/cluster/reclaim.py,
    scheduler/cluster/stranded.py): kube-scheduler preempts only pods of lower priority than the
    preemptor, and never calls cellfit for a pod whose every node its own filters found full, so
    a guaranteed pod waiting for opportunistic pods of equal or higher priority on its VC's cells
    would wait for ever. The leader books such a pod's cells itself once kube-scheduler has found
    it unschedulable for ``afterSeconds``, and deletes those opportunistic pods (DisruptionTarget
    first, each with its own grace period) once the pod has waited ``afterSeconds`` for them;
    lower-priority ones are left to kube-scheduler."""

    enabled: bool = Field(True, description="Reclaim (when connected to a cluster and the policy is hived).")
    after_seconds: float = Field(
        30.0, ge=0, le=86400, allow_inf_nan=False,
        description="Seconds a guaranteed pod waits, unschedulable or for its cells, as the leader sees it, before its "
                    "cells are booked and their opportunistic pods of equal or higher priority deleted: kube-scheduler's "
                    "preemption has the first chance.",
    )
    period_seconds: float = Field(
        5.0, ge=0.5, le=600, allow_inf_nan=False,
        description="Seconds between the leader's looks at the guaranteed pods waiting for cells.",
    )


class LoggingSettings(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["json", "text"] = Field("json", description="json: one object per line.")


class Settings(_Section):
    """The whole configuration file."""

    server: ServerSettings = ServerSettings()
    cluster: ClusterSettings = ClusterSettings()
    policy: PolicySettings = PolicySettings()
    cells: CellsConfig = Field(
        default_factory=CellsConfig,
        description="HiveD topology and virtual clusters (scheduler/cells/README.md).",
    )
    preemption: PreemptionSettings = PreemptionSettings()
    admission: AdmissionSettings = AdmissionSettings()
    estimator: EstimatorSettings = EstimatorSettings()
    allox: AlloxSettings = AlloxSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    nudge: NudgeSettings = NudgeSettings()
    exchange: ExchangeSettings = ExchangeSettings()
    reclaim: ReclaimSettings = ReclaimSettings()
    logging: LoggingSettings = LoggingSettings()

    @model_validator(mode="after")
    def _listeners_on_different_ports(self) -> Settings:
        if self.admission.enabled and self.admission.port in (self.server.port, self.server.metrics_port, self.server.inspect_port):
            raise ValueError(
                f"admission.port {self.admission.port} is already server.port, server.metricsPort or server.inspectPort"
            )
        return self

    def resolved_policy(self, *, connected: bool) -> Literal["hived", "resource-fit"]:
        """The policy that runs: ``auto`` decided by what HiveD has to build its cells from."""
        if self.policy.name != "auto":
            return self.policy.name
        return "hived" if self.cells.topology is not None or connected else "resource-fit"


@dataclass(frozen=True)
class ConfigFile:
    """The file ``cellfit serve`` runs on and its settings as loaded, before command-line
    overrides: what live reload compares the file's next content with (the overrides stay)."""

    path: str
    settings: Settings
    # :func:`config_digest` of the text ``settings`` were parsed from: live reload's first look
    # parses the file again only when it has changed since (a parse runs in a child process,
    # ~0.4 s of CPU, which a start that read the file a moment ago need not pay).
    digest: bytes | None = None


def config_digest(text: str) -> bytes:
    """What tells one content of a configuration file from another (live reload compares it)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def default_config_text() -> str:
    """The embedded default configuration, as shipped and documented."""
    return resources.files("scheduler").joinpath("default-config.yaml").read_text(encoding="utf-8")


def parse_settings(text: str, *, source: str = "<config>") -> Settings:
    """Validate a configuration file's text; :class:`ConfigError` names the field otherwise.
    Bounded (``scheduler.safe_yaml``: size, nesting, aliases, duplicate keys; the cell tree's
    size in ``scheduler.cells``), so a hostile file is refused in milliseconds, not after
    exhausting memory, and no message echoes more than the start of a long value."""
    try:
        document: Any = load_yaml(text)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(document).__name__}")
    try:
        settings = Settings.model_validate(document)
    except ValidationError as error:
        raise ConfigError(f"{source}: {describe_validation_error(error, document=document)}") from None
    check_cells(settings, source=source)
    return settings


def check_cells(settings: Settings, *, source: str) -> str | None:
    """Prove a configured HiveD topology sound and its VCs feasible (a summary), or say why not.
    Without a topology the VCs are checked against the discovered cells at startup."""
    if settings.cells.topology is None:
        return None
    try:
        return check_config(settings.cells, prefix="cells").summary
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None


def load_settings(path: str | Path | None) -> Settings:
    """Read and validate a config file; ``None`` gives the embedded default."""
    if path is None:
        return parse_settings(default_config_text(), source="embedded default")
    return parse_settings(read_config_text(path), source=str(path))


def read_config_text(path: str | Path) -> str:
    """The file's text, or a ConfigError saying why it cannot be read. Separate from parsing so
    that a live reload can tell a file briefly missing from one that is invalid. Reads at most
    one byte past the size limit: a 10 GB file is refused, not loaded."""
    limit = YAML_LIMITS.max_bytes
    try:
        with Path(path).open("rb") as file:
            data = file.read(limit + 1)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    if len(data) > limit:
        raise ConfigError(f"{path}: is larger than {limit:,} bytes, the most a configuration file may hold")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: cannot read: not UTF-8 (byte {error.start:,})") from None


def describe_validation_error(error: ValidationError, *, document: Any = None) -> str:
    """``server.port: Input should be ... (got 70000); server.prot: unknown key (misspelled?)``;
    the first problems of a long list, each value cut to its start. ``document``: the file as
    read, whose shape names each field as the user wrote it (:func:`written_path`)."""
    shown = [_describe(item, document) for item in error.errors()[:MAX_PROBLEMS]]
    return first_problems(shown, separator="; ", total=error.error_count())


def _describe(error: Any, document: Any) -> str:
    field = written_path(error["loc"], document) if error["loc"] else "(top level)"
    message = error["msg"]
    if error["type"] == "value_error" and isinstance((error.get("ctx") or {}).get("error"), ValueError):
        message = str(error["ctx"]["error"])  # a validator's own sentence, without pydantic's "Value error, "
    if error["type"] == "extra_forbidden":
        message = "unknown key (misspelled?)"
    elif error["type"] not in ("missing",) and "input" in error:
        message = f"{message} (got {quoted(error['input'])})"
    return f"{field}: {message}"
