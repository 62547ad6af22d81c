#!/usr/bin/env bash
# Builds Helm once per version into ${KITELINE_CACHE_DIR:-~/.cache/kiteline}/helm/<version>/helm,
# `go install`ed from its released module (helm.sh/helm/v4/cmd/helm) with the version stamped in,
# as Helm's own Makefile does, so `helm version` tells the truth.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions
source "$here/versions"

out="${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}/helm/$HELM"
if [ -x "$out/helm" ]; then exit 0; fi

export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "helm/build.sh: needs Go (/usr/local/go)" >&2; exit 1; }
export CGO_ENABLED=0 GOTOOLCHAIN=local
mkdir -p "$out"
started=$(date +%s)
echo "kiteline: building Helm $HELM into $out (once)" >&2
major="${HELM%%.*}"
GOBIN="$out" go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/$major/internal/version.version=$HELM" \
  "helm.sh/helm/$major/cmd/helm@$HELM"
echo "kiteline: Helm built in $(( $(date +%s) - started )) s" >&2
