"""Every name cellfit shares with the outside world: annotation and label keys, resource names,
URL paths. One module so that a rename is one edit and a grep finds every use."""

from typing import Final

DOMAIN: Final = "cellfit.io"

# --- labels users set (see DESIGN.md "The user's contract") ---
LABEL_VIRTUAL_CLUSTER: Final = f"{DOMAIN}/virtual-cluster"
LABEL_JOB_CLASS: Final = f"{DOMAIN}/job-class"
LABEL_PRIORITY: Final = f"{DOMAIN}/priority"

JOB_CLASS_TRIAL: Final = "trial"
JOB_CLASS_BEST_EFFORT: Final = "best-effort"
PRIORITY_GUARANTEED: Final = "guaranteed"
PRIORITY_OPPORTUNISTIC: Final = "opportunistic"
# The VC of pods without the label, and the one VC owning every cell when none are configured.
DEFAULT_VIRTUAL_CLUSTER: Final = "default"

# --- annotations users set ---
ANNOTATION_CELL_TYPE: Final = f"{DOMAIN}/cell-type"
ANNOTATION_GANG: Final = f"{DOMAIN}/gang"
# Pods in a gang: set by users, or by the placer from the Job's spec.parallelism.
ANNOTATION_GANG_SIZE: Final = f"{DOMAIN}/gang-size"
ANNOTATION_CONFIGURATIONS: Final = f"{DOMAIN}/configurations"
ANNOTATION_ITERATIONS: Final = f"{DOMAIN}/iterations"

# --- annotations cellfit writes (its durable state) ---
ANNOTATION_BIND_INFO: Final = f"{DOMAIN}/bind-info"
ANNOTATION_GPU_INDICES: Final = f"{DOMAIN}/gpu-indices"
ANNOTATION_ESTIMATE: Final = f"{DOMAIN}/estimate"
ANNOTATION_PLACEMENT: Final = f"{DOMAIN}/placement"
ANNOTATION_PREEMPTIONS: Final = f"{DOMAIN}/preemptions"
# On a Job AlloX started: the start (status.startTime) of the run in which cellfit saw one of
# its pods bound to AlloX's nodes. A restarted cellfit (or the replica taking the lead) reads it
# back, so a Job whose pods ran and now wait to be placed again is not suspended again as one
# none of whose pods was ever bound; the Job controller resets the start time when the Job is
# suspended and started again, so a record of an earlier run proves nothing of this one.
ANNOTATION_PODS_BOUND: Final = f"{DOMAIN}/pods-bound"
# On a pending guaranteed pod: the cells the leader's reclaim booked for it (bind-info's format),
# written before any victim is deleted, so that every replica's engine keeps them for it.
ANNOTATION_RECLAIM_BOOKING: Final = f"{DOMAIN}/reclaim-booking"
# On a pending pod: the node the preempt verb's victims for it leave (FitGpp's for a trial pod,
# HiveD's reclaim for a guaranteed one) and their UIDs (scheduler/preemption/records.py),
# written by the replica that answered, so that a restarted replica keeps that node's room for
# the pod while its preemption is in progress (the victims leaving, or gone while it waits);
# emptied by the pod's binding.
ANNOTATION_PREEMPTOR_HOLD: Final = f"{DOMAIN}/preemptor-hold"
# On a preempted best-effort Job: each of its pods FitGpp preempted whose successor has room kept
# on that pod's node (a resume hold, scheduler/preemption/holds.py), by the pod's UID, until a pod
# of the Job is bound or the hold gives up (scheduler/preemption/resume_records.py). Written by the
# replica that decided, taken off by the one where the hold ended, so that a restart at any moment
# (the preemptor pending or bound, the victims leaving or gone) keeps the room the decision kept.
ANNOTATION_RESUME_HOLDS: Final = f"{DOMAIN}/resume-holds"
# On a Job whose gang FitGpp preempted whole: its members on other nodes than the preemption's
# not deleted yet, each with its preemption (scheduler/preemption/gang_records.py), so that a
# replica deletes them should the one that decided have stopped, though the preemptor's own
# record (cellfit.io/preemptor-hold) went with it; taken off each member once it is deleted.
ANNOTATION_GANG_PREEMPTED: Final = f"{DOMAIN}/gang-preempted"
# On a placed Job's pod template (so on its pods): the configuration AlloX chose, which the
# pod-create webhook rewrites the pod into.
LABEL_PLACEMENT: Final = f"{DOMAIN}/placement"
# Beside it on the placed template (so on its pods): the names of the template's containers,
# comma-separated, the only ones the webhook gives the configuration (a sidecar another webhook
# injects into the pod keeps its own resources).
ANNOTATION_CONFIGURED_CONTAINERS: Final = f"{DOMAIN}/configured-containers"

