#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and the node's kubelet, kube-scheduler and
# kube-proxy from Debian's `kubernetes` source package (1.20.2, vendored), and installs etcd and the
# node's runtime (containerd, runc, CNI plugins, iptables) from Debian's packages.
# Binaries land in "$1" (default ~/.cache/kiteline/kubernetes/bin). Idempotent: exits at
# once when every binary is already there. Needs root for apt-get (CI and dev machines are).
set -euo pipefail

out="${1:-${KITELINE_CACHE_DIR:-$HOME/.cache/kiteline}/kubernetes/bin}"
want=(kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler kube-proxy)

# Bump when the recipe changes, so cached binaries from an older recipe are rebuilt.
recipe=5
have_all() {
  for b in "${want[@]}"; do [ -x "$out/$b" ] || return 1; done
  [ "$(cat "$out/.recipe" 2>/dev/null)" = "$recipe" ]
}

export DEBIAN_FRONTEND=noninteractive
apt_updated=""
apt_install() {
  [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v etcd >/dev/null || [ -x /usr/bin/etcd ] || apt_install etcd-server
# What a node runs besides the Kubernetes binaries, from Debian's packages: containerd (with ctr
# and its runc shim), runc, the CNI plugins (bridge, host-local) in /usr/lib/cni, iptables and
# conntrack for kube-proxy, ip and nsenter for the node's network namespace, openssl for the
# control plane's certificates.
node_pkgs=()
for pkg in containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux openssl; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || node_pkgs+=("$pkg")
done
[ ${#node_pkgs[@]} -eq 0 ] || apt_install "${node_pkgs[@]}"
# For the sign-in tests: OpenLDAP's slapd and slapadd (test/helpers/slapd.ts runs its own slapd
# on a loopback port), the ldap-utils clients to look into it by hand, and chromium for the login
# flow in a real browser (test/sso-browser.test.ts, driven by puppeteer-core).
test_pkgs=()
for pkg in slapd ldap-utils chromium; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || test_pkgs+=("$pkg")
done
[ ${#test_pkgs[@]} -eq 0 ] || apt_install "${test_pkgs[@]}"
if have_all; then exit 0; fi

echo "kiteline: building Kubernetes binaries into $out (once, about 5-10 minutes)" >&2
command -v go >/dev/null || apt_install golang-go
command -v rsync >/dev/null || apt_install rsync
command -v dpkg-source >/dev/null || apt_install dpkg-dev
# The tree vendors modern-go/reflect2 1.0.1 and json-iterator 1.1.10, which misbehave when built
# with Go >= 1.18 (a SIGSEGV in map iteration; "" decoded as null in custom resources). Debian ships
# the fixed reflect2 1.0.2 and json-iterator 1.1.12 as Go source.
gocode=/usr/share/gocode/src/github.com
[ -d "$gocode/modern-go/reflect2" ] || apt_install golang-github-modern-go-reflect2-dev
[ -d "$gocode/json-iterator/go" ] || apt_install golang-github-json-iterator-go-dev

src_list=/etc/apt/sources.list.d/kiteline-deb-src.sources
if ! grep -rqs -e '^deb-src ' -e '^Types:.*deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm' \
    'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' > "$src_list"
  apt-get update -qq; apt_updated=1
fi

work="$(dirname "$out")/src"
mkdir -p "$work" "$out"
tree=$(find "$work" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
if [ -z "$tree" ] || [ ! -f "$tree/Makefile" ]; then
  rm -rf "$work"/*
  (cd "$work" && apt-get source -qq kubernetes >/dev/null)
  tree=$(find "$work" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
fi
[ -n "$tree" ] || { echo "kiteline: apt-get source kubernetes gave no tree" >&2; exit 1; }

for pkg in modern-go/reflect2 json-iterator/go; do
  rsync -a --delete --exclude '*_test.go' --exclude '.git*' "$gocode/$pkg/" "$tree/vendor/github.com/$pkg/"
done
# OpenAPI type validation tells "null" from a zero value by comparing two reflect.Value structs;
# with Go >= 1.19 an empty string compares equal to reflect.Zero, so custom resources holding ""
# were refused as null. Test for nil only, which is what older Go effectively did.
for f in k8s.io/kube-openapi/pkg/validation/validate/type.go github.com/go-openapi/validate/type.go; do
  sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$tree/vendor/$f"
  grep -q 'if data == nil {' "$tree/vendor/$f" || { echo "kiteline: could not patch $f" >&2; exit 1; }
done

gopath="$work/.go"
mkdir -p "$gopath/src/k8s.io"
ln -sfn "$tree" "$gopath/src/k8s.io/kubernetes"
(
  cd "$gopath/src/k8s.io/kubernetes"
  export GOPATH="$gopath" CGO_ENABLED=0 GO111MODULE=off GOFLAGS=
  make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kubectl cmd/kubelet cmd/kube-scheduler cmd/kube-proxy" >&2
)
for b in "${want[@]}"; do
  install -m 0755 "$(find "$tree/_output" -type f -path "*bin/$b" | head -n1)" "$out/$b"
done
echo "$recipe" > "$out/.recipe"
echo "kiteline: Kubernetes binaries ready in $out" >&2
