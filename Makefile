# nomad-device-zfs — `make help` lists the targets.
SHELL       := bash
GO          ?= go
BIN         := bin/nomad-device-zfs
# The version stamped into the binary; tools/version.sh says why it is semver.
VERSION     ?= $(shell tools/version.sh)
LDFLAGS     := -X github.com/nomad-device-zfs/nomad-device-zfs/plugin.Version=$(VERSION)
DIST        := dist
PLATFORMS   := linux/amd64 linux/arm64
NDZ_CACHE   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nomad-device-zfs
# The Nomad agent the demo, the tests and the benchmarks run: v1.6.2, the
# newest Nomad under the MPL-2.0, built once from the Go module proxy and
# cached by tools/nomad-bin.sh; or the operator's own agent binary, never
# downloaded or built here: `make test e2e NOMAD_BIN=/usr/local/bin/nomad`.
NOMAD_VERSION ?= v1.6.2
NOMAD_BIN     ?=
export NDZ_CACHE NOMAD_VERSION NOMAD_BIN

# What the licence check (tools/licences) lists with go list: the shipped
# binaries as dist builds them, and every test binary, the e2e and bench tags
# too. docs/licences.md.
LICENCE_BINS  := $(foreach p,$(PLATFORMS),-list 'CGO_ENABLED=0 GOOS=$(word 1,$(subst /, ,$(p))) GOARCH=$(word 2,$(subst /, ,$(p))) -deps ./cmd/nomad-device-zfs ./cmd/nomad-device-zfs-ctl')
LICENCE_LISTS := $(LICENCE_BINS) -list '-deps -test ./...' -list '-deps -test -tags e2e ./e2e/...' -list '-deps -test -tags bench ./bench/...'

.DEFAULT_GOAL := help

help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## Build the plugin and the operator CLI into bin/.
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nomad-device-zfs
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)-ctl ./cmd/nomad-device-zfs-ctl

dist: ## Release binaries (the plugin and the CLI; static, linux/amd64 and linux/arm64), THIRD_PARTY_LICENSES and SHA256SUMS into dist/.
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do os=$${p%/*} arch=$${p#*/}; \
	  for cmd in nomad-device-zfs nomad-device-zfs-ctl; do \
	    out=$(DIST)/$${cmd}_$(VERSION)_$${os}_$${arch}; echo "  $$out"; \
	    CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $$out ./cmd/$$cmd; \
	  done; \
	done
	@set -o pipefail; echo "  $(DIST)/THIRD_PARTY_LICENSES"; $(GO) run ./tools/licences -go '$(GO)' -notice $(DIST)/THIRD_PARTY_LICENSES $(LICENCE_BINS) | sed 's/^/  /'
	cd $(DIST) && sha256sum nomad-device-zfs_* nomad-device-zfs-ctl_* THIRD_PARTY_LICENSES >SHA256SUMS && sha256sum --quiet -c SHA256SUMS
	@for cmd in nomad-device-zfs nomad-device-zfs-ctl; do \
	  host=$(DIST)/$${cmd}_$(VERSION)_$$($(GO) env GOOS)_$$($(GO) env GOARCH); \
	  if [ -x $$host ]; then got=$$($$host version); test "$$got" = "nomad-device-zfs $(VERSION)" || \
	    { echo "$$host version: '$$got', want 'nomad-device-zfs $(VERSION)'"; exit 1; }; echo "  $$cmd: $$got"; fi; \
	done

nomad: ## Build (once, cached) the Nomad v1.6.2 agent the tests use, or check NOMAD_BIN.
	@tools/nomad-bin.sh

test: nomad ## Unit tests and the integration tests against a real Nomad agent.
	NOMAD_BINARY=$$(tools/nomad-bin.sh) $(GO) test -race -count=1 -timeout 20m ./...

unit: ## Unit tests only (no Nomad agent).
	$(GO) test -race -short -count=1 ./...

e2e: nomad ## End-to-end tests: real Nomad (1.6.2, or NOMAD_BIN) and real OpenZFS in a QEMU VM; E2E_RUN=regexp for some, E2E_SKIP=regexp to leave some out.
	scripts/e2e.sh $(if $(E2E_RUN),-test.run '$(E2E_RUN)') $(if $(E2E_SKIP),-test.skip '$(E2E_SKIP)')