# The short-lived pod cellfit creates and deletes so that kube-scheduler retries the pods it
# parked while cellfit was away (scheduler/cluster/nudge.py): its label, and the node it is bound
# to, which never exists (".invalid" is a reserved top-level domain), so nothing ever runs it.
LABEL_REQUEUE_SIGNAL: Final = f"{DOMAIN}/requeue-signal"
REQUEUE_SIGNAL_NODE: Final = "cellfit-requeue.invalid"
# The kube-scheduler profile of a pod that names none.
KUBE_DEFAULT_SCHEDULER: Final = "default-scheduler"
# The requeue signal pod's default image: it never runs, so it is never pulled (nudge.signalImage).
REQUEUE_SIGNAL_IMAGE: Final = "registry.k8s.io/pause:3.10"

# --- resource names ---
RESOURCE_CPU: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"
RESOURCE_NVIDIA_GPU: Final = "nvidia.com/gpu"

# --- GPU Feature Discovery node labels ---
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
LABEL_GPU_COUNT: Final = "nvidia.com/gpu.count"
# The rack a node sits in (set by the cluster admin, or by the e2e harness on fake nodes).
LABEL_RACK: Final = f"topology.{DOMAIN}/rack"

# --- HTTP surface ---
EXTENDER_URL_PREFIX: Final = "/v1/extender"
VERB_FILTER: Final = "filter"
VERB_PRIORITIZE: Final = "prioritize"
VERB_PREEMPT: Final = "preempt"
VERB_BIND: Final = "bind"
EXTENDER_VERBS: Final = (VERB_FILTER, VERB_PRIORITIZE, VERB_PREEMPT, VERB_BIND)
PATH_HEALTHZ: Final = "/healthz"
PATH_READYZ: Final = "/readyz"
PATH_METRICS: Final = "/metrics"
# On the metrics listener: whether the kube-scheduler beside this cellfit is alive, and this
# cellfit with it (the chart's kube-scheduler liveness probe with several replicas).
PATH_HEALTHZ_KUBE_SCHEDULER: Final = "/healthz/kube-scheduler"
INSPECT_URL_PREFIX: Final = "/v1/inspect"
# The pod-create admission webhook (served on admission.port, HTTPS).
ADMISSION_PODS_PATH: Final = "/v1/admission/pods"
# The validating webhook (same listener): cellfit's labels and annotations on new Pods and on
# new and updated Jobs.
ADMISSION_VALIDATE_PODS_PATH: Final = "/v1/admission/validate/pods"
ADMISSION_VALIDATE_JOBS_PATH: Final = "/v1/admission/validate/jobs"

# kube-scheduler's MaxExtenderPriority (k8s.io/kube-scheduler/extender/v1).
MAX_EXTENDER_PRIORITY: Final = 10

DEFAULT_PORT: Final = 8888
SCHEDULER_NAME: Final = "cellfit"

# --- cell exchange (HiveD §3.3; charts/cellfit/crds/) ---
EXCHANGE_GROUP: Final = DOMAIN
EXCHANGE_VERSION: Final = "v1alpha1"
EXCHANGE_API_VERSION: Final = f"{EXCHANGE_GROUP}/{EXCHANGE_VERSION}"
KIND_CELL_OFFER: Final = "CellOffer"
KIND_CELL_REQUEST: Final = "CellRequest"
CELL_OFFERS_PATH: Final = f"/apis/{EXCHANGE_API_VERSION}/celloffers"
CELL_REQUESTS_PATH: Final = f"/apis/{EXCHANGE_API_VERSION}/cellrequests"
# The inspect view of current exchanges (under INSPECT_URL_PREFIX).
INSPECT_EXCHANGES_PATH: Final = "/exchanges"

# How long kube-scheduler's cache may still count a pod cellfit's watch has seen gone (seconds):
# both get the same deletion from the API server, and the gap is the events' delivery, well
# under a second (live, user24b: the preempt verb 5 ms after cellfit's watch saw the pod gone,
# kube-scheduler's binding on the freed node 1 s later); 5 s covers a loaded API server. What
# waits for that lag (FitGpp's kept room, HiveD's freed cells) waits no longer: past it
# kube-scheduler refuses the node for a reason of its own. Not cells.victimExitMarginSeconds,
# the scale of a pod's exit overstaying its grace period.
CACHE_LAG_SECONDS: Final = 5.0
