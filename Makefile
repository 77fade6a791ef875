# informerd: the README gives the two commands that matter, `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

BIN         := .cache/bin
CLUSTER_DIR ?= .cluster
# make test runs against a control plane of its own, stopped at the end, so that a developer's
# `make cluster` is neither disturbed nor required.
TEST_CLUSTER_DIR := .cache/test-cluster
K8S_PKG     := k8s.io/kubernetes/cmd

export GOFLAGS := -buildvcs=false

.PHONY: help
help:
	@echo "make demo          local demo: control plane, seeded pods, informerd, a client"
	@echo "make test          the whole test suite (unit, integration against the control plane)"
	@echo "make image         the container image, without a daemon: .cache/image/informerd.oci.tar"
	@echo "                   (OCI layout) and informerd.docker.tar (docker load); docs/operating.md: The image"
	@echo "make cluster       start etcd, kube-apiserver, kube-controller-manager on 127.0.0.1"
	@echo "make cluster-down  stop them (and the nodes)"
	@echo "make node NODES=N  N real nodes in that control plane (kubelet, containerd, runc, CNI, kube-proxy;"
	@echo "                   kube-scheduler): deploy/ runs as pods; docs/operating.md: Real nodes"
	@echo "make node-down     stop the nodes"
	@echo "make test-node     deploy/example, deploy/node and deploy/service as pods on two real nodes (make test runs it too)"
	@echo "make seed PODS=N NAMESPACES=M   create realistic pods in the running cluster"
	@echo "make deploy-rbac   regenerate deploy/sidecar/rbac.yaml and deploy/service/rbac.yaml from their informerd.yaml"
	@echo "make rust-package  cargo package of the Rust client and its API crate (make test runs it)"
	@echo "make monitoring-rules  regenerate deploy/monitoring/prometheusrule.yaml from informerd-rules.yaml"
	@echo "make fuzz          the fuzz targets' long form (FUZZ_CASES=100000 per property; make test runs 256)"
	@echo "make bench         memory per pod: informerd's profiles against kube-rs and client-go caches"
	@echo "                   (BENCH_PODS=10000,50000,100000,150000 by default; results in benches/results/compare.*)"
	@echo "make bench-large   the same at 500,000 pods (BENCH_PODS=N), on a control plane of its own"
	@echo "                   whose pods are written straight into etcd (benches/results/compare-500k.*)"
	@echo "make bench-nvsentinel  100,000 GPU nodes and 1.4 million pods, one informerd and ten consumer"
	@echo "                   processes, on a control plane of its own (benches/results/nvsentinel.*)"
	@echo "make bench-adapters  controller heap: controller-runtime's own cache against the informerd"
	@echo "                   adapter, 1 and 3 controllers, and kube-rs stores over the same pods"
	@echo "                   (BENCH_PODS=10000,50000; benches/results/adapters.*)"
	@echo "make bench-calls   what a Get and a List of 5 pods cost a Go controller, end to end, against an"
	@echo "                   empty call, in the running cluster (CALLS_PODS=5000; benches/results/calls.*)"
	@echo "make crcache-suite controller-runtime's own pkg/cache test suite against crcache, on a control"
	@echo "                   plane of its own (clients/go/crcache/conformance; log in .cache/crcache-suite)"
	@echo "make chaos         the chaos suite's long form (CHAOS_ROUNDS=5 CHAOS_CHURN_SECONDS=20 ...;"
	@echo "                   table in benches/results/chaos.md)"
	@echo "make bench-restart warm (snapshot) against cold start on a control plane of its own"
	@echo "                   (BENCH_PODS=N; results in benches/results/restart.md)"
	@echo "make bench-storm   300 clients reconnecting at once (cold and warm restart, a cut) on a control"
	@echo "                   plane of its own (STORM_OBJECTS=10000; benches/results/storm.md)"
	@echo "make soak          churn, subscribers and a fault a minute for DURATION=10m (default);"
	@echo "                   benches/results/soak.json and soak.svg, and the memory slope"

# --- the control plane, built from source through the Go module proxy -------------------------
# The Kubernetes binaries are stamped with the release tools/go.mod names, as Kubernetes' own
# build does (hack/lib/version.sh: -X on k8s.io/component-base/version and
# k8s.io/client-go/pkg/version), so that /version and `kubectl version` report v1.36.3 instead
# of v0.0.0-master. The module proxy does not say which git commit a release is, so gitCommit is
# left empty rather than the placeholder; buildDate is the time of the build, as in version.sh.
K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2; exit }' tools/go.mod)
K8S_MAJOR   := $(word 1,$(subst ., ,$(patsubst v%,%,$(K8S_VERSION))))
K8S_MINOR   := $(word 2,$(subst ., ,$(K8S_VERSION)))
k8s_stamp    = $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version, \
  -X '$(pkg).gitVersion=$(K8S_VERSION)' -X '$(pkg).gitMajor=$(K8S_MAJOR)' \
  -X '$(pkg).gitMinor=$(K8S_MINOR)' -X '$(pkg).gitCommit=' -X '$(pkg).gitTreeState=clean' \
  -X '$(pkg).buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ)')
K8S_LDFLAGS  = -s -w $(k8s_stamp)

$(BIN)/kube-apiserver $(BIN)/kube-controller-manager &: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	@echo "building kube-apiserver and kube-controller-manager $(K8S_VERSION) (the first build takes minutes)"
	cd tools && go build -ldflags="$(K8S_LDFLAGS)" -o ../$(BIN)/ $(K8S_PKG)/kube-apiserver $(K8S_PKG)/kube-controller-manager
	@touch $(BIN)/kube-apiserver $(BIN)/kube-controller-manager

