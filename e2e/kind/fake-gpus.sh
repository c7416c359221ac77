#!/usr/bin/env bash
# Make nodes look like NVIDIA GPU nodes to the scheduler, without GPUs or a device plugin:
# the "Advertise Extended Resources for a Node" recipe (a status patch of capacity and
# allocatable) plus the labels GPU Feature Discovery would set.
#
#   e2e/kind/fake-gpus.sh [--gpus 8] [--product NVIDIA-A100-SXM4-80GB] [--memory-mb 81920] NODE...
#   e2e/kind/fake-gpus.sh --selector cellfit.io/fake-gpu=true
#
# Pods requesting nvidia.com/gpu are then scheduled onto these nodes and their containers
# start (nothing checks the GPUs exist); workloads that really touch a GPU fail, so use images
# that do not (the e2e suite's pods run on KWOK nodes and never start a container).
# The kubelet may reset extended resources it does not manage when it re-registers the node
# (e.g. after the node container restarts): run this again then.
set -euo pipefail
GPUS=8 PRODUCT=NVIDIA-A100-SXM4-80GB MEMORY_MB=81920 SELECTOR="" NODES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus) GPUS="$2"; shift 2 ;;
    --product) PRODUCT="$2"; shift 2 ;;
    --memory-mb) MEMORY_MB="$2"; shift 2 ;;
    --selector) SELECTOR="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) NODES+=("$1"); shift ;;
  esac
done
KUBECTL="${KUBECTL:-kubectl}"
if [ -n "$SELECTOR" ]; then
  while IFS= read -r name; do NODES+=("${name#node/}"); done < <("$KUBECTL" get nodes -l "$SELECTOR" -o name)
fi
[ "${#NODES[@]}" -gt 0 ] || { echo "fake-gpus.sh: no nodes given or selected" >&2; exit 2; }

patch="$(printf '{"status":{"capacity":{"nvidia.com/gpu":"%s"},"allocatable":{"nvidia.com/gpu":"%s"}}}' "$GPUS" "$GPUS")"
for node in "${NODES[@]}"; do
  "$KUBECTL" patch node "$node" --subresource=status --type=merge -p "$patch" >/dev/null
  "$KUBECTL" label node "$node" --overwrite >/dev/null \
    nvidia.com/gpu.present=true \
    nvidia.com/gpu.product="$PRODUCT" \
    nvidia.com/gpu.count="$GPUS" \
    nvidia.com/gpu.memory="$MEMORY_MB" \
    nvidia.com/gpu.family=ampere \
    nvidia.com/gpu.machine=kind
  echo "fake-gpus.sh: $node advertises $GPUS x $PRODUCT"
done
