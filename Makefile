# prefixroute — see README.md. Every tool the targets need is installed here,
# at a pinned version, into ./bin (git-ignored).

SHELL := /bin/bash
GO    ?= go
BIN   := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export GOBIN := $(BIN)

BUF_VERSION                := v1.75.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GRPCURL_VERSION            := v1.9.4
NATS_SERVER_VERSION        := v2.15.2
STATICCHECK_VERSION        := v0.8.2
ERRCHECK_VERSION           := v1.30.0
HELM_VERSION               := v4.3.2

BUF                := $(BIN)/.stamp-buf-$(BUF_VERSION)
PROTOC_GEN_GO      := $(BIN)/.stamp-protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
PROTOC_GEN_GO_GRPC := $(BIN)/.stamp-protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)
GRPCURL            := $(BIN)/.stamp-grpcurl-$(GRPCURL_VERSION)
NATS_SERVER        := $(BIN)/.stamp-nats-server-$(NATS_SERVER_VERSION)
STATICCHECK        := $(BIN)/.stamp-staticcheck-$(STATICCHECK_VERSION)
ERRCHECK           := $(BIN)/.stamp-errcheck-$(ERRCHECK_VERSION)
HELM               := $(BIN)/.stamp-helm-$(HELM_VERSION)

LISTEN      ?= 127.0.0.1:50051
HTTP_LISTEN ?= 127.0.0.1:9090
DATA_DIR    ?= $(CURDIR)/data
GOTEST_FLAGS ?= -race -count=1 -timeout 15m
BENCH_COUNT  ?= 5

.PHONY: all run run-nats run-replica build image test generate check-generate lint breaking api-baseline vet tools bench fuzz clean

all: build

$(BUF):
	$(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	@touch $@
$(PROTOC_GEN_GO):
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@touch $@
$(PROTOC_GEN_GO_GRPC):
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	@touch $@
$(GRPCURL):
	$(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	@touch $@

$(NATS_SERVER):
	$(GO) install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)
	@touch $@

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@touch $@
$(ERRCHECK):
	$(GO) install github.com/kisielk/errcheck@$(ERRCHECK_VERSION)
	@touch $@

# helm renders and lints deploy/helm/prefixroute in deploy/helm_test.go.
$(HELM):
	$(GO) install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	@touch $@

tools: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) $(GRPCURL) $(STATICCHECK) $(ERRCHECK) $(HELM)

## run: start the sidecar on its embedded default (loopback, state in ./data).
run:
	$(GO) run ./cmd/prefixrouted --listen $(LISTEN) --http-listen $(HTTP_LISTEN) --data-dir $(DATA_DIR)

## run-nats: a local NATS server with JetStream for several replicas
## (docs/replicas.md), state in ./data-nats.
NATS_DIR ?= $(CURDIR)/data-nats
run-nats: $(NATS_SERVER)
	nats-server -js -a 127.0.0.1 -p 4222 -sd $(NATS_DIR)

## run-replica: one more sidecar joined through run-nats: make run-replica N=2
N ?= 1
run-replica:
	$(GO) run ./cmd/prefixrouted --nats nats://127.0.0.1:4222 --nats-name r$(N) \
		--listen 127.0.0.1:$$((50050 + $(N))) --http-listen 127.0.0.1:$$((9089 + $(N))) --data-dir $(CURDIR)/data-r$(N)

## build: every binary of cmd/ into ./bin, static (CGO_ENABLED=0), stamped
## with VERSION (git describe) and REVISION; '<binary> --version' prints them.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILDINFO := github.com/prefixroute/prefixroute/internal/buildinfo
LDFLAGS   := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

## image: the container image of the Dockerfile (prefixrouted and prefixctl
## on a distroless non-root base), with docker or else podman.
IMAGE ?= prefixroute:$(VERSION)
image:
	@engine=$$(command -v docker || command -v podman || true); \
	if [ -z "$$engine" ]; then \
		echo "make image: neither docker nor podman is on PATH; install one (apt-get install -y podman)"; \
		echo "  or build elsewhere: docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) ."; \
		exit 1; fi; \
	if ! "$$engine" info >/dev/null 2>&1; then \
		echo "make image: $$engine is installed but cannot reach its daemon/service ('$$engine info' fails)"; exit 1; fi; \
	echo "$$engine build -t $(IMAGE) ."; \
	"$$engine" build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

