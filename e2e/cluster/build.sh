#!/usr/bin/env bash
# Build (or reuse) every binary of cellfit's local e2e control plane.
#
#   e2e/cluster/build.sh            # idempotent: skips whatever is already cached
#   e2e/cluster/build.sh --print-bin   # only print the cache bin directory
#   e2e/cluster/build.sh --print-version  # only print the Kubernetes release selected
#   e2e/cluster/build.sh --check       # exit 0 when everything is already cached
#
# Output: $CELLFIT_E2E_CACHE/<versions-key>/bin/
#   kube-apiserver kube-controller-manager kube-scheduler kubectl   (k8s-wrapper/<kube>/, Go build)
#   kwok kwokctl                                                    (go install, pinned)
#   etcd etcdctl                                                    (etcd-wrapper/<etcd>/, Go build; Debian .deb fallback)
#   helm                                                            (go install, pinned)
# and $CELLFIT_E2E_CACHE/<versions-key>/share/kwok-stages/ (kwok's default Stage YAMLs).
#
# Environment: CELLFIT_E2E_KUBE_VERSION (which Kubernetes release: newest, oldest, v1.35, v1.37.2;
#   default: KUBE_VERSION_DEFAULT of versions.env; see kube-version.sh),
#   GO (go binary; default: go on PATH, else /usr/local/go/bin/go),
#   CELLFIT_E2E_CACHE (default $HOME/.cache/cellfit-e2e).
# Every Go step runs with CGO_ENABLED=0 and GOTOOLCHAIN=local (never download a toolchain),
# unless GOTOOLCHAIN names one (go1.27.3: the go command fetches that toolchain from the module
# proxy; see README.md).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=kube-version.sh
. "$HERE/kube-version.sh"

CACHE_ROOT="${CELLFIT_E2E_CACHE:-$HOME/.cache/cellfit-e2e}"
PREFIX="$CACHE_ROOT/$KEY"
BIN="$PREFIX/bin"
SHARE="$PREFIX/share"

case "${1:-}" in
  --print-bin) echo "$BIN"; exit 0 ;;
  --print-version) echo "$KUBE_VERSION"; exit 0 ;;
  --check) # exit 0 when everything is cached (nothing to build), 1 otherwise
    for b in kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl etcd etcdctl helm; do
      [ -x "$BIN/$b" ] || exit 1
    done
    [ -f "$PREFIX/VERSIONS" ] || exit 1
    exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--print-bin|--print-version|--check]" >&2; exit 2 ;;
esac

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[build] ERROR: %s\n' "$*" >&2; exit 1; }

GO="${GO:-$(command -v go 2>/dev/null || true)}"
[ -n "$GO" ] || GO=/usr/local/go/bin/go
[ -x "$GO" ] || die "no Go toolchain found (set GO=/path/to/go); Go >= 1.26 is needed for kwok ${KWOK_VERSION}"
export CGO_ENABLED=0  # GOTOOLCHAIN: kube-version.sh
unset GOFLAGS
go_version="$("$GO" env GOVERSION)"

mkdir -p "$BIN" "$SHARE"
# One build at a time per cache key (a second caller waits, then finds everything cached).
exec 9>"$PREFIX/.build.lock"
if command -v flock >/dev/null && ! flock -n 9; then
  log "another build.sh is running for $KEY; waiting for it"
  flock 9
fi
TMP="$(mktemp -d "$PREFIX/.tmp.XXXXXX")"
cleanup() { rm -rf "$TMP"; }
trap 'rc=$?; cleanup; [ $rc -eq 0 ] || printf "[build] FAILED (exit %s): last command: %s\n" "$rc" "$BASH_COMMAND" >&2' EXIT

log "versions: kubernetes ${KUBE_VERSION}, etcd ${ETCD_VERSION}, kwok ${KWOK_VERSION}, helm ${HELM_VERSION}; ${go_version}"
log "cache: $BIN"

# have NAME... -> true when every binary exists in $BIN
have() {
  local b
  for b in "$@"; do
    [ -x "$BIN/$b" ] || return 1
  done
}

