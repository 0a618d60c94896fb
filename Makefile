# Device registry. Every target installs what it needs when it is missing (Debian packages
# through apt-get, Python's protobuf through pip), so a new machine needs only these commands.
#
#   make run     build (release), then start a node on 127.0.0.1:7400 with its data in ./data
#   make test    build, check the generated protobuf-c code is current, run every test
#   make build   build everything (debug)
#   make release build registryd, registryctl and registryload optimised, the Swift runtime linked in, in .build/release
#   make install install those three into $(PREFIX)/bin (PREFIX=/usr/local by default)
#   make protos  regenerate Sources/CRegistryProto from Protos/ with protoc-c
#   make bench   benchmarks against PostgreSQL and Redis baselines; writes BENCHMARKS.md
#   make bench-compare BASE=REV   this revision's registryd against REV's, same run; into BENCHMARKS.md
#   make bench-replay BASE=REV   start-up's journal replay, this revision's registryd against REV's; into BENCHMARKS.md
#   make bench-catchup BASE=REV   a wiped node catching up from a peer's journal, this revision against REV, beside the floor's replica; into BENCHMARKS.md
#   make bench-security   plain against tokens against TLS, and the cost of keyed hashing; into BENCHMARKS.md
#   make bench-feed   the change feed: throughput with and without 10 watchers, lag, memory per idle watcher; into BENCHMARKS.md
#   make bench-registration-floor   registryd's CPU a registration against the least a node can do (bench/registration_floor.c); into BENCHMARKS.md
#   make bench-allocations   heap allocations a registration, counted, registryd beside the floor; into BENCHMARKS.md
#   make bench-journal-fill   the journal's zeros ahead of its records against appending, and the page cache against O_DIRECT, on this disk; into BENCHMARKS.md
#   make bench-snapshot BASE=REV   one snapshot of an idle node: CPU and peak memory, this revision against REV's; into BENCHMARKS.md
#   make bench-memory BASE=REV   resident memory per device at 10M devices, sized and grown, this revision against REV's; into BENCHMARKS.md
#   make bench-restart BASE=REV   a start from a snapshot of 10M devices, this revision against REV's; into BENCHMARKS.md
#   make bench-storage   memory, snapshot while serving and restart at 10M devices; into BENCHMARKS.md
#   make bench-cluster   3 nodes against 1: throughput, CPU per operation, replication lag, catch-up
#   make bench-cluster-compare BASE=REV   a 3-node cluster's rate and CPU per registration, this revision against REV's; into BENCHMARKS.md
#   make image   the container image (podman), localhost/device-registry:latest; image-smoke runs it
#   make compose-test   deploy/compose.yaml's three nodes on that image: register, resolve, stop and restart one
#   make fuzz    libFuzzer targets, 10M executions each; into docs/fuzzing.md
#   make cluster start 3 nodes (release) on 127.0.0.1:7401-7403, data and logs in ./data/cluster
#   make cluster-stop   stop them (SIGTERM: each drains and snapshots)
#   make settings-docs   the settings tables of README.md and docs/operations.md, from NodeSetting.all
#   make clean   remove build output

SHELL := /bin/bash
SWIFT ?= swift
DATA_DIR ?= ./data
PREFIX ?= /usr/local
APT := scripts/apt-install.sh
PROGRAMS := registryd registryctl registryload
# Python's pip, quietly: no warning about running as root (CI is root), no version check.
PIP := PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install --quiet

.PHONY: bench-flamegraphs bench-allocations bench-registration-floor settings-docs bench-cluster-compare bench-memory bench-restart bench-snapshot bench-journal-fill bench-replay bench-catchup bench-feed bench-security image image-smoke compose-test fuzz bench-cluster cluster cluster-stop build release install run test bench bench-compare bench-storage protos check-protos clean deps proto-tools test-tools

# The C library the build links: protobuf-c. A node reads the Public Suffix List of Debian's
# publicsuffix package to name the vendor of a bundle no vendor rule matches.
deps:
	@command -v pkg-config >/dev/null || $(APT) pkg-config
	@pkg-config --exists libprotobuf-c || $(APT) libprotobuf-c-dev
	@test -f /usr/share/publicsuffix/public_suffix_list.dat || $(APT) publicsuffix

