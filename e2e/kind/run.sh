#!/usr/bin/env bash
# One command for users with Docker: a kind cluster with fake GPUs, cellfit's image built and
# loaded, the chart installed and smoke-tested for real, then the same e2e suite the local
# control plane runs (test_chart, test_scenarios, test_extender_wiring).
#
#   e2e/kind/run.sh [--keep] [--no-suite] [-- PYTEST_ARGS...]
#
# Needs: docker, kind (a release that publishes a kindest/node image of the chosen Kubernetes),
# kubectl, helm 3, python 3.11 with `pip install -e ".[test]"`, and internet access
# (kindest/node, registry.k8s.io/kube-scheduler, KWOK's release manifests).
# Environment: KIND_CLUSTER (default cellfit), KIND_NODE_IMAGE (default kindest/node:<release>,
# the release CELLFIT_E2E_KUBE_VERSION selects for the local control plane: newest, oldest, ...;
# see e2e/cluster/README.md; the chart accepts 1.35-1.37), KWOK_VERSION (default v0.8.0),
# IMAGE (default cellfit:dev).
#
# NOT RUN in cellfit's CI: the development machines have no Docker engine. Every step mirrors
# one that runs there (the chart install and the suite on the local control plane), but this
# script itself has not been executed; see e2e/kind/README.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CLUSTER="${KIND_CLUSTER:-cellfit}"
NODE_IMAGE="${KIND_NODE_IMAGE:-kindest/node:$("$ROOT/e2e/cluster/build.sh" --print-version)}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
IMAGE="${IMAGE:-cellfit:dev}"
RELEASE=cellfit NAMESPACE=cellfit-system
KEEP=0 SUITE=1 PYTEST_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) KEEP=1; shift ;;
    --no-suite) SUITE=0; shift ;;
    --) shift; PYTEST_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { printf '\n[kind %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
for tool in docker kind kubectl helm python; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool is not on PATH" >&2; exit 1; }
done

WORK="$HERE/.work"           # git-ignored by e2e/kind/.gitignore
mkdir -p "$WORK/bin"
export KUBECONFIG="$WORK/kubeconfig"

cleanup() {
  if [ "$KEEP" = 0 ]; then
    log "deleting kind cluster $CLUSTER (keep it with --keep)"
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  else
    log "cluster kept: export KUBECONFIG=$KUBECONFIG; delete it with: kind delete cluster --name $CLUSTER"
  fi
}
trap cleanup EXIT

log "1/7 kind cluster $CLUSTER ($NODE_IMAGE)"
kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --config "$HERE/kind-config.yaml" \
  --kubeconfig "$KUBECONFIG" --wait 180s
KUBE_VERSION="$(kubectl version -o json | python -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"
echo "Kubernetes $KUBE_VERSION"

log "2/7 image $IMAGE: docker build and kind load"
docker build -t "$IMAGE" "$ROOT"
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "3/7 fake GPUs on the kind workers"
"$HERE/fake-gpus.sh" --selector cellfit.io/fake-gpu=true

log "4/7 helm install the chart (the real Deployment: kube-scheduler + cellfit)"
helm install "$RELEASE" "$ROOT/charts/cellfit" -n "$NAMESPACE" --create-namespace \
  --set cellfit.image.repository="${IMAGE%:*}" --set cellfit.image.tag="${IMAGE##*:}" \
  --set cellfit.image.pullPolicy=Never --wait --timeout 5m
kubectl -n "$NAMESPACE" rollout status deploy/"$RELEASE" --timeout 3m
holder="$(kubectl -n "$NAMESPACE" get lease "$RELEASE" -o jsonpath='{.spec.holderIdentity}')"
[ -n "$holder" ] || { echo "run.sh: nobody holds the Lease $NAMESPACE/$RELEASE" >&2; exit 1; }
echo "leader: $holder"

log "5/7 smoke test: a GPU pod of the cellfit profile is bound by the in-cluster cellfit"
kubectl create namespace kind-smoke --dry-run=client -o yaml | kubectl apply -f -
kubectl -n kind-smoke apply -f - <<'POD'
apiVersion: v1
kind: Pod
metadata:
  name: gpu-smoke
  labels: {cellfit.io/job-class: best-effort}
spec:
  schedulerName: cellfit
  priorityClassName: cellfit-best-effort
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
    - name: pause
      image: registry.k8s.io/pause:3.10
      resources:
        limits: {nvidia.com/gpu: "2", cpu: 10m, memory: 16Mi}
      securityContext:
        allowPrivilegeEscalation: false
        runAsNonRoot: true
        runAsUser: 65535
        capabilities: {drop: [ALL]}
        seccompProfile: {type: RuntimeDefault}
POD
for _ in $(seq 1 60); do
  node="$(kubectl -n kind-smoke get pod gpu-smoke -o jsonpath='{.spec.nodeName}')"
  [ -n "$node" ] && break
  sleep 2
done
[ -n "${node:-}" ] || { kubectl -n kind-smoke describe pod gpu-smoke; kubectl -n "$NAMESPACE" logs deploy/"$RELEASE" -c cellfit --tail 50; exit 1; }
bind_info="$(kubectl -n kind-smoke get pod gpu-smoke -o jsonpath='{.metadata.annotations.cellfit\.io/bind-info}')"
[ -n "$bind_info" ] || { echo "run.sh: gpu-smoke has no cellfit.io/bind-info" >&2; exit 1; }
echo "gpu-smoke bound to $node: $bind_info"
kubectl delete namespace kind-smoke --wait=false

log "6/7 KWOK $KWOK_VERSION in the cluster, for the e2e suite's fake GPU nodes"
kubectl apply -f "https://github.com/kubernetes-sigs/kwok/releases/download/${KWOK_VERSION}/kwok.yaml"
# KWOK's fast stages, except the one completing Job pods at once (the suite completes pods
# through the cellfit.io/e2e-run-for annotation) and pod-delete (which cuts every grace period
# to 0), plus the suite's own stages in e2e/cluster/stages/, as up.sh loads them.
curl -fsSL "https://github.com/kubernetes-sigs/kwok/releases/download/${KWOK_VERSION}/stage-fast.yaml" -o "$WORK/stage-fast.yaml"
python - "$WORK/stage-fast.yaml" "$WORK/stages.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
keep = [d for d in docs if d.get("kind") == "Stage" and d["metadata"]["name"] not in ("pod-complete", "pod-delete")]
open(sys.argv[2], "w").write(yaml.safe_dump_all(keep))
print("stages:", ", ".join(d["metadata"]["name"] for d in keep))
PY
kubectl apply -f "$WORK/stages.yaml" -f "$ROOT/e2e/cluster/stages/"
kubectl -n kube-system rollout status deploy/kwok-controller --timeout 3m

log "7/7 the e2e suite (its own kube-scheduler and cellfit processes, with the chart's configs and tokens)"
if [ "$SUITE" = 0 ]; then
  echo "skipped (--no-suite)"
  exit 0
fi
# The suite runs the chart's two containers as local processes, as on the local control
# plane; the in-cluster replica would hold the same Lease, so it steps aside (a helm revision
# of its own, so that the suite's `helm rollback` returns to it).
helm upgrade "$RELEASE" "$ROOT/charts/cellfit" -n "$NAMESPACE" --reuse-values --set replicaCount=0 --wait
# kube-scheduler for the host, the same version as the cluster's, out of its image.
id="$(docker create "registry.k8s.io/kube-scheduler:${KUBE_VERSION%%-*}")"
docker cp "$id:/usr/local/bin/kube-scheduler" "$WORK/bin/kube-scheduler"
docker rm "$id" >/dev/null
APISERVER="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
cat > "$WORK/cluster.env" <<ENV
export KUBECONFIG='$KUBECONFIG'
export CELLFIT_E2E_APISERVER_URL='$APISERVER'
export CELLFIT_E2E_KUBE_VERSION='$KUBE_VERSION'
export CELLFIT_E2E_KUBE_SCHEDULER='$WORK/bin/kube-scheduler'
export CELLFIT_E2E_KUBECTL='$(command -v kubectl)'
export CELLFIT_E2E_HELM='$(command -v helm)'
export KUBECACHEDIR='$WORK/kube-cache'
ENV
cd "$ROOT"
# CELLFIT_E2E_EXTERNAL_ENV: conftest's control_plane fixture uses this running cluster instead
# of building and starting the local one (see e2e/kind/README.md).
CELLFIT_E2E_EXTERNAL_ENV="$WORK/cluster.env" python -m pytest -m e2e \
  e2e/test_chart.py e2e/test_scenarios.py e2e/test_extender_wiring.py ${PYTEST_ARGS[@]+"${PYTEST_ARGS[@]}"}
helm upgrade "$RELEASE" "$ROOT/charts/cellfit" -n "$NAMESPACE" --reuse-values --set replicaCount=1 --wait