## generate: regenerate api/ from proto/ with the pinned local plugins.
generate: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC)
	buf generate

## check-generate: fail when regenerating api/ changes anything.
check-generate: generate
	@if [ -n "$$(git status --porcelain -- api)" ]; then \
		echo "api/ is out of date with proto/: run 'make generate' and commit the result:"; \
		git status --porcelain -- api; git diff --stat -- api; exit 1; fi

lint: $(BUF)
	buf lint
	buf format --diff --exit-code

## breaking: compare proto/ with proto/baseline.binpb, an image of the API as
## gateways and instances already use it, and with the last release tag (v*)
## when there is one. A deliberate, reviewed API change rewrites the image
## with 'make api-baseline' in the same commit.
breaking: $(BUF)
	buf breaking --against proto/baseline.binpb
	@tag=$$(git describe --tags --abbrev=0 --match 'v*' 2>/dev/null); \
	if [ -n "$$tag" ]; then echo "buf breaking --against .git#tag=$$tag"; buf breaking --against ".git#tag=$$tag"; fi

## api-baseline: rewrite proto/baseline.binpb from proto/ (see breaking).
api-baseline: $(BUF)
	buf build -o proto/baseline.binpb

## vet: go vet, gofmt, staticcheck and errcheck (tests included). Any
## finding fails.
vet: $(STATICCHECK) errcheck
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^api/')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	staticcheck ./...

## errcheck: unchecked errors, tests included (the calls it may skip, and why,
## are in .errcheck-excludes). Part of 'make vet'.
.PHONY: errcheck
errcheck: $(ERRCHECK)
	errcheck -exclude .errcheck-excludes ./...

## test: everything CI checks. Tool builds included, well under 10 minutes.
test: tools test-deps check-generate lint breaking vet
	$(GO) test $(GOTEST_FLAGS) ./...
	# Allocation tests (TestXxxDoesNotAllocate, TestXxxAllocs, ...) skip under -race: run them without it.
	$(GO) test -count=1 -timeout 5m -run 'Alloc' ./...

## bench: the Go benchmarks behind BENCHMARKS.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./...

clean:
	rm -rf $(BIN)

## sim / sim-smoke: the simulator (issue 6; SIMULATION.md), then the smoke
## scenario live against prefixrouted child processes, tabled against its
## simulation (prefixload scenario --compare).
SIM_OUT       ?= out/sim
SIM_DOCS      ?= docs/sim
SIM_SCENARIOS ?= hotspot cutover canary rampcutover
SIM_FLAGS     ?=

.PHONY: sim sim-smoke

