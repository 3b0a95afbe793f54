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
# The Nomad the tests run against (tools/nomad-bin.sh builds and caches it):
# `make e2e NOMAD_VERSION=v1.10.5`. NOMAD_VERSIONS are the supported ones.
NOMAD_VERSION  ?= v1.11.3
NOMAD_VERSIONS := v1.10.5 v1.11.3
export NDZ_CACHE NOMAD_VERSION

.DEFAULT_GOAL := help

help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## Build the plugin binary into bin/.
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nomad-device-zfs

dist: ## Release binaries (static, linux/amd64 and linux/arm64) and SHA256SUMS into dist/.
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do os=$${p%/*} arch=$${p#*/}; \
	  out=$(DIST)/nomad-device-zfs_$(VERSION)_$${os}_$${arch}; echo "  $$out"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $$out ./cmd/nomad-device-zfs; \
	done
	cd $(DIST) && sha256sum nomad-device-zfs_* >SHA256SUMS && sha256sum --quiet -c SHA256SUMS
	@host=$(DIST)/nomad-device-zfs_$(VERSION)_$$($(GO) env GOOS)_$$($(GO) env GOARCH); \
	  if [ -x $$host ]; then got=$$($$host version); test "$$got" = "nomad-device-zfs $(VERSION)" || \
	    { echo "$$host version: '$$got', want 'nomad-device-zfs $(VERSION)'"; exit 1; }; echo "  $$got"; fi

nomad: ## Build (once, cached) the Nomad binary the tests use.
	@tools/nomad-bin.sh

test: nomad ## Unit tests and the integration tests against a real Nomad agent.
	NOMAD_BINARY=$$(tools/nomad-bin.sh) $(GO) test -race -count=1 -timeout 20m ./...

unit: ## Unit tests only (no Nomad agent).
	$(GO) test -race -short -count=1 ./...

e2e: nomad ## End-to-end tests: real Nomad (NOMAD_VERSION) and real OpenZFS in a QEMU VM.
	scripts/e2e.sh

e2e-versions: ## The e2e suite once per supported Nomad version (NOMAD_VERSIONS).
	@set -e; for v in $(NOMAD_VERSIONS); do echo "=== e2e on Nomad $$v"; $(MAKE) --no-print-directory e2e NOMAD_VERSION=$$v; done

demo: nomad ## Run the product end to end: slots, a job, its data, the release.
	scripts/demo.sh

check: ## vet, gofmt, go mod tidy diff, import boundaries.
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@cp go.mod /tmp/ndz-go.mod && cp go.sum /tmp/ndz-go.sum && $(GO) mod tidy && \
	  { diff -q go.mod /tmp/ndz-go.mod && diff -q go.sum /tmp/ndz-go.sum || { echo "go mod tidy changed go.mod/go.sum"; exit 1; }; }
	@scripts/check-imports.sh

clean: ## Remove build output (caches are kept).
	rm -rf bin $(DIST)

.PHONY: help build dist nomad test unit e2e e2e-versions demo check clean
