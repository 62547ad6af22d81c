#!/usr/bin/env bash
# Builds the node's container images locally, without a registry or a daemon, as OCI archives:
#   kiteline.local/pause:<tag>  the sandbox ("pause") image: build/pause/linux/pause.c of the
#                               Kubernetes release the control plane runs, compiled statically
#   kiteline.local/busybox:1    a tools image for tests and the README tour: Debian's
#                               busybox-static (sh, sleep, nc, httpd, wget, ...)
# Each image is assembled with umoci (layer + config in an OCI layout) and written as an
# oci-archive by skopeo, named so that `ctr images import` registers it under that name.
# Archives land in "$1" (default ~/.cache/kiteline/images). Idempotent: exits at once when the
# archives of this recipe are there. Needs root for apt-get (CI and dev machines are).
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}"
out="${1:-$cache/images}"
# Bump when the recipe changes, so cached archives from an older recipe are rebuilt.
recipe=2
images=(pause busybox)
have_all() {
  for i in "${images[@]}"; do [ -s "$out/$i.tar" ] || return 1; done
  [ "$(cat "$out/.recipe" 2>/dev/null)" = "$recipe" ]
}
if have_all; then exit 0; fi

# busybox-static replaces Debian's dynamically linked busybox: /bin/busybox is then static.
need=(umoci skopeo busybox-static gcc libc6-dev)
bash scripts/ensure-packages.sh "${need[@]}"

# pause.c comes from the Kubernetes release the control plane runs (its module, in Go's module cache).
# shellcheck source=kubernetes/versions
source scripts/kubernetes/versions
export PATH="/usr/local/go/bin:$PATH" GOFLAGS=-mod=mod GOTOOLCHAIN=local
tree="$(go env GOMODCACHE)/k8s.io/kubernetes@$CURRENT"
[ -f "$tree/build/pause/linux/pause.c" ] || (cd "$(mktemp -d)" && go mod download k8s.io/kubernetes@"$CURRENT")
pause_c="$tree/build/pause/linux/pause.c"
# The version the release's build/pause/Makefile gives its image.
pause_tag=$(sed -nE 's/^TAG \??= //p' "$tree/build/pause/Makefile")
[ -n "$pause_tag" ] || { echo "build-images.sh: no TAG in $tree/build/pause/Makefile" >&2; exit 1; }

echo "kiteline: building the node's images into $out" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
layout="$work/layout"
umoci init --layout "$layout"

# Assembles image $1 (OCI layout tag) from root filesystem $2, with umoci config arguments after.
assemble() {
  local tag=$1 rootfs=$2
  shift 2
  umoci new --image "$layout:$tag"
  umoci insert --image "$layout:$tag" "$rootfs" /
  umoci config --image "$layout:$tag" --author kiteline --os linux --architecture amd64 "$@"
}

# The pause image, as upstream builds it (build/pause/Makefile: -Os -static, USER 65535).
mkdir -p "$work/pause"
gcc -Os -Wall -Werror -static -DVERSION="v$pause_tag-kiteline" -o "$work/pause/pause" "$pause_c"
assemble pause "$work/pause" --config.entrypoint /pause --config.user 65535:65535

# The tools image: busybox and a symlink per applet, a writable /tmp and a web root for httpd.
root="$work/busybox"
mkdir -p "$root/bin" "$root/tmp" "$root/www" "$root/etc"
chmod 1777 "$root/tmp"
cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
echo 'kiteline busybox' > "$root/www/index.html"
assemble busybox "$root" --config.cmd sh --config.env PATH=/bin --config.workingdir /

# oci-archive with the full reference as the image's name annotation (what ctr import reads).
skopeo copy --quiet "oci:$layout:pause" "oci-archive:$work/pause.tar:kiteline.local/pause:$pause_tag"
skopeo copy --quiet "oci:$layout:busybox" "oci-archive:$work/busybox.tar:kiteline.local/busybox:1"
for i in "${images[@]}"; do mv "$work/$i.tar" "$out/$i.tar"; done
echo "kiteline.local/pause:$pause_tag" > "$out/pause.ref"
echo "kiteline.local/busybox:1" > "$out/busybox.ref"
echo "$recipe" > "$out/.recipe"
echo "kiteline: images ready in $out" >&2