install_from() { # DIR NAME... : move built binaries into $BIN atomically
  local dir="$1"; shift
  local b
  for b in "$@"; do
    [ -x "$dir/$b" ] || die "expected binary $dir/$b was not produced"
    mv -f "$dir/$b" "$BIN/$b.new" && mv -f "$BIN/$b.new" "$BIN/$b"
  done
}

# ---------------------------------------------------------------- kubernetes
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
if have "${K8S_BINS[@]}"; then
  log "kubernetes ${KUBE_VERSION}: cached, skipping"
else
  W="$K8S_WRAPPER"
  if ! grep -q "k8s.io/kubernetes ${KUBE_VERSION}\$" "$W/go.mod" 2>/dev/null; then
    log "k8s-wrapper/${KUBE_VERSION}/go.mod is missing or does not require k8s.io/kubernetes ${KUBE_VERSION}: generating it (commit the result)"
    GO="$GO" "$HERE/gen-k8s-wrapper.sh" "$KUBE_VERSION"
  fi
  minor="$KUBE_MINOR"
  build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # The same version variables upstream's hack/lib/version.sh stamps.
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=${build_date}"
  done
  log "kubernetes ${KUBE_VERSION}: go build ${K8S_BINS[*]} in k8s-wrapper/${KUBE_VERSION} (cold: about 7 min on 2 cores)"
  mkdir -p "$TMP/k8s"
  (cd "$W" && "$GO" build -mod=readonly -trimpath -buildvcs=false -ldflags "$ldflags" -o "$TMP/k8s/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kubectl) \
    || die "go build of kubernetes ${KUBE_VERSION} failed (see above). If a module is 'not available' on the proxy, pick another patch release in versions.env and run gen-k8s-wrapper.sh VERSION"
  install_from "$TMP/k8s" "${K8S_BINS[@]}"
  log "kubernetes: $("$BIN/kube-apiserver" --version)"
fi

# ---------------------------------------------------------------- kwok
if have kwok kwokctl; then
  log "kwok ${KWOK_VERSION}: cached, skipping"
else
  log "kwok ${KWOK_VERSION}: go install kwok kwokctl"
  mkdir -p "$TMP/kwok"
  GOBIN="$TMP/kwok" "$GO" install -trimpath \
      "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" "sigs.k8s.io/kwok/cmd/kwokctl@${KWOK_VERSION}" \
    || die "go install of kwok ${KWOK_VERSION} failed (kwok v0.8.0 needs Go >= 1.26; this is ${go_version})"
  install_from "$TMP/kwok" kwok kwokctl
  log "kwokctl: $("$BIN/kwokctl" --version 2>&1 | head -1)"
fi
# kwok's default stages come with its module source; keep a copy next to the binaries
# so up.sh does not depend on GOMODCACHE.
KWOK_STAGES=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
             pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml)
stages_ok=1
for f in "${KWOK_STAGES[@]}"; do [ -f "$SHARE/kwok-stages/$f" ] || stages_ok=0; done
if [ "$stages_ok" = 0 ]; then
  KWOK_DIR="$("$GO" mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir","")); sys.exit(1 if d.get("Error") else 0)')" \
    || die "cannot download module sigs.k8s.io/kwok@${KWOK_VERSION}"
  for f in "${KWOK_STAGES[@]}"; do
    [ -f "$KWOK_DIR/kustomize/stage/$f" ] || die "kwok ${KWOK_VERSION} has no kustomize/stage/$f"
    mkdir -p "$SHARE/kwok-stages/$(dirname "$f")"
    cp -f "$KWOK_DIR/kustomize/stage/$f" "$SHARE/kwok-stages/$f"
  done
  log "kwok stages copied to $SHARE/kwok-stages"
fi

# ---------------------------------------------------------------- etcd
if have etcd etcdctl; then
  log "etcd: cached, skipping"
