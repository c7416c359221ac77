# Sourced by build.sh, up.sh, down.sh and the gen-*-wrapper.sh scripts (not executable).
#
# Resolves CELLFIT_E2E_KUBE_VERSION into the release this run builds and starts:
#   unset, "" or "default"  -> KUBE_VERSION_DEFAULT (what `python -m pytest` runs)
#   "newest" / "oldest"     -> KUBE_VERSION_NEWEST / KUBE_VERSION_OLDEST
#   "1.35" or "v1.35"       -> the listed release of that minor (KUBE_VERSIONS)
#   "v1.36.3" or "1.36.3"   -> that release; it needs k8s-wrapper/v1.36.3/ (gen-k8s-wrapper.sh)
#                              and an ETCD_VERSION_1_36 line in versions.env
# and sets KUBE_VERSION, KUBE_MINOR, ETCD_VERSION, K8S_WRAPPER, ETCD_WRAPPER and KEY (the cache
# key: every pinned version, so each release has its own cache directory).
# Exports GOTOOLCHAIN=local (never download a toolchain) unless GOTOOLCHAIN names one, such as
# go1.27.3, which the go command then fetches from the module proxy (golang.org/toolchain).
# Requires HERE (the e2e/cluster directory) to be set by the caller.

# shellcheck source=versions.env
. "$HERE/versions.env"

kube_version_resolve() { # VALUE -> prints vX.Y.Z, or fails with a message on stderr
  local want="$1" v
  case "$want" in
    ""|default) want="$KUBE_VERSION_DEFAULT" ;;
  esac
  case "$want" in
    newest) echo "$KUBE_VERSION_NEWEST"; return 0 ;;
    oldest) echo "$KUBE_VERSION_OLDEST"; return 0 ;;
  esac
  want="v${want#v}"
  if [[ "$want" =~ ^v1\.[0-9]+$ ]]; then
    for v in $KUBE_VERSIONS; do
      [[ "$v" == "$want".* ]] && { echo "$v"; return 0; }
    done
    echo "CELLFIT_E2E_KUBE_VERSION=$1: no release of $want in versions.env (KUBE_VERSIONS: $KUBE_VERSIONS)" >&2
    return 1
  fi
  if [[ "$want" =~ ^v1\.[0-9]+\.[0-9]+$ ]]; then
    echo "$want"; return 0
  fi
  echo "CELLFIT_E2E_KUBE_VERSION=$1: expected newest, oldest, default, v1.<minor> or v1.<minor>.<patch> (listed: $KUBE_VERSIONS)" >&2
  return 1
}

KUBE_VERSION="$(kube_version_resolve "${CELLFIT_E2E_KUBE_VERSION:-}")" || exit 2
KUBE_MINOR="$(echo "$KUBE_VERSION" | cut -d. -f2)"
_etcd_var="ETCD_VERSION_1_${KUBE_MINOR}"
ETCD_VERSION="${!_etcd_var:-}"
if [ -z "$ETCD_VERSION" ]; then
  echo "no $_etcd_var in $HERE/versions.env: which etcd goes with Kubernetes 1.${KUBE_MINOR}?" >&2
  exit 2
fi
unset _etcd_var
K8S_WRAPPER="$HERE/k8s-wrapper/$KUBE_VERSION"
ETCD_WRAPPER="$HERE/etcd-wrapper/$ETCD_VERSION"
KEY="k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}"

case "${GOTOOLCHAIN:-}" in
  go1.*) ;;
  *) GOTOOLCHAIN=local ;;
esac
export GOTOOLCHAIN