# What CI leaves to its own target, to keep its warm time down: two of the
# four three-agent cluster tests (make e2e-cluster; CI runs the drain that
# moves the data and the node cut off and back), and the gigabyte handover,
# a measurement that saturates the guest for most of the suite
# (make bench-handover), and the replica tests (make e2e-replica), which
# wait out Nomad's stop_after_client_disconnect and the takeover's margin.
E2E_NOT_IN_CI := ^(TestMigrateSenderKilled|TestMigrateUpdateMovedByAffinity|TestStickyHandoverTimeIndependentOfSize|TestReplicaNodeLoss|TestReplicaPartitionHealed)$$
E2E_REPLICA := ^(TestReplicaNodeLoss|TestReplicaPartitionHealed)$$
E2E_CLUSTER := ^(TestPartitionReconnect|TestMigrateNodeDrain|TestMigrateSenderKilled|TestMigrateUpdateMovedByAffinity)$$

# CI runs 3 tests at once, not 8: the runner's two cores are shared.
E2E_CI_PARALLEL ?= 3
e2e-ci: nomad ## CI's e2e: the suite on the agent (1.6.2, or NOMAD_BIN) but E2E_NOT_IN_CI (make e2e-cluster, make e2e-replica, make bench-handover).
	NDZ_E2E_PARALLEL=$${NDZ_E2E_PARALLEL:-$(E2E_CI_PARALLEL)} scripts/e2e.sh -test.skip '$(E2E_NOT_IN_CI)'

e2e-cluster: nomad ## The three-agent cluster tests (a partition, data moved by a drain, an update, a killed sender): 4 minutes on a quiet machine.
	scripts/e2e.sh -test.run '$(E2E_CLUSTER)'

e2e-replica: nomad ## The replica tests on the three-agent cluster (a node lost and its replica taken over, then back; a partition healed before the takeover).
	scripts/e2e.sh -test.run '$(E2E_REPLICA)'

demo: nomad ## Run the product end to end: slots, a job, its data, the release.
	scripts/demo.sh

bench: nomad ## Benchmarks (long): Go benchmarks, the plugin's memory, the churn run, real OpenZFS in the VM. docs/performance.md.
	$(GO) test -run '^$$' -bench . -benchmem ./model ./hooks ./allocwatch
	set -o pipefail; $(GO) test -tags bench -count=1 -timeout 60m -run TestPluginMemory -v ./bench | grep '^rss '
	$(MAKE) --no-print-directory bench-churn
	bench/vm.sh
	bench/scan-columns.sh
	$(MAKE) --no-print-directory bench-handover

bench-scan: ## The scan's cost column by column, on real OpenZFS in the VM (about 20 min). docs/performance.md.
	bench/scan-columns.sh

bench-cutover: nomad ## A migration's cutover (old allocation's end to the replacement's Reserve) beside its floor (the same steps by hand), 10 MiB and 1 GiB, on a real cluster in the VM (about 30 min). docs/performance.md.
	bench/cutover.sh

bench-replica: nomad ## What a replica costs the holder's node (bytes on the wire against bytes changed, CPU, a cut stream) on a real cluster in the VM (about 10 min). docs/node-loss.md.
	bench/replica-cost.sh

bench-handover: nomad ## A sticky slot's handover of 10 MiB and of 1 GiB (a rename, not a copy) on real OpenZFS in the VM (about 10 min). docs/sticky-and-migration.md.
	scripts/e2e.sh -test.run '^TestStickyHandoverTimeIndependentOfSize$$'

bench-churn: nomad ## The churn run of make bench alone (10 min; NDZ_BENCH_CHURN=2m for less): allocations a minute, the plugin's CPU.
	set -o pipefail; NOMAD_BINARY=$$(tools/nomad-bin.sh) $(GO) test -tags bench -count=1 -timeout 30m -run TestChurn -v ./bench | grep '^churn '

FUZZTIME    ?= 10s
# Every fuzz target, as package:Target; `make fuzz` runs each for FUZZTIME.
FUZZ_TARGETS := zfs:FuzzParseList zfs:FuzzParsePools zfs:FuzzParseHolds zfs:FuzzClassify \
  zfs:FuzzParseSize zfs:FuzzArgv zfs:FuzzValidateProperty \
  plugin:FuzzConfig plugin:FuzzClassProperty plugin:FuzzClassName \
  allocwatch:FuzzDecodeAllocs allocwatch:FuzzAgentSelfNodeID

