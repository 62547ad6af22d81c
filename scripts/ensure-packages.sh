#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are not installed yet (one apt-get run,
# quiet); nothing when all are there. Needs root for apt-get (CI and dev machines are).
#   bash scripts/ensure-packages.sh umoci skopeo
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
