#!/usr/bin/env bash
# Stop and delete cellfit's local e2e cluster started by up.sh (processes, etcd data, PKI).
#
#   e2e/cluster/down.sh
#
# Same environment as up.sh: CELLFIT_E2E_WORKDIR (default $HOME/.cache/cellfit-e2e/run),
# CELLFIT_E2E_CLUSTER (default cellfit-e2e). Succeeds when there is nothing to delete.
# Uses the kwokctl that started the cluster (cluster.env), whatever CELLFIT_E2E_KUBE_VERSION is.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORKDIR="${CELLFIT_E2E_WORKDIR:-$HOME/.cache/cellfit-e2e/run}"
NAME="${CELLFIT_E2E_CLUSTER:-cellfit-e2e}"
export KWOK_WORKDIR="$WORKDIR/kwok"
KCFG="$WORKDIR/kubeconfig"

log() { printf '[down %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# The kwokctl of the release up.sh started (recorded in cluster.env); else the selected one.
KWOKCTL="$(sed -n "s/^export CELLFIT_E2E_KWOKCTL='\(.*\)'\$/\1/p" "$WORKDIR/cluster.env" 2>/dev/null || true)"
[ -x "$KWOKCTL" ] || KWOKCTL="$("$HERE/build.sh" --print-bin 2>/dev/null)/kwokctl" || true
rm -f "$WORKDIR/cluster.env"
if [ ! -d "$KWOK_WORKDIR/clusters/$NAME" ]; then
  log "no cluster '$NAME' in $KWOK_WORKDIR: nothing to do"
  rm -f "$KCFG"
  exit 0
fi

rc=0
if [ -x "$KWOKCTL" ]; then
  log "deleting kwok cluster '$NAME'"
  "$KWOKCTL" --name "$NAME" delete cluster --kubeconfig "$KCFG" || rc=$?
else
  log "kwokctl not found at $KWOKCTL"
  rc=1
fi
if [ "$rc" != 0 ]; then
  # Fallback: stop the component processes kwokctl recorded, by their pid files only.
  for pidfile in "$KWOK_WORKDIR/clusters/$NAME"/pids/*.pid; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && log "killed $(basename "$pidfile" .pid) (pid $pid)"
  done
  rm -rf "$KWOK_WORKDIR/clusters/$NAME"
fi
rm -f "$KCFG"
log "cluster '$NAME' deleted"