sim:
	$(GO) run ./cmd/prefixsim run --out $(SIM_OUT) $(SIM_FLAGS) $(SIM_SCENARIOS)
	mkdir -p $(SIM_DOCS)
	for s in $(SIM_SCENARIOS); do \
		cp $(SIM_OUT)/$$s/*.png $(SIM_DOCS)/ && \
		cp $(SIM_OUT)/$$s/summary.md $(SIM_DOCS)/$$s-summary.md || exit 1; \
	done
	$(GO) build -o $(BIN)/ ./cmd/prefixrouted ./cmd/prefixload
	$(BIN)/prefixload scenario --daemon $(BIN)/prefixrouted --out $(SIM_OUT) --duration 10s --no-plots --compare smoke

sim-smoke:
	$(GO) run ./cmd/prefixsim run --out $(SIM_OUT) --quiet --duration 20s smoke
	$(GO) build -o $(BIN)/ ./cmd/prefixrouted ./cmd/prefixload
	$(BIN)/prefixload scenario --daemon $(BIN)/prefixrouted --out $(SIM_OUT) --quiet --no-plots --duration 3s --compare smoke

FUZZTIME       ?= 60s
FUZZ_PKGS      ?= ./server/
LOADTEST_FLAGS ?=

.PHONY: fuzz loadtest loadtest-fleet

## fuzz: run every Fuzz* target of FUZZ_PKGS for FUZZTIME each; a failing
## input is saved under the package's testdata/fuzz/ and fails the target.
## Temporary data dirs go to /dev/shm (tmpfs), so SetWeights' fsyncs are cheap.
fuzz:
	@set -e; tmp=/tmp; [ -d /dev/shm ] && tmp=/dev/shm; \
	for pkg in $$($(GO) list $(FUZZ_PKGS)); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$t for $(FUZZTIME)"; \
			TMPDIR=$$tmp $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

## loadtest: build prefixrouted and prefixload, then run the load test of
## BENCHMARKS.md ("load test"): the daemon as a separate process on
## 127.0.0.1, bounded in time; exits 1 if any call failed.
loadtest:
	$(GO) build -o $(BIN)/ ./cmd/prefixrouted ./cmd/prefixload
	$(BIN)/prefixload --daemon $(BIN)/prefixrouted $(LOADTEST_FLAGS)

## loadtest-fleet: the fleet-scale scenario of BENCHMARKS.md (issue 17): one
## pool of FLEET_SIZES instances in 64 deployments, each reporting every
## 100 ms with 8 cache events, and 2,000 Picks/s offered; prints the daemon's
## CPU and Pick p50/p99 with the load generator's CPU apart. Each size runs
## FLEET_DURATION after a 5 s warm-up (not part of make test). FLEET_BATCH
## instances share a ReportLoadBatch stream and message, as the engines of
## one host do behind a node agent; 1: a ReportLoad stream per instance.
FLEET_SIZES ?= 1000 5000 10000
FLEET_DURATION ?= 30s
FLEET_BATCH ?= 8
loadtest-fleet:
	$(GO) build -o $(BIN)/ ./cmd/prefixrouted ./cmd/prefixload
	@set -e; for n in $(FLEET_SIZES); do \
		$(BIN)/prefixload --daemon $(BIN)/prefixrouted --pools 1 --deployments 64 --streams $$n \
			--conns $$(( (n + 40 * $(FLEET_BATCH) - 1) / (40 * $(FLEET_BATCH)) )) --batch $(FLEET_BATCH) \
			--rate 10 --events 8 --capacity 512 \
			--pick-rate 2000 --pickers 32 --duration $(FLEET_DURATION) $(LOADTEST_FLAGS); \
	done

## loadtest-cpu: the daemon's own CPU per call over gRPC (BENCHMARKS.md,
## issue 17): 64 instances in 4 deployments reporting 10/s, blocks of 500
## Health/Check calls and 500 Picks (NONE, CHOSEN, FULL) alternating on one
## connection, CPU_CALLS of each; the daemon a separate process whose CPU
## is read from /proc (not part of make test).
CPU_CALLS ?= 20000
loadtest-cpu:
	$(GO) build -o $(BIN)/ ./cmd/prefixrouted ./cmd/prefixload
	$(BIN)/prefixload --daemon $(BIN)/prefixrouted --pools 1 --deployments 4 --streams 64 --conns 2 \
		--rate 10 --events 8 --capacity 512 --cpu-per-call $(CPU_CALLS) $(LOADTEST_FLAGS)

## test-deps: Debian packages the tests need: python3-zmq and python3-msgpack
## for prefixagent's engine stand-in (internal/agent/testdata/engine.py);
## nginx and libnginx-mod-http-js (njs) for deploy/nginx's end-to-end test;
## chromium for the console's browser test (frontend/console).
.PHONY: test-deps loadtest-cpu
TEST_DEBS := python3-zmq python3-msgpack nginx libnginx-mod-http-js chromium
test-deps:
	@dpkg -s $(TEST_DEBS) >/dev/null 2>&1 || \
		(apt-get update && apt-get install -y $(TEST_DEBS))

## console-docs: the console's browser test with a 60 s ramp, writing the
## screenshots of docs/console.md to docs/console/ (and out/console/).
.PHONY: console-docs
console-docs: test-deps
	CONSOLE_DOCS=1 $(GO) test -count=1 -run TestConsoleInBrowser ./frontend/console/
