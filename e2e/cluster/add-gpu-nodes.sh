#!/usr/bin/env bash
# Create (or update) fake GPU nodes managed by kwok in the running e2e cluster.
#
#   e2e/cluster/add-gpu-nodes.sh COUNT [--gpus 8] [--product NVIDIA-A100-SXM4-80GB]
#       [--prefix gpu-node] [--start 0] [--rack NAME | --nodes-per-rack 2]
#       [--label key=value]... [--no-wait]
#
# Nodes are named PREFIX-<i> for i in START..START+COUNT-1. Rack label
# topology.cellfit.io/rack is NAME when --rack is given, else rack-<i / nodes-per-rack>.
# Each node: cpu 64, memory 512Gi, pods 110, nvidia.com/gpu GPUS (capacity = allocatable);
# GPU feature discovery labels nvidia.com/gpu.product, nvidia.com/gpu.count,
# nvidia.com/gpu.present; kwok conventions: annotation kwok.x-k8s.io/node=fake, label
# type=kwok, taint kwok.x-k8s.io/node=fake:NoSchedule (pods need a toleration);
# label cellfit.io/e2e-node=true on every node made here.
# --gpus 0 makes CPU-only nodes: no nvidia.com/gpu resource and none of the GPU labels (a node
# with GPUs made CPU-only by a re-run loses both).
# Re-running with other values updates labels and the status of existing nodes.
#
# Needs KUBECONFIG (or `. $CELLFIT_E2E_WORKDIR/cluster.env` first). KUBECTL picks the kubectl.
set -euo pipefail

usage() { sed -n '2,19p' "$0"; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
COUNT="$1"; shift
[[ "$COUNT" =~ ^[0-9]+$ ]] || { echo "[add-gpu-nodes] ERROR: COUNT must be a number, got '$COUNT'" >&2; exit 2; }

GPUS=8 PRODUCT=NVIDIA-A100-SXM4-80GB PREFIX=gpu-node START=0 RACK="" PER_RACK=2 WAIT=1
EXTRA_LABELS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus) GPUS="$2"; shift 2 ;;
    --product) PRODUCT="$2"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    --start) START="$2"; shift 2 ;;
    --rack|--rack-label) RACK="$2"; shift 2 ;;
    --nodes-per-rack) PER_RACK="$2"; shift 2 ;;
    --label) EXTRA_LABELS+=("$2"); shift 2 ;;
    --no-wait) WAIT=0; shift ;;
    *) echo "[add-gpu-nodes] ERROR: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$PER_RACK" -ge 1 ] || { echo "[add-gpu-nodes] ERROR: --nodes-per-rack must be >= 1" >&2; exit 2; }
[ -n "${KUBECONFIG:-}" ] || { echo "[add-gpu-nodes] ERROR: KUBECONFIG is not set (source \$CELLFIT_E2E_WORKDIR/cluster.env)" >&2; exit 2; }
KUBECTL="${KUBECTL:-${CELLFIT_E2E_KUBECTL:-kubectl}}"
[ "$COUNT" -gt 0 ] || exit 0

log() { printf '[add-gpu-nodes %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

resources() {
  printf '    cpu: "64"\n    memory: 512Gi\n    pods: "110"\n    ephemeral-storage: 1Ti\n'
  [ "$GPUS" = 0 ] || printf '    nvidia.com/gpu: "%s"\n' "$GPUS"
}

# GPU feature discovery's labels, which a node without GPUs does not carry.
gpu_labels() {
  [ "$GPUS" = 0 ] || printf '    nvidia.com/gpu.present: "true"\n    nvidia.com/gpu.product: "%s"\n    nvidia.com/gpu.count: "%s"\n' "$PRODUCT" "$GPUS"
}

names=()
manifest="$(mktemp)"
trap 'rm -f "$manifest"' EXIT
for (( i = START; i < START + COUNT; i++ )); do
  name="$PREFIX-$i"
  names+=("$name")
  rack="${RACK:-rack-$(( i / PER_RACK ))}"
  {
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    cellfit.io/e2e-node: "true"
    topology.cellfit.io/rack: "$rack"
$(gpu_labels)
EOF
    for kv in ${EXTRA_LABELS[@]+"${EXTRA_LABELS[@]}"}; do
      printf '    %s: "%s"\n' "${kv%%=*}" "${kv#*=}"
    done
    cat <<EOF
spec:
  taints:
  - key: kwok.x-k8s.io/node
    value: fake
    effect: NoSchedule
status:
  allocatable:
$(resources)
  capacity:
$(resources)
EOF
  } >> "$manifest"
done

existing="$("$KUBECTL" get nodes -o name 2>/dev/null || true)"
if [ "$GPUS" = 0 ]; then
  log "applying $COUNT node(s) ${names[0]}..${names[-1]}: CPU-only, no GPUs"
else
  log "applying $COUNT node(s) ${names[0]}..${names[-1]}: $GPUS x $PRODUCT each"
fi
"$KUBECTL" apply -f "$manifest" >/dev/null
# The apiserver keeps .status on create, but apply ignores it on update: patch the status of
# nodes that existed before so that a changed GPU count takes effect.
gpu_value="\"$GPUS\""
[ "$GPUS" = 0 ] && gpu_value=null  # a merge patch's null removes the resource
status_patch="$(printf '{"status":{"capacity":{"nvidia.com/gpu":%s},"allocatable":{"nvidia.com/gpu":%s}}}' "$gpu_value" "$gpu_value")"
for name in "${names[@]}"; do
  if grep -qx "node/$name" <<<"$existing"; then
    "$KUBECTL" patch node "$name" --subresource=status --type=merge -p "$status_patch" >/dev/null
  fi
done

if [ "$WAIT" = 1 ]; then
  "$KUBECTL" wait --for=condition=Ready --timeout=120s "${names[@]/#/node/}" >/dev/null \
    || { echo "[add-gpu-nodes] ERROR: nodes did not become Ready (is the kwok controller running?)" >&2; exit 1; }
  log "Ready: ${names[*]}"
fi
