#!/usr/bin/env bash
# Builds the GitOps engine the suite's test/gitops.test.ts runs, once per version, into
#   ${KITELINE_CACHE_DIR:-~/.cache/kiteline}/flux/<source>-<kustomize>-<sops>/
#     bin/source-controller, bin/kustomize-controller   Flux's controllers (fluxcd/*-controller)
#     bin/sops, bin/age-keygen                          SOPS and age, to encrypt a Secret for Git
#     crds/*.yaml                                       Flux's CRDs, from the same modules
#
# Each controller is built from its own module as released: its source from the Go module proxy
# (`go mod download`), with its go.mod, go.sum and replace directives, and its api/ module put back
# where its go.mod's `replace .../api => ./api` expects it (a nested module is not in the parent's
# zip). The CRDs are the module's config/crd/bases. sops and age-keygen are `go install`ed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions
source "$here/versions"

# Bump when the recipe changes, so binaries from an older recipe are rebuilt.
recipe=1
cache="${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}/flux/$SOURCE_CONTROLLER-$KUSTOMIZE_CONTROLLER-$SOPS"
out="$cache/bin"
want=(source-controller kustomize-controller sops age-keygen)
have_all() {
  for c in "${want[@]}"; do [ -x "$out/$c" ] || return 1; done
  [ -d "$cache/crds" ] && [ "$(cat "$out/.recipe" 2>/dev/null)" = "$recipe" ]
}
if have_all; then exit 0; fi

export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "flux/build.sh: needs Go (/usr/local/go)" >&2; exit 1; }
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
mkdir -p "$out" "$cache/crds"
started=$(date +%s)
echo "kiteline: building Flux ($SOURCE_CONTROLLER, $KUSTOMIZE_CONTROLLER), sops $SOPS and age $AGE into $cache (once)" >&2

# build_controller <name> <version>: fluxcd/<name> from its released module.
build_controller() {
  local name="$1" version="$2" src dir api
  src="$(go mod download -json "github.com/fluxcd/$name@$version" | sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')"
  api="$(go mod download -json "github.com/fluxcd/$name/api@$version" | sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')"
  [ -d "$src" ] && [ -d "$api" ] || { echo "flux/build.sh: could not download $name $version" >&2; exit 1; }
  dir="$cache/src/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp -r "$src"/. "$dir"/
  rm -rf "$dir/api"
  cp -r "$api" "$dir/api"
  chmod -R u+w "$dir"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out/$name" .)
  cp "$dir"/config/crd/bases/*.yaml "$cache/crds/"
  rm -rf "$dir"
}

build_controller source-controller "$SOURCE_CONTROLLER"
build_controller kustomize-controller "$KUSTOMIZE_CONTROLLER"
GOBIN="$out" go install "github.com/getsops/sops/v3/cmd/sops@$SOPS"
GOBIN="$out" go install "filippo.io/age/cmd/age-keygen@$AGE"
echo "$recipe" > "$out/.recipe"
echo "kiteline: Flux, sops and age built in $(( $(date +%s) - started )) s" >&2
