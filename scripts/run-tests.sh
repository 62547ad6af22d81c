#!/usr/bin/env bash
# Runs the whole suite: starts the shared test control planes (a host and two targets; the host
# and target-a with a node and the current Kubernetes release, target-b without a node on the older
# minor of scripts/kubernetes/versions, as in test/helpers/clusters.ts), runs every compiled test file with
# scripts/run-test-files.js, stops the control planes (and their nodes), and prints one summary line.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=.kiteline/test
mkdir -p "$dir/logs"
# The gateways' logs of this run only: scan-logs.js checks them at the end.
rm -f "$dir"/logs/*.log
clusters=(host target-a target-b)
source scripts/kubernetes/versions
declare -A start_flags=([host]=--node [target-a]=--node [target-b]="--kubernetes-version $OLDER")

stop_all() {
  for c in "${clusters[@]}"; do node bin/kiteline.js controlplane stop --dir "$dir/$c" >/dev/null 2>&1; done
}
trap stop_all EXIT

pids=()
for c in "${clusters[@]}"; do
  node bin/kiteline.js controlplane start --dir "$dir/$c" --name "$c" ${start_flags[$c]} &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "a test control plane failed to start" >&2; exit 1; }; done

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  # Every file, the slowest first (the ten slowest of a recent run, as tap-summary.js lists them),
  # so the two jobs end together instead of one of them starting a three-minute file at the end.
  slow=(in-cluster cluster-sources k8s-proxy sso-oidc faults-target audit-trail resources controlplane)
  for name in "${slow[@]}"; do [ -f "dist/test/$name.test.js" ] && files+=("dist/test/$name.test.js"); done
  while IFS= read -r f; do
    [[ " ${files[*]} " == *" $f "* ]] || files+=("$f")
  done < <(find dist/test -name '*.test.js' | sort)
fi
node scripts/run-test-files.js "${files[@]}" 2>&1 | tee "$dir/tap.out" | node scripts/tap-summary.js
status=${PIPESTATUS[0]}
# No secret in any log line of the whole suite: the run fails if the scan finds one.
node scripts/scan-logs.js "$dir/logs" || status=1
exit "$status"
