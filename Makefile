# kiteline: the two set-up commands are `make run` and `make test` (which runs `make lint` first).
SHELL := /bin/bash
NODE_BIN := node_modules/.bin
HOST_DIR := .kiteline/host

.PHONY: deps node-deps build lint image ui-image kubectl-image run test test-only bench bench-search bench-fleet soak clean stop

# Everything the project needs on a fresh Debian machine: containerd, runc and the CNI plugins
# (Debian's packages), etcd, the Kubernetes binaries of the current release and the API server and
# controller manager of the older one the suite's target-b runs (scripts/kubernetes/versions; built
# once from Go modules into ~/.cache/kiteline/kubernetes/<version>), Flux's controllers, sops and
# age for the GitOps test (scripts/flux/versions, into ~/.cache/kiteline/flux/), the node's images
# and the npm packages.
deps: node-deps
	bash scripts/install-packages.sh
	bash scripts/kubernetes/build-etcd.sh
	bash scripts/kubernetes/build.sh
	source scripts/kubernetes/versions && bash scripts/kubernetes/build.sh $$OLDER kube-apiserver kube-controller-manager kubectl
	bash scripts/flux/build.sh
	bash scripts/helm/build.sh
	bash scripts/build-images.sh

# The npm packages, installed (npm ci) when missing or older than package-lock.json.
node-deps:
	@if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then npm ci --no-fund --no-audit; fi

build: deps
	$(NODE_BIN)/tsc -p tsconfig.json

# The linter (eslint.config.js: typescript-eslint with type information, lines of at most 120
# columns) and the formatter's check (.prettierrc.json, .prettierignore); reports both, fails if
# either finds something. `npm run format` rewrites files in Prettier's style.
lint: node-deps
	@status=0; \
	$(NODE_BIN)/eslint . || status=1; \
	$(NODE_BIN)/prettier --check --log-level warn . || status=1; \
	if [ $$status -eq 0 ]; then echo "lint: eslint and prettier found nothing"; fi; \
	exit $$status

# Serves the gateway on http://127.0.0.1:8080, and on https://127.0.0.1:8443 with a self-signed
# certificate for kubectl (KITELINE_TLS_PORT= turns that off). With no KUBECONFIG, an embedded
# control plane in .kiteline/host, with a node, is the host cluster.
run: build
	@if [ -z "$$KUBECONFIG" ]; then \
	  node bin/kiteline.js controlplane start --dir $(HOST_DIR) --name host --node && \
	  export KUBECONFIG=$(CURDIR)/$(HOST_DIR)/kubeconfig; \
	fi; export KITELINE_TLS_PORT=$${KITELINE_TLS_PORT-8443}; exec node bin/kiteline.js serve

stop:
	node bin/kiteline.js controlplane stop --dir $(HOST_DIR)

# kiteline's own image (deploy/Dockerfile, built with buildah; no daemon, no registry) as an OCI
# archive in ~/.cache/kiteline/images; rebuilt only when its inputs change. test/in-cluster.test.ts
# runs it on the host plane's node.
image:
	bash scripts/build-image.sh

# A built web UI (UI_DIR: Kite's static/ directory) packed into an image for deploy/optional/ui
# (docs/ui.md): an OCI archive in ~/.cache/kiteline/images, its reference in kiteline-ui.ref.
ui-image:
	@test -n "$(UI_DIR)" || { echo 'make ui-image UI_DIR=<a built UI directory>' >&2; exit 2; }
	bash scripts/build-ui-image.sh "$(UI_DIR)"

# An image for the kubectl console (docs/workloads.md): this release's kubectl and busybox, an
# OCI archive in ~/.cache/kiteline/images, its reference in kubectl.ref.
kubectl-image:
	bash scripts/build-kubectl-image.sh

test: lint build image test-only

test-only:
	bash scripts/run-tests.sh

bench: build
	node dist/bench/run.js

# GET /api/v1/search on a cluster of 5,000 objects (docs/benchmarks.md, "Search").
bench-search: build
	node dist/bench/search.js

# A thousand clusters on one replica, then shared by three (docs/fleet.md, "Sizing").
bench-fleet: build
	node dist/bench/fleet.js

soak: build
	node dist/bench/soak.js

clean:
	-node bin/kiteline.js controlplane stop --dir $(HOST_DIR)
	rm -rf dist .kiteline
