#!/usr/bin/env bash
# Packs a built web UI (Kite's `static/` directory, or any build with an index.html) into an
# image for deploy/optional/ui, without a registry or a daemon: busybox's `cp` and the build
# under /ui, as an OCI archive named kiteline.local/kiteline-ui:<content hash>.
#   scripts/build-ui-image.sh <ui-dir> [out-dir]     (out-dir default ~/.cache/kiteline/images)
# Writes <out-dir>/kiteline-ui.tar and kiteline-ui.ref (the reference). Push it with
# `skopeo copy oci-archive:<tar> docker://registry.example.com/kiteline-ui:<tag>`, or import it
# into a node's containerd (`ctr -n k8s.io images import`). It packs; it builds nothing.
set -euo pipefail
ui="${1:?usage: build-ui-image.sh <ui-dir> [out-dir]}"
out="${2:-${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}/images}"
[ -f "$ui/index.html" ] || { echo "build-ui-image.sh: no index.html in $ui" >&2; exit 1; }

need=(umoci skopeo busybox-static)
bash "$(dirname "$0")/ensure-packages.sh" "${need[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/bin" "$root/ui"
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/cp"
# Regular files and directories only, readable by the pod's non-root user.
(cd "$ui" && find . -type d -print0 | xargs -0 -I{} mkdir -p "$root/ui/{}")
(cd "$ui" && find . -type f -print0 | xargs -0 -I{} cp {} "$root/ui/{}")
chmod -R a+rX "$root/ui"
tag=$(cd "$root/ui" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
ref="kiteline.local/kiteline-ui:$tag"

layout="$work/layout"
umoci init --layout "$layout"
umoci new --image "$layout:ui"
umoci insert --image "$layout:ui" "$root" /
# The architecture of this machine's busybox (Debian's names are OCI's for amd64 and arm64).
umoci config --image "$layout:ui" --author kiteline --os linux --architecture "$(dpkg --print-architecture)" \
  --config.env PATH=/bin --config.user 65534:65534 --config.workingdir /
mkdir -p "$out"
skopeo copy --quiet "oci:$layout:ui" "oci-archive:$work/kiteline-ui.tar:$ref"
mv "$work/kiteline-ui.tar" "$out/kiteline-ui.tar"
echo "$ref" > "$out/kiteline-ui.ref"
echo "kiteline: $ref in $out/kiteline-ui.tar" >&2