# kubectl from the same release, for the tests that apply deploy/ as a user would.
$(BIN)/kubectl: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && go build -ldflags="$(K8S_LDFLAGS)" -o ../$(BIN)/ $(K8S_PKG)/kubectl

# Each tool is rebuilt when its own sources (or the module) change.
.SECONDEXPANSION:
$(BIN)/etcd $(BIN)/cluster $(BIN)/seed $(BIN)/peer-clientgo: $(BIN)/%: tools/go.mod tools/go.sum $$(wildcard tools/cmd/$$*/*.go)
	@mkdir -p $(BIN)
	cd tools && go build -ldflags='-s -w' -o ../$(BIN)/ ./cmd/$*

# grpcurl, for the tests that call the API the way a user would (through server reflection).
GRPCURL_VERSION := v1.9.3
$(BIN)/grpcurl:
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) GOFLAGS= go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

# staticcheck, which make test runs over every Go module (the client modules, tools/ and
# tools/cmd/image): a release built with (and so able to read) the Go that the modules name.
STATICCHECK_VERSION := v0.8.2
$(BIN)/staticcheck:
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) GOFLAGS= go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# promtool, which make test runs over deploy/monitoring (`check rules`, `test rules`), and
# metricnames, which lists the metrics a PromQL expression names for tests/monitoring.rs: both
# built from tools/cmd/metricnames's module, whose go.mod pins the Prometheus release (its `tool`
# line names promtool), so that the rules are checked and their names read by the same parser.
# Decision: only ./cmd/promtool, with -trimpath, rather than the whole Prometheus server. Cold
# (empty Go build cache) it is still about 12 CPU-minutes, as promtool links Prometheus's
# service discovery and its cloud SDKs; after that Go's build cache makes it seconds.
$(BIN)/promtool $(BIN)/metricnames &: tools/cmd/metricnames/go.mod tools/cmd/metricnames/go.sum $(wildcard tools/cmd/metricnames/*.go)
	@mkdir -p $(BIN)
	cd tools/cmd/metricnames && go build -trimpath -ldflags='-s -w' -o $(abspath $(BIN))/ github.com/prometheus/prometheus/cmd/promtool .
	@touch $(BIN)/promtool $(BIN)/metricnames

# helm, which make test lints and renders deploy/helm/informerd with (tests/helm/): built from
# tools/cmd/helm's module, whose go.mod pins the release (its `tool` line names the command),
# stamped as Helm's own Makefile stamps a release: its version, and the Kubernetes version of its
# client-go as the one `helm template` and `helm lint` assume without a cluster (unstamped, 1.20,
# older than the native sidecars the chart renders).
HELM_VERSION    := $(shell awk '$$1 == "helm.sh/helm/v3" { print $$2; exit }' tools/cmd/helm/go.mod)
HELM_K8S_MINOR  := $(word 2,$(subst ., ,$(shell awk '$$1 == "k8s.io/client-go" { print $$2; exit }' tools/cmd/helm/go.mod)))
HELM_LDFLAGS     = -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
  -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
  $(foreach pkg,pkg/lint/rules pkg/chartutil,-X helm.sh/helm/v3/$(pkg).k8sVersionMajor=1 \
    -X helm.sh/helm/v3/$(pkg).k8sVersionMinor=$(HELM_K8S_MINOR))
$(BIN)/helm: tools/cmd/helm/go.mod tools/cmd/helm/go.sum
	@mkdir -p $(BIN)
	cd tools/cmd/helm && go build -trimpath -ldflags='$(HELM_LDFLAGS)' -o $(abspath $(BIN))/ helm.sh/helm/v3/cmd/helm

.PHONY: control-plane tools
control-plane: $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/etcd $(BIN)/cluster
tools: control-plane $(BIN)/seed

.PHONY: cluster
cluster: control-plane
	@$(BIN)/cluster up --dir $(CLUSTER_DIR) --bin $(BIN)

.PHONY: cluster-down
cluster-down: node-down
	@if [ -x $(BIN)/cluster ]; then $(BIN)/cluster down --dir $(CLUSTER_DIR); fi

# --- real nodes: kubelet, containerd, runc, CNI, kube-proxy; kube-scheduler beside them -------
# Everything from source through the Go module proxy, at pinned releases; tools/cmd/node starts
# and stops them (docs/operating.md: Real nodes). The Kubernetes binaries are tools/go.mod's
# release, built like kube-apiserver.
CONTAINERD_VERSION  := v2.3.7
RUNC_VERSION        := v1.5.3
CNI_PLUGINS_VERSION := v1.10.0
NODE_IMAGES         := .cache/node-images
# The images every node imports (no registry): the pause image (from Kubernetes' own pause.c, at
# the tag its build/pause/Makefile gives), informerd's (make image) and the demo controller
# deploy/example names in its kustomization's `images:`.
DEMO_CONTROLLER_IMAGE := informerd-demo-controller:0.1.0
# The real-node tests add an agent for deploy/node/example-agent (tools/cmd/node-agent).
NODE_AGENT_IMAGE := informerd-node-agent:0.1.0
NODE_IMAGE_TARS = $(NODE_IMAGES)/pause.docker.tar $(IMAGE_DIR)/informerd.docker.tar \
  $(NODE_IMAGES)/demo-controller.docker.tar $(NODE_IMAGES)/node-agent.docker.tar

$(BIN)/kubelet $(BIN)/kube-scheduler $(BIN)/kube-proxy &: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && go build -ldflags="$(K8S_LDFLAGS)" -o ../$(BIN)/ $(K8S_PKG)/kubelet $(K8S_PKG)/kube-scheduler $(K8S_PKG)/kube-proxy
	@touch $(BIN)/kubelet $(BIN)/kube-scheduler $(BIN)/kube-proxy

# containerd v2 without the btrfs snapshotter (it needs btrfs headers; nodes use overlayfs).
$(BIN)/containerd $(BIN)/ctr $(BIN)/containerd-shim-runc-v2 &:
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) GOFLAGS= go install -tags no_btrfs \
	  -ldflags='-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)' \
	  $(foreach c,containerd ctr containerd-shim-runc-v2,github.com/containerd/containerd/v2/cmd/$(c)@$(CONTAINERD_VERSION))

# runc links libseccomp (cgo): the RuntimeDefault seccomp profile the manifests ask for.
$(BIN)/runc:
	@mkdir -p $(BIN)
	@[ -f /usr/include/seccomp.h ] || { echo "runc needs libseccomp's headers: apt-get install libseccomp-dev"; exit 1; }
	GOBIN=$(abspath $(BIN)) GOFLAGS= CGO_ENABLED=1 go install -tags seccomp -ldflags='-s -w' \
	  github.com/opencontainers/runc@$(RUNC_VERSION)

CNI_PLUGINS := main/bridge main/loopback ipam/host-local meta/portmap
$(foreach p,$(CNI_PLUGINS),$(BIN)/$(notdir $(p))) &:
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) GOFLAGS= go install \
	  -ldflags='-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(CNI_PLUGINS_VERSION)' \
	  $(foreach p,$(CNI_PLUGINS),github.com/containernetworking/plugins/plugins/$(p)@$(CNI_PLUGINS_VERSION))

NODE_BINS := kubelet kube-scheduler kube-proxy containerd ctr containerd-shim-runc-v2 runc \
  $(foreach p,$(CNI_PLUGINS),$(notdir $(p))) node

$(BIN)/node: tools/go.mod tools/go.sum $(wildcard tools/cmd/node/*.go)
	@mkdir -p $(BIN)
	cd tools && go build -ldflags='-s -w' -o ../$(BIN)/ ./cmd/node

# The pause image: Kubernetes' pause.c from the module tools/go.mod pins, static.
$(NODE_IMAGES)/pause.docker.tar: tools/go.mod $(BIN)/node
	@mkdir -p $(NODE_IMAGES)
	src=$$(cd tools && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause; \
	tag=$$(awk '$$1 == "TAG" { print $$3 }' $$src/Makefile); \
	gcc -Os -Wall -Werror -static -DVERSION=v$$tag-informerd -o $(NODE_IMAGES)/pause $$src/linux/pause.c && \
	strip $(NODE_IMAGES)/pause && \
	$(BIN)/node image --binary $(NODE_IMAGES)/pause --name pause:informerd --user 65535:65535 --out $@

# The demo controller as deploy/example/Dockerfile builds it, without a container engine.
$(NODE_IMAGES)/demo-controller.docker.tar: $(BIN)/node clients/go/go.mod $(shell find clients/go -name '*.go' -not -path '*/crcache/*')
	@mkdir -p $(NODE_IMAGES)
	cd clients/go && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $(abspath $(NODE_IMAGES))/demo ./examples/demo
	$(BIN)/node image --binary $(NODE_IMAGES)/demo --name $(DEMO_CONTROLLER_IMAGE) --out $@

$(NODE_IMAGES)/node-agent.docker.tar: $(BIN)/node $(wildcard tools/cmd/node-agent/*) clients/go/go.mod $(shell find clients/go -name '*.go' -not -path '*/crcache/*')
	@mkdir -p $(NODE_IMAGES)
	cd tools/cmd/node-agent && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $(abspath $(NODE_IMAGES))/node-agent .
	$(BIN)/node image --binary $(NODE_IMAGES)/node-agent --name $(NODE_AGENT_IMAGE) --out $@

.PHONY: node-bins node-images node node-down
node-bins: $(addprefix $(BIN)/,$(NODE_BINS))
node-images: $(NODE_IMAGES)/pause.docker.tar $(NODE_IMAGES)/demo-controller.docker.tar $(NODE_IMAGES)/node-agent.docker.tar image

# NODES real nodes in the running `make cluster` (root; nothing stays on the host after
# node-down or cluster-down). kubectl apply -k deploy/example then runs the example as pods.
NODES ?= 1
node: cluster node-bins node-images
	@$(BIN)/node up --cluster-dir $(CLUSTER_DIR) --bin $(BIN) --nodes $(NODES) $(addprefix --image ,$(NODE_IMAGE_TARS))

node-down:
	@if [ -x $(BIN)/node ]; then $(BIN)/node down --dir $(CLUSTER_DIR)/nodes; fi

# The manifests under deploy/ as pods on two real nodes (tools/cmd/node's tests), on a control
# plane of its own, stopped at the end; `make test` runs it after the other suites. helm installs
# deploy/helm/informerd there; the injection webhook is the image's informerd (make image).
NODE_TEST_CLUSTER_DIR := .cache/node-test-cluster
.PHONY: test-node
test-node: control-plane node-bins node-images $(BIN)/kubectl $(BIN)/helm
	@set -eo pipefail; \
	trap '$(BIN)/node down --dir $(NODE_TEST_CLUSTER_DIR)/nodes; $(BIN)/cluster down --dir $(NODE_TEST_CLUSTER_DIR)' EXIT; \
	$(BIN)/cluster up --dir $(NODE_TEST_CLUSTER_DIR) --bin $(BIN); \
	$(BIN)/node up --cluster-dir $(NODE_TEST_CLUSTER_DIR) --bin $(BIN) --nodes 2 $(addprefix --image ,$(NODE_IMAGE_TARS)); \
	(cd tools && INFORMERD_NODE_CLUSTER=$(abspath $(NODE_TEST_CLUSTER_DIR)) go test -count=1 -v ./cmd/node) 2>&1 \
	  | tee .cache/node-go-test.log || { echo "real nodes: what the failed tests printed"; \
	  awk -f tools/ci/go-test-failures.awk .cache/node-go-test.log; exit 1; }

PODS       ?= 1000
NAMESPACES ?= 10
.PHONY: seed
seed: cluster
	$(BIN)/seed pods --kubeconfig $(CLUSTER_DIR)/kubeconfig --pods $(PODS) --namespaces $(NAMESPACES)

# --- the image: a static (musl) informerd in a FROM scratch image, no container daemon -----------
# Decision: tools/cmd/image is a Go module of its own (go-containerregistry), so that it neither
# moves tools/go.mod's Kubernetes-pinned dependencies nor rebuilds the control plane.
MUSL_TARGET := x86_64-unknown-linux-musl
STATIC_BIN   = $(CARGO_TARGET)/$(MUSL_TARGET)/release/informerd
IMAGE_DIR   := .cache/image
IMAGE_OCI   := $(IMAGE_DIR)/informerd.oci.tar

$(BIN)/image: tools/cmd/image/go.mod tools/cmd/image/go.sum $(wildcard tools/cmd/image/*.go)
	@mkdir -p $(BIN)
	cd tools/cmd/image && go build -ldflags='-s -w' -o $(abspath $(BIN))/image .

# jemalloc and ring compile C: for musl with musl-gcc (Debian's musl-tools; CI's .ci/run installs
# it). The Rust target is added here when missing, as rustup needs no root.
.PHONY: static
static:
	@rustup target list --installed | grep -qx $(MUSL_TARGET) || rustup target add $(MUSL_TARGET)
	@command -v musl-gcc >/dev/null || { echo "musl-gcc is missing: apt-get install musl-tools"; exit 1; }
	CC_$(subst -,_,$(MUSL_TARGET))=musl-gcc cargo build --release --locked --target $(MUSL_TARGET) --bin informerd

# Decision: the image's copy loses the release profile's line tables (118 MB → 27 MB) and keeps
# its symbols, so that a panic's backtrace still names the functions.
.PHONY: image
image: static $(BIN)/image
	@mkdir -p $(IMAGE_DIR)
	strip --strip-debug -o $(IMAGE_DIR)/informerd $(STATIC_BIN)
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(BIN)/image build \
	  --cargo-toml Cargo.toml --binary $(IMAGE_DIR)/informerd --revision "$$(git rev-parse HEAD 2>/dev/null)" \
	  --oci $(IMAGE_OCI) --docker $(IMAGE_DIR)/informerd.docker.tar

# --- tests ---------------------------------------------------------------------------------------
# The fuzz targets (tests/fuzz) with many more generated cases than `make test`'s 256; a failure
# is saved under proptest-regressions/fuzz/ (commit it: every later run tries it first).
FUZZ_CASES ?= 100000
.PHONY: fuzz
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release --test fuzz

# Where cargo puts the binary the client tests run as a sidecar.
CARGO_TARGET := $(or $(CARGO_TARGET_DIR),target)

# The Prometheus project's Python client, whose OpenMetrics parser tests/metrics.rs reads
# /metrics with (a virtualenv of its own, from PyPI).
PROMETHEUS_CLIENT_VERSION := 0.26.0
PROMPARSE := .cache/promparse/bin/python
$(PROMPARSE):
	rm -rf .cache/promparse
	python3 -m venv .cache/promparse
	.cache/promparse/bin/python -m pip install --quiet --disable-pip-version-check \
	  prometheus_client==$(PROMETHEUS_CLIENT_VERSION)

.PHONY: test
test: tools $(BIN)/grpcurl $(BIN)/kubectl $(BIN)/helm $(BIN)/staticcheck $(BIN)/promtool $(BIN)/metricnames image $(PROMPARSE) node-bins node-images
	@set -eo pipefail; trap '$(BIN)/cluster down --dir $(TEST_CLUSTER_DIR)' EXIT; \
	$(BIN)/cluster up --dir $(TEST_CLUSTER_DIR) --bin $(BIN); \
	(cd tools && go vet ./... && $(abspath $(BIN))/staticcheck ./... && INFORMERD_KUBECONFIG=$(abspath $(TEST_CLUSTER_DIR))/kubeconfig go test ./...); \
	(cd tools/cmd/image && go vet ./... && $(abspath $(BIN))/staticcheck ./... && INFORMERD_IMAGE=$(abspath $(IMAGE_OCI)) go test -count=1 -v ./...) 2>&1 | tee .cache/image-test.log; \
	(cd tools/cmd/metricnames && go vet ./... && $(abspath $(BIN))/staticcheck ./... && go test -count=1 ./...); \
	(cd tools/cmd/consumer && go vet ./... && $(abspath $(BIN))/staticcheck ./...); \
	$(BIN)/promtool check rules $(MONITORING)/informerd-rules.yaml; \
	$(BIN)/promtool test rules $(MONITORING)/tests/*.yaml; \
	INFORMERD_CLUSTER_DIR=$(abspath $(TEST_CLUSTER_DIR)) cargo test --workspace 2>&1 | tee .cache/cargo-test.log; \
	cargo build --bin informerd; \
	$(MAKE) --no-print-directory rust-package; \
	export INFORMERD_BIN=$(abspath $(CARGO_TARGET))/debug/informerd \
	  INFORMERD_KUBECONFIG=$(abspath $(TEST_CLUSTER_DIR))/kubeconfig \
	  INFORMERD_SEED_BIN=$(abspath $(BIN))/seed; \
	(cd clients/go && go vet ./... && $(abspath $(BIN))/staticcheck ./... ./crcache/... && go test -count=1 -v ./... && cd crcache && go vet ./... && go test -count=1 -v ./...) 2>&1 | tee .cache/go-client-test.log \
	  || { echo "go client: what the failed tests printed"; awk -f tools/ci/go-test-failures.awk .cache/go-client-test.log; exit 1; }; \
	$(MAKE) --no-print-directory crcache-suite 2>&1 | tee .cache/crcache-suite-test.log; \
	$(MAKE) --no-print-directory nvsentinel-short; \
	clients/python/run-tests.sh -v 2>&1 | tee .cache/python-client-test.log; \
	$(MAKE) --no-print-directory test-node 2>&1 | tee .cache/node-test.log; \
	awk '/^test result:/ { p += $$4; f += $$6 } END { printf "tests: cargo %d passed, %d failed; ", p, f }' .cache/cargo-test.log; \
	awk '/^--- PASS/ { p++ } /^--- FAIL/ { f++ } END { printf "go client %d passed, %d failed; ", p, f }' .cache/go-client-test.log; \
	awk '/^--- PASS/ { p++ } /^--- FAIL/ { f++ } END { printf "image %d passed, %d failed; ", p, f }' .cache/image-test.log; \
	awk '/ PASSED/ { p++ } / FAILED/ { f++ } END { printf "python client %d passed, %d failed; ", p, f }' .cache/python-client-test.log; \
	awk '/^--- PASS/ { p++ } /^--- FAIL/ { f++ } END { printf "real nodes %d passed, %d failed\n", p, f }' .cache/node-test.log; \
	grep -h '^crcache suite: [0-9]* specs' .cache/crcache-suite-test.log

# --- deploy/ ------------------------------------------------------------------------------------
# deploy/sidecar's RBAC, generated from the sidecar's configuration for the example's
# ServiceAccount; tests/deploy.rs reruns the command the file's first line records and fails
# while the committed file differs.
.PHONY: deploy-rbac
deploy-rbac:
	cargo build --quiet --bin informerd
	$(CARGO_TARGET)/debug/informerd rbac --config deploy/sidecar/informerd.yaml \
	  --service-account controller --service-account-namespace informerd-example \
	  --name informerd-example > deploy/sidecar/rbac.yaml.tmp
	mv deploy/sidecar/rbac.yaml.tmp deploy/sidecar/rbac.yaml
	$(CARGO_TARGET)/debug/informerd rbac --config deploy/service/informerd.yaml \
	  --service-account informerd --service-account-namespace informerd-service \
	  --name informerd-service > deploy/service/rbac.yaml.tmp
	mv deploy/service/rbac.yaml.tmp deploy/service/rbac.yaml

# --- the Rust client as a crate ------------------------------------------------------------------
# `cargo package` of the client and the API crate it depends on, each built from its own
# tarball as a dependent would get it (make test runs it; the .crate files land in the target
# dir's package/). Decision: K8S_OPENAPI_ENABLED_VERSION names the Kubernetes version only for
# this check: the client, as every kube-rs library, leaves that choice (a k8s-openapi feature) to
# the application, and a library built alone needs one.
.PHONY: rust-package
# Decision: the copies of informerd-proto that earlier runs unpacked from cargo's local overlay
# registry (`$$CARGO_HOME/registry/{src,cache}/-HASH/`) are removed first, and so are its
# compiled artifacts (`cargo clean -p`). Cargo never unpacks a name and version it has unpacked
# before, and never rebuilds a registry crate it has built, so after an API change the client was
# verified against the old API (CI hit it: HeldObjects not found). Only those overlay folders
# (named `-HASH`, not a registry's name) are touched.
rust-package:
	cargo clean --quiet -p informerd-proto
	rm -rf $${CARGO_HOME:-$$HOME/.cargo}/registry/src/-*/informerd-proto-* $${CARGO_HOME:-$$HOME/.cargo}/registry/cache/-*/informerd-proto-*
	K8S_OPENAPI_ENABLED_VERSION=1.36 cargo package --quiet --allow-dirty -p informerd-proto -p informerd-client

# --- deploy/monitoring ---------------------------------------------------------------------------
# The alerting rules as a Prometheus Operator PrometheusRule, generated from the plain rule file
# that promtool checks and tests; tests/monitoring.rs fails while the committed file differs.
# Decision: one source, the plain file, and the wrapper generated and committed: promtool reads
# only plain rule files, and kustomize cannot put a file's content into a resource's spec; so
# what promtool tests is exactly what the Operator loads, and `kubectl apply -k` needs nothing.
MONITORING := deploy/monitoring
.PHONY: monitoring-rules
monitoring-rules:
	{ echo '# Generated by `make monitoring-rules` from informerd-rules.yaml: edit that file, then run it'; \
	  echo '# (tests/monitoring.rs fails while the two differ). The alerting rules as a Prometheus'; \
	  echo '# Operator PrometheusRule, which kustomization.yaml applies; README.md is the runbook.'; \
	  printf 'apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: informerd\n'; \
	  printf '  labels:\n    app.kubernetes.io/name: informerd\nspec:\n'; \
	  sed -e '/^#/d' -e 's/^\(.\)/  \1/' $(MONITORING)/informerd-rules.yaml; } > $(MONITORING)/prometheusrule.yaml.tmp
	mv $(MONITORING)/prometheusrule.yaml.tmp $(MONITORING)/prometheusrule.yaml

# --- the memory comparison (benches/compare.rs documents its BENCH_* settings) ---------------
.PHONY: bench
bench: cluster $(BIN)/seed $(BIN)/peer-clientgo
	cargo build --release -p informerd-peers
	INFORMERD_CLUSTER_DIR=$(abspath $(CLUSTER_DIR)) cargo bench --bench compare

# --- the memory comparison at 500,000 pods, on a control plane of its own ----------------------
# Decision: at this scale the control plane is set up for the benchmark, not like a cluster:
# - the apiserver keeps no watch cache of pods (--watch-cache-sizes=pods#0): it would hold every
#   pod decoded, about what client-go's informer holds (23 KB each at 150,000 pods: 11 GB at
#   500,000, above the apiserver's GOMEMLIMIT); lists and streaming lists are served from etcd;
# - the pods are written straight into etcd (`seed pods --etcd`, tools/cmd/seed/etcd.go): the
#   same pods as through the apiserver, in minutes instead of over two hours;
# - so without the garbage collector, which would delete those pods (their owners are not
#   written) and hold a graph of every pod besides.
# The control plane (its etcd holds several GB) is stopped at the end; the next run seeds again.
BENCH_LARGE_CLUSTER_DIR := .cache/bench-large-cluster
BENCH_LARGE_CONTROLLERS := namespace-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller
.PHONY: bench-large
bench-large: control-plane $(BIN)/seed $(BIN)/peer-clientgo
	cargo build --release -p informerd-peers
	@set -eo pipefail; trap '$(BIN)/cluster down --dir $(BENCH_LARGE_CLUSTER_DIR)' EXIT; \
	$(BIN)/cluster up --dir $(BENCH_LARGE_CLUSTER_DIR) --bin $(BIN) \
	  --apiserver-arg=--watch-cache-sizes=pods#0 --controllers $(BENCH_LARGE_CONTROLLERS); \
	BENCH_PODS=$${BENCH_PODS:-500000} BENCH_SEED=etcd BENCH_OUT=$${BENCH_OUT:-compare-500k} \
	  INFORMERD_CLUSTER_DIR=$(abspath $(BENCH_LARGE_CLUSTER_DIR)) cargo bench --bench compare

# --- warm against cold restart (benches/restart.rs), on a control plane of its own -------------
BENCH_RESTART_CLUSTER_DIR := .cache/bench-restart-cluster
.PHONY: bench-restart
bench-restart: tools $(BIN)/seed
	@set -eo pipefail; trap '$(BIN)/cluster down --dir $(BENCH_RESTART_CLUSTER_DIR)' EXIT; \
	$(BIN)/cluster up --dir $(BENCH_RESTART_CLUSTER_DIR) --bin $(BIN); \
	BENCH_PODS=$(BENCH_PODS) INFORMERD_CLUSTER_DIR=$(abspath $(BENCH_RESTART_CLUSTER_DIR)) \
	  cargo bench --bench restart

# --- reconnect storms (benches/storm.rs documents its STORM_* settings): 300 clients reconnecting
# at once after a cold restart, a warm restart and a cut; a private control plane, stopped at the
# end (the seeding of STORM_OBJECTS pods is most of the run's time). --------------------------------
BENCH_STORM_CLUSTER_DIR := .cache/bench-storm-cluster
STORM_OBJECTS ?= 10000
# Decision: pods written straight into etcd (STORM_SEED=etcd, for 100,000) have owners that are
# not written, so that control plane runs without the garbage collector, as bench-large's.
STORM_SEED ?= apply
.PHONY: bench-storm
bench-storm: tools $(BIN)/seed
	@set -eo pipefail; trap '$(BIN)/cluster down --dir $(BENCH_STORM_CLUSTER_DIR)' EXIT; \
	$(BIN)/cluster up --dir $(BENCH_STORM_CLUSTER_DIR) --bin $(BIN) \
	  $(if $(filter etcd,$(STORM_SEED)),--controllers $(BENCH_LARGE_CONTROLLERS)); \
	STORM_OBJECTS=$(STORM_OBJECTS) STORM_SEED=$(STORM_SEED) \
	  INFORMERD_CLUSTER_DIR=$(abspath $(BENCH_STORM_CLUSTER_DIR)) cargo bench --bench storm

# --- delta resume on a failover (benches/delta_resume.rs documents it): a client moves to another
# replica after 1% of DELTA_PODS pods changed; objects and bytes of the delta against a full
# relist. A private control plane without the garbage collector (pods written into etcd) ---------
BENCH_DELTA_CLUSTER_DIR := .cache/bench-delta-cluster
DELTA_PODS ?= 100000
DELTA_SEED ?= etcd
.PHONY: bench-delta
bench-delta: tools $(BIN)/seed
	@set -eo pipefail; trap '$(BIN)/cluster down --dir $(BENCH_DELTA_CLUSTER_DIR)' EXIT; \
	$(BIN)/cluster up --dir $(BENCH_DELTA_CLUSTER_DIR) --bin $(BIN) \
	  $(if $(filter etcd,$(DELTA_SEED)),--controllers $(BENCH_LARGE_CONTROLLERS)); \
	DELTA_PODS=$(DELTA_PODS) DELTA_SEED=$(DELTA_SEED) \
	  INFORMERD_CLUSTER_DIR=$(abspath $(BENCH_DELTA_CLUSTER_DIR)) cargo bench --bench delta_resume

# --- the NVSentinel profile (benches/nvsentinel.rs documents it): 100,000 GPU nodes and 1.4 million
# DaemonSet pods written into etcd (about 20 minutes), one informerd caching both, ten consumer
# processes (tools/cmd/consumer) reading through it. A private control plane, stopped at the end:
# - etcd's backend quota raised to 16 GiB (tools/cmd/etcd's default is 8 GiB, about what is
#   written; past its quota etcd refuses every write);
# - no watch cache of pods and nodes in the apiserver (it would hold every object decoded, many
#   GiB), so informerd's lists are served from etcd in pages, as bench-large's;
# - no PodSecurity admission plugin: nothing here is admitted through it (the pods are written
#   into etcd), and it is one more user of the apiserver's own informer of every pod. That
#   informer stays: kube-apiserver's ServiceAccount token authenticator keeps listers of all
#   pods and nodes (pkg/kubeapiserver/options/authentication.go), about 7 KB per pod, so the
#   apiserver is this benchmark's largest process (docs/benchmarks.md): it runs with Go's
#   default GOGC and a 14 GiB GOMEMLIMIT, where the 8 GiB of other clusters made it spend its
#   CPU collecting and serve lists at 150 pods/s;
# - etcd's history kept 2 hours, not 5 minutes, and no compaction by the apiserver (every 5
#   minutes by default): a paginated list from etcd that takes longer than the history
#   (700,000 pods did) ends with 410 Expired and starts over, again and again;
# - no garbage collector (the pods' owners are not written) and no node lifecycle controller
#   (no kubelet renews the fake nodes' leases: it would taint them and evict every pod).
BENCH_NVS_CLUSTER_DIR := .cache/bench-nvsentinel-cluster
# $(1): the control plane's directory; $(2): the cargo command that runs the benchmark, with its
# NVS_* settings.
define nvsentinel_run
	cd tools/cmd/consumer && go build -o $(abspath .cache)/consumer .
	@set -eo pipefail; trap '$(BIN)/cluster down --dir $(1)' EXIT; \
	$(BIN)/cluster up --dir $(1) --bin $(BIN) \
	  --etcd-arg=--quota-backend-bytes=17179869184 --apiserver-gogc=100 --apiserver-memory-limit=14GiB \
	  --apiserver-arg=--watch-cache-sizes=pods#0,nodes#0 --apiserver-arg=--disable-admission-plugins=PodSecurity \
	  --apiserver-arg=--etcd-compaction-interval=0 --etcd-arg=--auto-compaction-retention=2h \
	  --controllers $(BENCH_LARGE_CONTROLLERS); \
	NVS_CONSUMER=$(abspath .cache)/consumer INFORMERD_CLUSTER_DIR=$(abspath $(1)) $(2)
endef
.PHONY: bench-nvsentinel
bench-nvsentinel: tools $(BIN)/seed
	$(call nvsentinel_run,$(BENCH_NVS_CLUSTER_DIR),cargo bench --bench nvsentinel)

# Its short form, in make test: 100 nodes and 1,400 pods, a debug build, nothing written.
BENCH_NVS_SHORT_DIR := .cache/nvsentinel-short-cluster
.PHONY: nvsentinel-short
nvsentinel-short: tools $(BIN)/seed
	$(call nvsentinel_run,$(BENCH_NVS_SHORT_DIR),NVS_NODES=100 NVS_HOLD_SECONDS=5 NVS_OUT=- cargo test --bench nvsentinel)

# --- controller heap, own cache against the informerd adapter (clients/go/crcache/cmd/heapbench
# documents it; BENCH_PODS=10000,50000 by default); a private control plane, stopped at the end --
.PHONY: bench-adapters
bench-adapters: control-plane $(BIN)/seed
	cargo build --release --bin informerd
	cd clients/go/crcache && go build -o $(abspath .cache)/heapbench ./cmd/heapbench
	.cache/heapbench run --bin $(abspath $(BIN)) --informerd $(abspath $(CARGO_TARGET))/release/informerd \
	  --pods $${BENCH_PODS:-10000,50000} --out benches/results/adapters \
	  --kube-rs "INFORMERD_BIN=$(abspath $(CARGO_TARGET))/release/informerd cargo bench -p informerd-client --bench controller_store"

# --- the per-call cost of a Go controller's reads (clients/go/crcache/cmd/callbench documents it):
# Get and List of 5 pods through the Go client and crcache against an empty call, over the
# cluster of `make cluster` (a namespace of its own, deleted at the end), as `make bench` --------
.PHONY: bench-calls
bench-calls: cluster $(BIN)/seed
	cargo build --release --bin informerd
	cd clients/go/crcache && go build -o $(abspath .cache)/callbench ./cmd/callbench
	.cache/callbench --kubeconfig $(abspath $(CLUSTER_DIR))/kubeconfig --seed $(abspath $(BIN))/seed \
	  --informerd $(abspath $(CARGO_TARGET))/release/informerd --pods $${CALLS_PODS:-5000} \
	  --seconds $${CALLS_SECONDS:-5} --out benches/results/calls

# --- controller-runtime's own pkg/cache suite (v0.24.1) against crcache: the vendored specs
# (clients/go/crcache/conformance, UPSTREAM.md) on a control plane of their own, started like
# envtest's (no kube-controller-manager: no default ServiceAccounts, which a spec counts), and
# a sidecar caching every kind the specs read. The record of the changes to upstream's files is
# checked first; then every spec runs, and the summary lists those that failed, by reason. It
# fails when a spec fails that expected-failures.txt does not list (or a spec listed as failing
# by design passes); the summary decides, from the test events and Ginkgo's report, so go
# test's own status is not used. CRCACHE_SUITE_BASELINE=1 runs the same specs on the same harness with
# controller-runtime's own cache instead (all pass: what fails with crcache is crcache's).
# `make test` runs it after the Go clients' tests. ---------------------------------------------------------------------------
CRCACHE_SUITE_CLUSTER_DIR := .cache/crcache-suite-cluster
CRCACHE_SUITE_DIR         := .cache/crcache-suite
.PHONY: crcache-suite
crcache-suite: control-plane $(BIN)/staticcheck
	cargo build --bin informerd
	@set -eo pipefail; start=$$(date +%s); mkdir -p $(CRCACHE_SUITE_DIR); \
	trap 'echo "crcache suite: $$(( $$(date +%s) - start )) s in all"; $(abspath $(BIN))/cluster down --dir $(abspath $(CRCACHE_SUITE_CLUSTER_DIR))' EXIT; \
	$(BIN)/cluster up --dir $(CRCACHE_SUITE_CLUSTER_DIR) --bin $(BIN) --controller-manager=false; \
	cd clients/go/crcache/conformance; \
	go vet ./...; $(abspath $(BIN))/staticcheck ./...; test -z "$$(gofmt -l . | tee /dev/stderr)"; \
	go test -count=1 -run TestUpstream .; go test -count=1 ./cmd/...; \
	go build -o $(abspath $(CRCACHE_SUITE_DIR))/suitesummary ./cmd/suitesummary; \
	rm -f $(abspath $(CRCACHE_SUITE_DIR))/report.json $(abspath $(CRCACHE_SUITE_DIR))/informerd-*.log; \
	export INFORMERD_BIN=$(abspath $(CARGO_TARGET))/debug/informerd \
	  INFORMERD_KUBECONFIG=$(abspath $(CRCACHE_SUITE_CLUSTER_DIR))/kubeconfig \
	  CRCACHE_SUITE_DIR=$(abspath $(CRCACHE_SUITE_DIR)); \
	  { go test -count=1 -json -timeout 40m -skip TestUpstream . -args \
	    -ginkgo.no-color -ginkgo.timeout=30m -ginkgo.json-report=$(abspath $(CRCACHE_SUITE_DIR))/report.json || true; } \
	  | $(abspath $(CRCACHE_SUITE_DIR))/suitesummary --ginkgo-report $(abspath $(CRCACHE_SUITE_DIR))/report.json \
	    --log $(abspath $(CRCACHE_SUITE_DIR))/suite.log $(if $(CRCACHE_SUITE_BASELINE),,--expected expected-failures.txt)

# --- the chaos suite's long form and the soak (tests/chaos/ documents their settings); make test
# runs one short round of the chaos suite. Both start a control plane of their own (they kill its
# apiservers), so they need the binaries, not `make cluster`.
# Decision: both build in release, informerd and the rig alike: their figures (reconvergence,
# memory) are those of the sidecar as deployed, and the rig's hundred subscribers, decoding
# every event in a debug build, made the test process the slowest part of a reconvergence. ---
CHAOS_ROUNDS        ?= 5
CHAOS_CHURN_SECONDS ?= 20
CHAOS_PODS          ?= 1000
.PHONY: chaos
chaos: control-plane $(BIN)/seed
	CHAOS_ROUNDS=$(CHAOS_ROUNDS) CHAOS_CHURN_SECONDS=$(CHAOS_CHURN_SECONDS) CHAOS_PODS=$(CHAOS_PODS) \
	  CHAOS_RESULTS=$(abspath benches/results/chaos.md) \
	  cargo test --release --test chaos informerd_tells_the_truth_under_faults -- --nocapture

DURATION ?= 10m
.PHONY: soak
soak: control-plane $(BIN)/seed
	SOAK_DURATION=$(DURATION) SOAK_RESULTS=$(abspath benches/results/soak.json) \
	  cargo test --release --test chaos soak::soak -- --ignored --nocapture

# --- the demo -----------------------------------------------------------------------------------
DEMO_PODS ?= 5000
DEMO_DIR  := .cache/demo
.PHONY: demo
demo: cluster $(BIN)/seed
	$(BIN)/seed pods --kubeconfig $(CLUSTER_DIR)/kubeconfig --prefix demo --pods $(DEMO_PODS) --namespaces 5
	cargo build --release --bin informerd
	@set -e; mkdir -p $(DEMO_DIR); rm -f $(DEMO_DIR)/informerd.sock; \
	echo "starting informerd with examples/demo.yaml (log: $(DEMO_DIR)/informerd.log)"; \
	RUST_LOG=info $(CARGO_TARGET)/release/informerd serve --config examples/demo.yaml \
	  --kubeconfig $(CLUSTER_DIR)/kubeconfig 2> $(DEMO_DIR)/informerd.log & pid=$$!; \
	trap 'kill $$pid 2>/dev/null' EXIT; \
	until [ -S $(DEMO_DIR)/informerd.sock ]; do \
	  kill -0 $$pid 2>/dev/null || { cat $(DEMO_DIR)/informerd.log; exit 1; }; sleep 0.2; done; \
	(cd clients/go && go run ./examples/demo --socket $(abspath $(DEMO_DIR))/informerd.sock \
	  --kubeconfig $(abspath $(CLUSTER_DIR))/kubeconfig --seed $(abspath $(BIN))/seed); \
	echo; echo "== the same sidecar from the command line: informerd status"; \
	$(CARGO_TARGET)/release/informerd status --socket $(DEMO_DIR)/informerd.sock
