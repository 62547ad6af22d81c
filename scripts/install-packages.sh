#!/usr/bin/env bash
# Installs what the embedded control plane, its node and the tests take from Debian's packages:
# the node's runtime (containerd with ctr and its runc shim, runc, the CNI plugins in
# /usr/lib/cni, iptables and conntrack for kube-proxy, ip and nsenter for the node's network
# namespace, openssl for the certificates), for the sign-in tests OpenLDAP's slapd (with the
# ldap-utils clients, to look into it by hand) and chromium (test/sso-browser.test.ts, driven by
# puppeteer-core), for the image tags test Debian's docker-registry, skopeo to push to it and
# htpasswd (apache2-utils) for its Basic auth, and Prometheus (test/prometheus.test.ts scrapes a test
# node's kubelet with it). The Kubernetes binaries and etcd come from scripts/kubernetes/.
# Idempotent; needs root for apt-get (CI and dev machines are).
set -euo pipefail

bash "$(dirname "$0")/ensure-packages.sh" containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux \
  openssl slapd ldap-utils chromium docker-registry skopeo apache2-utils prometheus
