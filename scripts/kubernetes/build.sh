#!/usr/bin/env bash
# Builds Kubernetes commands of one release from Go modules, once, into
#   ${KITELINE_CACHE_DIR:-~/.cache/kiteline}/kubernetes/<version>/bin
# Usage: scripts/kubernetes/build.sh [vX.Y.Z [command ...]]
#   version: default CURRENT of scripts/kubernetes/versions; commands: default all six the embedded
#   control plane and its node run (kube-apiserver, kube-controller-manager, kube-scheduler,
#   kubelet, kube-proxy, kubectl).
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every k8s.io/<staging> module with
# a local directory (./staging/src/k8s.io/...). The way Kubernetes documents for depending on it is a
# module of one's own that requires k8s.io/kubernetes vX.Y.Z and replaces each staging module with
# its published v0.Y.Z; this script writes that module (from the release's own go.mod, so the list
# is always the release's) in the cache and builds the commands from it, with the same version
# stamps Kubernetes' release build sets (so `kubectl version` and /version report vX.Y.Z).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions
source "$here/versions"
version="${1:-$CURRENT}"
[ $# -eq 0 ] || shift
cmds=("$@")
[ ${#cmds[@]} -gt 0 ] || cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "build.sh: not a version: $version" >&2; exit 2; }
minor="${BASH_REMATCH[1]}"

# Bump when the recipe changes, so binaries from an older recipe are rebuilt.
recipe=1
cache="${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}/kubernetes/$version"
out="$cache/bin"
have_all() {
  for c in "${cmds[@]}"; do [ -x "$out/$c" ] || return 1; done
  [ "$(cat "$out/.recipe" 2>/dev/null)" = "$recipe" ]
}
if have_all; then exit 0; fi

export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "build.sh: needs Go (/usr/local/go)" >&2; exit 1; }
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

mod="$cache/module"
mkdir -p "$mod" "$out"
started=$(date +%s)
echo "kiteline: building Kubernetes $version (${cmds[*]}) from Go modules into $out (once)" >&2
(
  cd "$mod"
  gomod_src="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod"
  [ -f "$gomod_src" ] || go mod download k8s.io/kubernetes@"$version"
  {
    echo "module kiteline.local/kubernetes-build"
    echo
    echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo "replace ("
    sed -nE 's#^\s+(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+$#\t\1 => \1 v0.'"$minor.${version##*.}"'#p' "$gomod_src"
    echo ")"
  } > go.mod
  grep -q 'k8s.io/client-go => ' go.mod || { echo "build.sh: no staging list in $gomod_src" >&2; exit 1; }
  pkg=k8s.io/component-base/version
  cpkg=k8s.io/client-go/pkg/version
  stamp="-X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  stamp+=" -X $cpkg.gitVersion=$version -X $cpkg.gitMajor=1 -X $cpkg.gitMinor=$minor -X $cpkg.gitTreeState=clean"
  stamp+=" -X $pkg.buildDate=1970-01-01T00:00:00Z -X $cpkg.buildDate=1970-01-01T00:00:00Z"
  pkgs=()
  for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  go build -trimpath -ldflags "-s -w $stamp" -o "$out/" "${pkgs[@]}"
)
echo "$recipe" > "$out/.recipe"
echo "kiteline: Kubernetes $version built in $(( $(date +%s) - started )) s" >&2