# protoc-c regenerates the committed C code.
proto-tools:
	@command -v protoc-c >/dev/null || $(APT) protobuf-c-compiler

# protoc and Python's protobuf run the interop test; Debian's prometheus (with promtool) scrapes
# a node in the metrics test; openssl makes the TLS tests' certificates; systemd-analyze and
# kubernetes-validate check deploy/; gdb prints the stacks of a test run that hangs; ss shows
# the connections' keepalive timers.
test-tools: proto-tools
	@command -v protoc >/dev/null || $(APT) protobuf-compiler
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || $(APT) prometheus
	@command -v systemd-analyze >/dev/null || $(APT) systemd
	@command -v openssl >/dev/null || $(APT) openssl
	@command -v gdb >/dev/null || $(APT) gdb
	@command -v ss >/dev/null || $(APT) iproute2
	@python3 -c 'import yaml' 2>/dev/null || $(PIP) pyyaml
	@python3 -c 'import kubernetes_validate' 2>/dev/null || $(PIP) kubernetes-validate
	@python3 -c 'import google.protobuf' 2>/dev/null || $(PIP) 'protobuf>=4.21,<8'

build: deps
	$(SWIFT) build

release: deps
	@echo "building $(PROGRAMS) optimised (release; the first build takes a few minutes)"
	@for program in $(PROGRAMS); do $(SWIFT) build -c release --static-swift-stdlib --product $$program || exit 1; done

install: release
	install -d $(DESTDIR)$(PREFIX)/bin
	@bin=$$($(SWIFT) build -c release --show-bin-path) && for program in $(PROGRAMS); do \
	  install -m 755 "$$bin/$$program" $(DESTDIR)$(PREFIX)/bin/ && echo "installed $(DESTDIR)$(PREFIX)/bin/$$program"; done

run: release
	mkdir -p $(DATA_DIR)
	@echo "starting registryd (release build; registryctl is .build/release/registryctl, or 'make install')"
	$$($(SWIFT) build -c release --show-bin-path)/registryd --data-dir $(DATA_DIR) $(ARGS)

CLUSTER_DIR ?= ./data/cluster
CLUSTER_PEERS := 127.0.0.1:7401,127.0.0.1:7402,127.0.0.1:7403

# Three nodes of one cluster on this machine, each with its own port and data directory.
cluster: release
	@bin=$$($(SWIFT) build -c release --show-bin-path) && port=7401 && for node in node-a node-b node-c; do \
	  mkdir -p $(CLUSTER_DIR)/$$node; \
	  if [ -f $(CLUSTER_DIR)/$$node.pid ] && kill -0 $$(cat $(CLUSTER_DIR)/$$node.pid) 2>/dev/null; then \
	    echo "$$node is already running (pid $$(cat $(CLUSTER_DIR)/$$node.pid))"; port=$$((port + 1)); continue; fi; \
	  "$$bin/registryd" --data-dir $(CLUSTER_DIR)/$$node --node-id $$node --cluster-id local --cluster-secret local-cluster-secret \
	    --port $$port --peers $(CLUSTER_PEERS) $(ARGS) </dev/null >/dev/null 2>>$(CLUSTER_DIR)/$$node.log & echo $$! > $(CLUSTER_DIR)/$$node.pid; \
	  echo "started $$node on 127.0.0.1:$$port (pid $$!, log $(CLUSTER_DIR)/$$node.log)"; port=$$((port + 1)); done; \
	  sleep 1; "$$bin/registryctl" cluster status --endpoint 127.0.0.1:7401 -o table || true

cluster-stop:
	@for node in node-a node-b node-c; do \
	  if [ -f $(CLUSTER_DIR)/$$node.pid ]; then pid=$$(cat $(CLUSTER_DIR)/$$node.pid); \
	    if kill $$pid 2>/dev/null; then while kill -0 $$pid 2>/dev/null; do sleep 0.1; done; echo "stopped $$node"; fi; \
	    rm -f $(CLUSTER_DIR)/$$node.pid; fi; done

protos: proto-tools
	scripts/gen-protos.sh

