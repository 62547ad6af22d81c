#!/usr/bin/env bash
# Packs an image for the kubectl console (docs/workloads.md): the kubectl of the Kubernetes release
# kiteline is tested with (built from its module by scripts/kubernetes/build.sh, static) and
# Debian's busybox-static (sh, vi, less, grep and the other applets), without a registry or a
# daemon, as an OCI archive named kiteline.local/kubectl:<version>.
#   scripts/build-kubectl-image.sh [vX.Y.Z] [out-dir]     (out-dir default ~/.cache/kiteline/images)
# Writes <out-dir>/kubectl.tar and kubectl.ref. Set the reference as `kubectlImage` in Settings,
# General, after importing it into the nodes' containerd or pushing it with
# `skopeo copy oci-archive:<tar> docker://registry.example.com/kubectl:<version>`.
# Idempotent: exits at once when the archive of this version and recipe is there.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=kubernetes/versions
source scripts/kubernetes/versions
version="${1:-$CURRENT}"
cache="${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}"
out="${2:-$cache/images}"
ref="kiteline.local/kubectl:$version"
recipe=1
if [ -s "$out/kubectl.tar" ] && [ "$(cat "$out/kubectl.ref" 2>/dev/null)" = "$ref" ] &&
  [ "$(cat "$out/.kubectl-recipe" 2>/dev/null)" = "$recipe" ]; then
  exit 0
fi

bash scripts/ensure-packages.sh umoci skopeo busybox-static
bash scripts/kubernetes/build.sh "$version" kubectl
kubectl="$cache/kubernetes/$version/bin/kubectl"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/bin" "$root/tmp" "$root/etc"
chmod 1777 "$root/tmp"
cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
cp "$kubectl" "$root/bin/kubectl"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/kube:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"

layout="$work/layout"
umoci init --layout "$layout"
umoci new --image "$layout:kubectl"
umoci insert --image "$layout:kubectl" "$root" /
umoci config --image "$layout:kubectl" --author kiteline --os linux --architecture "$(dpkg --print-architecture)" \
  --config.env PATH=/bin --config.user 65534:65534 --config.workingdir / --config.cmd sh
mkdir -p "$out"
skopeo copy --quiet "oci:$layout:kubectl" "oci-archive:$work/kubectl.tar:$ref"
mv "$work/kubectl.tar" "$out/kubectl.tar"
echo "$ref" > "$out/kubectl.ref"
echo "$recipe" > "$out/.kubectl-recipe"
echo "kiteline: $ref in $out/kubectl.tar" >&2
