#!/usr/bin/env bash
# Builds etcd from its Go module, once, into ${KITELINE_CACHE_DIR:-~/.cache/kiteline}/etcd/<version>/bin.
# Usage: scripts/kubernetes/build-etcd.sh [vX.Y.Z]   (default: ETCD of scripts/kubernetes/versions)
# The module is a main package of one line around go.etcd.io/etcd/server/v3/etcdmain, which is what
# etcd's own main does; the version etcd reports is the module's.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions
source "$here/versions"
version="${1:-$ETCD}"
[[ "$version" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || { echo "build-etcd.sh: not an etcd version: $version" >&2; exit 2; }

# Bump when the recipe changes, so a binary from an older recipe is rebuilt.
recipe=1
cache="${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}/etcd/$version"
out="$cache/bin"
[ -x "$out/etcd" ] && [ "$(cat "$out/.recipe" 2>/dev/null)" = "$recipe" ] && exit 0

export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "build-etcd.sh: needs Go (/usr/local/go)" >&2; exit 1; }
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

mod="$cache/module"
mkdir -p "$mod" "$out"
started=$(date +%s)
echo "kiteline: building etcd $version from Go modules into $out (once)" >&2
(
  cd "$mod"
  printf 'module kiteline.local/etcd-build\n\ngo %s\n' "$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')" > go.mod
  printf '%s\n' 'package main' '' 'import (' '	"os"' '' '	"go.etcd.io/etcd/server/v3/etcdmain"' ')' '' \
    'func main() { etcdmain.Main(os.Args) }' > main.go
  go get go.etcd.io/etcd/server/v3@"$version"
  go build -trimpath -ldflags "-s -w" -o "$out/etcd" .
)
echo "$recipe" > "$out/.recipe"
echo "kiteline: etcd $version built in $(( $(date +%s) - started )) s" >&2