# Fails when the committed generated code differs from what protoc-c makes of Protos/.
check-protos: proto-tools
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  scripts/gen-protos.sh "$$tmp" && \
	  if ! diff -r "$$tmp" Sources/CRegistryProto >/dev/null; then \
	    diff -r "$$tmp" Sources/CRegistryProto | head -20; \
	    echo "Sources/CRegistryProto is stale: run 'make protos' and commit the result." >&2; exit 1; \
	  else echo "generated protobuf-c code is current"; fi

# Rewrites the settings tables of README.md and docs/operations.md from NodeSetting.all.
settings-docs: build
	bash scripts/settings-docs.sh "$$($(SWIFT) build --show-bin-path)/registryd"

test: deps test-tools check-protos
	@echo "== building the package and its tests (debug)"
	$(SWIFT) build --build-tests
	@echo "== running every test (Swift Testing; the suites start real registryd processes on 127.0.0.1)"
	SWIFT=$(SWIFT) bash scripts/run-tests.sh
	@echo "== a short run of each libFuzzer target (make fuzz runs 10M executions each)"
	SWIFT=$(SWIFT) bash scripts/fuzz.sh short

# Release builds, real PostgreSQL and Redis servers on loopback, a few minutes.
bench: deps
	bash bench/run.sh
	bash bench/security.sh
	bash bench/cluster.sh

# This revision's registryd against the one at BASE (default: the previous commit), a few minutes.
BASE ?= HEAD~1
bench-compare: deps
	bash bench/compare.sh $(BASE)

# Replaying one journal at start-up, this revision's registryd against the one at BASE, a few minutes.
bench-replay: deps
	bash bench/replay.sh $(BASE)

# A wiped node catching up from a peer's journal: its CPU per operation, this revision against BASE,
# beside bench/registration_floor.c's replica (target 3's floor) in the same run.
bench-catchup: deps
	bash bench/catchup.sh $(BASE)

# A 3-node cluster's rate and CPU per registration until every node holds every write, this revision against BASE.
bench-cluster-compare: deps
	bash bench/cluster-compare.sh $(BASE)

# Plain against tokens against TLS, and the keyed hashing of identifiers, same run (also in make bench).
bench-security: deps test-tools
	bash bench/security.sh

# The change feed under load: throughput with and without watchers, lag, memory per idle watcher.
bench-feed: deps
	FEED_BENCHMARKS=1 bash bench/feed.sh

# Issue 42's first target against its floor: registryd's CPU a registration against
# bench/registration_floor.c's, both rows, the same run; about 3 minutes a pair.
bench-registration-floor: deps
	bash bench/registration-floor.sh

# Heap allocations a registration, counted in registryd and in the floor, both rows; a minute or two.
bench-allocations: deps
	bash bench/allocations.sh

# One snapshot of an idle node, this revision's registryd against the one at BASE, a few minutes.
bench-snapshot: deps
	bash bench/snapshot.sh $(BASE)

bench-memory: deps
	bash bench/memory.sh $(BASE)

bench-restart: deps
	bash bench/restart.sh $(BASE)

# The journal's zeros ahead of its records (CommitJournal.fillStep) against appending, with fdatasync.
bench-journal-fill: deps
	bash bench/journal-fill.sh

# Snapshots and restart at 10M devices on one release node, a few minutes.
bench-storage: deps
	bash bench/storage.sh

# A 3-node cluster against a single node, measured in the same run (also part of make bench).
bench-cluster: deps test-tools
	bash bench/cluster.sh

# Flame graphs of registryd under the two rows of bench-compare and of a cluster node, into docs/flamegraphs/.
bench-flamegraphs: deps
	bash bench/flamegraphs.sh

# The container image (deploy/container/Containerfile) with podman; image-smoke also runs it.
image:
	bash scripts/image.sh

image-smoke: build
	bash scripts/image.sh --smoke

# deploy/compose.yaml run as an operator would, on the image (built first when missing).
compose-test:
	bash scripts/compose-test.sh

# libFuzzer targets over the frame decoder, the client and peer codecs and the snapshot reader:
# FUZZ_RUNS (default 10M) executions each, figures into docs/fuzzing.md.
fuzz: deps
	SWIFT=$(SWIFT) bash scripts/fuzz.sh full

clean:
	rm -rf .build .build-compare .build-fuzz