# A run the fuzzing engine itself ends with "context deadline exceeded" and
# no failing input (its workers late at the deadline on a busy machine) is
# run once more; a failing input is written to testdata and always fails.
fuzz: ## Run each fuzz target for FUZZTIME (default 10s) on top of its seed corpus.
	@log=$$(mktemp); trap 'rm -f $$log' EXIT; for pt in $(FUZZ_TARGETS); do \
	  pkg=$${pt%%:*}; target=$${pt#*:}; \
	  run() { $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime=$(FUZZTIME) -parallel 2 ./$$pkg/ >$$log 2>&1; }; \
	  if run || { grep -q 'context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log && \
	      echo "fuzz $$pkg $$target: the engine ran past its deadline with no failing input; once more" && run; }; then \
	    echo "fuzz $$pkg $$target: $$(grep -o 'execs: [0-9]*' $$log | tail -n 1)"; \
	  else cat $$log; echo "fuzz $$pkg $$target FAILED (the input is in $$pkg/testdata/fuzz/$$target)"; exit 1; fi; \
	done

SCHEDULES ?= 2000
sim: ## Seeded simulations: one node (SCHEDULES), then two nodes with transfer faults (XSCHEDULES); [SEED=first] [SIMFLAGS=...].
	@$(MAKE) --no-print-directory sim-node
	@$(MAKE) --no-print-directory sim-nodes

sim-node: ## The one-node simulation of the slot lifecycle alone: make sim-node SCHEDULES=N [SEED=first].
	@out=$$(mktemp); SIM_SCHEDULES=$(SCHEDULES) $(GO) test -v -count=1 -timeout 0 ./sim -run 'TestSimulation$$' \
	  -sim.first=$(or $(SEED),1) $(SIMFLAGS) >$$out 2>&1; rc=$$?; \
	  grep -v -e '^ok ' -e '^PASS$$' -e '^=== RUN' -e '^--- PASS' -e ' schedules, .* events, ' $$out; \
	  grep -m1 '^[0-9]* schedules, .* events, ' $$out; rm -f $$out; exit $$rc

XSCHEDULES ?= 100
sim-nodes: ## Seeded simulation of two nodes, data following its allocation with transfer faults: make sim-nodes XSCHEDULES=N [SEED=first] [REPLICAS=1: only three-node worlds keeping replicas].
	@out=$$(mktemp); SIM_SCHEDULES=$(XSCHEDULES) $(GO) test -v -count=1 -timeout 0 ./sim -run 'TestTwoNodes$$' \
	  -sim.first=$(or $(SEED),1) $(if $(REPLICAS),-sim.replicas) $(SIMFLAGS) >$$out 2>&1; rc=$$?; \
	  grep -v -e '^ok ' -e '^PASS$$' -e '^=== RUN' -e '^--- PASS' -e ' two-node schedules, .* events, ' -e ' streams (.* cut, ' $$out; \
	  grep -m1 -A1 '^[0-9]* two-node schedules, .* events, ' $$out; rm -f $$out; exit $$rc

MUTANT_SCHEDULES ?= 2000
mutants: nomad ## The safety net's power (long, 1-2 h): each realistic bug of tools/mutants/list.go planted alone, and what catches it; [BUGS=a,b] [MUTANT_SCHEDULES=N] [MUTANTFLAGS=-first].
	$(GO) run ./tools/mutants -schedules $(MUTANT_SCHEDULES) $(if $(BUGS),-only $(BUGS)) $(MUTANTFLAGS)

licences: ## Every package linked into the binaries and the test binaries is under a licence on the allow-list (docs/licences.md).
	@$(GO) run ./tools/licences -go '$(GO)' $(LICENCE_LISTS)

check: ## vet, gofmt, go mod tidy diff, import boundaries, licences.
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@cp go.mod /tmp/ndz-go.mod && cp go.sum /tmp/ndz-go.sum && $(GO) mod tidy && \
	  { diff -q go.mod /tmp/ndz-go.mod && diff -q go.sum /tmp/ndz-go.sum || { echo "go mod tidy changed go.mod/go.sum"; exit 1; }; }
	@scripts/check-imports.sh
	@$(MAKE) --no-print-directory licences

clean: ## Remove build output (caches are kept).
	rm -rf bin $(DIST)

.PHONY: help build dist licences nomad test unit e2e e2e-ci e2e-cluster e2e-replica demo bench bench-churn bench-cutover bench-handover bench-replica bench-scan fuzz sim sim-node sim-nodes mutants check clean
