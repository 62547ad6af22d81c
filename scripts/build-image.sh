#!/usr/bin/env bash
# Builds kiteline's image from deploy/Dockerfile without a daemon or a registry (`make image`):
# buildah, chroot isolation, vfs storage, into an OCI archive that `ctr images import` (or
# `skopeo copy` to a registry) takes:
#   $out/kiteline-base.tar   kiteline.local/node:20-bookworm, the Dockerfile's BASE_IMAGE: a
#                            `debootstrap --variant=minbase bookworm` root filesystem plus this
#                            machine's Node.js runtime and npm (Debian's own nodejs is 18)
#   $out/kiteline.tar        kiteline.local/kiteline:<12 hex of its inputs' hash>; kiteline.ref
#                            holds that reference
# Each archive is rebuilt only when its inputs change (the base: this script's base recipe and the
# node and npm it copies; the app: the base and every file of the build context), so a second run
# returns at once. $out defaults to ~/.cache/kiteline/images. Needs root (apt-get, debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}"
out="${1:-$cache/images}"
mirror="${KITELINE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Bump when the way the base is assembled changes.
base_recipe=1
base_ref=kiteline.local/node:20-bookworm
# What the Dockerfile copies (.dockerignore lets only these in) plus the two build files.
context=(deploy/Dockerfile .dockerignore package.json package-lock.json tsconfig.json bin crds src)

mkdir -p "$out"
exec 9>"$out/.kiteline-image.lock"
flock 9 # one build at a time (make image and a test may both ask)

node_bin=$(readlink -f "$(command -v node)")
npm_dir=$(readlink -f "$(dirname "$(readlink -f "$(command -v npm)")")/..")
node_major=$("$node_bin" -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "kiteline: the image needs Node.js >= 20 (package.json engines); this machine has $("$node_bin" -v)" >&2
  exit 1
fi

base_key=$( { echo "$base_recipe"; sha256sum "$node_bin" | cut -d' ' -f1; cat "$npm_dir/package.json"; } | sha256sum | cut -c1-64)
app_key=$( { echo "$base_key"; find "${context[@]}" -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-64)
app_ref="kiteline.local/kiteline:${app_key:0:12}"

is_cached() { # archive, key
  [ -s "$out/$1.tar" ] && [ "$(cat "$out/$1.key" 2>/dev/null)" = "$2" ]
}
report() {
  echo "kiteline: image $(cat "$out/kiteline.ref") in $out/kiteline.tar, $(du -m "$out/kiteline.tar" | cut -f1) MB (base $(du -m "$out/kiteline-base.tar" | cut -f1) MB)" >&2
}
if is_cached kiteline-base "$base_key" && is_cached kiteline "$app_key"; then report; exit 0; fi

need=(buildah debootstrap)
bash scripts/ensure-packages.sh "${need[@]}"

work=$(mktemp -d)
# buildah's own storage for this build only (vfs: no overlay mounts needed); layers are not kept.
store=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
cleanup() {
  buildah "${store[@]}" rm --all >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS

if ! is_cached kiteline-base "$base_key"; then
  echo "kiteline: building the base image $base_ref (debootstrap from $mirror)" >&2
  rootfs="$work/rootfs"
  if ! debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    exit 1
  fi
  # Where the official node images keep the runtime; node needs only libc, libstdc++ and libgcc,
  # all in minbase.
  install -D -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
  mkdir -p "$rootfs/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  chroot "$rootfs" /usr/local/bin/node -e 'require("node:crypto").randomUUID()' # the runtime runs there
  # The runtime provides /dev, /proc and /sys; apt's downloads and lists are not needed.
  rm -rf "$rootfs"/dev/* "$rootfs"/proc/* "$rootfs"/sys/* "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*
  tar -C "$rootfs" --numeric-owner -cf "$work/rootfs.tar" .
  container=$(buildah "${store[@]}" from scratch)
  buildah "${store[@]}" add "$container" "$work/rootfs.tar" /
  buildah "${store[@]}" config --os linux --arch amd64 --author kiteline \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env NODE_VERSION="$("$node_bin" -p process.versions.node)" --cmd node "$container"
  buildah "${store[@]}" commit --quiet "$container" "oci-archive:$work/kiteline-base.tar:$base_ref" >/dev/null
  mv "$work/kiteline-base.tar" "$out/kiteline-base.tar"
  echo "$base_key" >"$out/kiteline-base.key"
fi

# npm inside the build trusts what npm trusts here: the machine's CA bundle, mounted for the
# build only (a TLS-inspecting proxy's CA may be in it).
machine_cas="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
echo "kiteline: building $app_ref from deploy/Dockerfile" >&2
if ! buildah "${store[@]}" bud --isolation chroot --layers=false -f deploy/Dockerfile \
  --build-arg "BASE_IMAGE=oci-archive:$out/kiteline-base.tar" \
  --volume "$machine_cas:/run/kiteline-build/ca.crt:ro" --build-arg NODE_EXTRA_CA_CERTS=/run/kiteline-build/ca.crt \
  -t "$app_ref" . >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log" >&2
  exit 1
fi
buildah "${store[@]}" push --quiet "$app_ref" "oci-archive:$work/kiteline.tar:$app_ref"
mv "$work/kiteline.tar" "$out/kiteline.tar"
echo "$app_ref" >"$out/kiteline.ref"
echo "$app_key" >"$out/kiteline.key"
echo "kiteline: built in $((SECONDS - started)) s" >&2
report