else
  E="$ETCD_WRAPPER"
  if ! grep -q "go.etcd.io/etcd/server/v3 ${ETCD_VERSION}\$" "$E/go.mod" 2>/dev/null; then
    log "etcd-wrapper/${ETCD_VERSION}/go.mod is missing or does not require etcd ${ETCD_VERSION}: generating it (commit the result)"
    GO="$GO" "$HERE/gen-etcd-wrapper.sh" "$KUBE_VERSION" || log "etcd: generating etcd-wrapper/${ETCD_VERSION} failed"
  fi
  log "etcd ${ETCD_VERSION}: go build etcd etcdctl"
  mkdir -p "$TMP/etcd"
  if (cd "$E" \
      && "$GO" build -mod=readonly -trimpath -buildvcs=false -ldflags "-s -w" -o "$TMP/etcd/etcd" go.etcd.io/etcd/server/v3 \
      && "$GO" build -mod=readonly -trimpath -buildvcs=false -ldflags "-s -w" -o "$TMP/etcd/etcdctl" go.etcd.io/etcd/etcdctl/v3); then
    install_from "$TMP/etcd" etcd etcdctl
  else
    # Fallback: Debian's etcd 3.4 (up.sh then turns off kwok's watch-list client, which
    # etcd < 3.5.13 cannot serve).
    log "etcd: Go build failed; falling back to Debian packages ${ETCD_DEB_PACKAGES}"
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
      || die "could not build etcd ${ETCD_VERSION}, and apt-get/dpkg-deb are not available for the fallback"
    mkdir -p "$TMP/deb/root"
    chmod 755 "$TMP" "$TMP/deb"  # lets apt's _apt user write the download (else a warning)
    # shellcheck disable=SC2086
    (cd "$TMP/deb" && apt-get download ${ETCD_DEB_PACKAGES}) \
      || die "could not get etcd: the Go build failed and 'apt-get download ${ETCD_DEB_PACKAGES}' failed (run apt-get update?)"
    for d in "$TMP"/deb/*.deb; do dpkg-deb -x "$d" "$TMP/deb/root"; done
    "$TMP/deb/root/usr/bin/etcd" --version >/dev/null 2>&1 && [ -x "$TMP/deb/root/usr/bin/etcdctl" ] \
      || die "the Debian packages did not contain working usr/bin/etcd and usr/bin/etcdctl"
    install_from "$TMP/deb/root/usr/bin" etcd etcdctl
  fi
  log "etcd: $("$BIN/etcd" --version | head -1)"
fi

# ---------------------------------------------------------------- helm
if have helm; then
  log "helm ${HELM_VERSION}: cached, skipping"
else
  log "helm ${HELM_VERSION}: go install helm.sh/helm/v3/cmd/helm"
  H=helm.sh/helm/v3
  kminor="$KUBE_MINOR"
  mkdir -p "$TMP/helm"
  GOBIN="$TMP/helm" "$GO" install -trimpath -ldflags "-s -w \
      -X $H/internal/version.version=${HELM_VERSION} -X $H/internal/version.gitTreeState=clean \
      -X $H/pkg/lint/rules.k8sVersionMajor=1 -X $H/pkg/lint/rules.k8sVersionMinor=${kminor} \
      -X $H/pkg/chartutil.k8sVersionMajor=1 -X $H/pkg/chartutil.k8sVersionMinor=${kminor}" \
      "$H/cmd/helm@${HELM_VERSION}" \
    || die "go install of helm ${HELM_VERSION} failed"
  install_from "$TMP/helm" helm
  log "helm: $("$BIN/helm" version --short)"
fi

# ---------------------------------------------------------------- manifest
{
  echo "key=$KEY"
  echo "go=$go_version"
  echo "kube-apiserver: $("$BIN/kube-apiserver" --version)"
  echo "kube-scheduler: $("$BIN/kube-scheduler" --version)"
  echo "kube-controller-manager: $("$BIN/kube-controller-manager" --version)"
  echo "kubectl: $("$BIN/kubectl" version --client 2>/dev/null | head -1)"
  echo "kwok: $("$BIN/kwok" --version 2>&1 | head -1)"
  echo "kwokctl: $("$BIN/kwokctl" --version 2>&1 | head -1)"
  echo "etcd: $("$BIN/etcd" --version | head -1)"
  echo "helm: $("$BIN/helm" version --short)"
} > "$PREFIX/VERSIONS.tmp" || die "a cached binary does not run; delete $PREFIX and rebuild"
mv -f "$PREFIX/VERSIONS.tmp" "$PREFIX/VERSIONS"
sed 's/^/    /' "$PREFIX/VERSIONS"
log "done: $BIN"
