# txfence developer commands. Every target works from a fresh clone on a
# machine of this kind: `make setup` installs what is missing.
#
#   make run       start the whole stack locally (Ctrl-C stops it)
#   make test      every module's tests, race detector on, real PostgreSQL, Redis, anvil and Vault; then each fuzz target briefly
#   make fuzz      every fuzz target for FUZZTIME each (default 10000x: ten thousand inputs)
#   make lint      gofmt, go vet, staticcheck
#   make generate  regenerate Go code from openapi/*.yaml
#   make schema    rewrite the committed schema dumps from the migrations
#   make verify    fail when generated code, schema dumps, dependency lists or go.mod files are stale
#   make bench     benchmarks, printed (never asserted)

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Every module of the workspace, as package patterns (riverqueue/river style).
MODULES = $(shell go list -m -f '{{.Path}}')
PACKAGES = $(addsuffix /...,$(MODULES))
BIN := .build/bin
# make test never skips a database or chain test: one that cannot get its
# server fails (see testinfra/pgtest.Unavailable).
TEST_ENV := TXFENCE_TEST_STRICT=1
TEST_TIMEOUT ?= 20m

.PHONY: help setup setup-test vault build run test fuzz lint generate schema verify bench clean

help:
	@sed -n 's/^#   //p' $(MAKEFILE_LIST)

setup:
	@deploy/scripts/setup.sh

# What make run needs, and Chromium for the operator console's browser test.
setup-test:
	@deploy/scripts/setup.sh --browser

# The local stack's binaries carry the development switches (package
# shared/devswitch: webhooks to loopback receivers, fault injection);
# release builds leave the tag out and refuse those settings.
build:
	@mkdir -p $(BIN)
	go build -tags txfence_devswitches -o $(BIN)/ ./gateway/cmd/gatewayd ./txctl/cmd/txctl ./txmanager/cmd/txmanagerd \
		./signer-zonec/cmd/signerd ./signer-zonec/cmd/signerd-dev ./signer-zonec/cmd/signerctl \
		./mev-router/cmd/mevrouterd ./ledger/cmd/ledgerd ./deploy/cmd/devstack

run: setup build
	$(BIN)/devstack

# The signer's tests run a real Vault dev server; building it takes about
# ten minutes the first time, so it happens here rather than inside a
# test's timeout. make run does not need it.
vault:
	@deploy/scripts/build-vault.sh >/dev/null

test: setup-test vault
	$(TEST_ENV) go test -race -timeout $(TEST_TIMEOUT) $(PACKAGES)
	@deploy/scripts/fuzz.sh

fuzz: setup
	@deploy/scripts/fuzz.sh

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [[ -n "$$unformatted" ]]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet $(PACKAGES)
	go tool staticcheck $(PACKAGES)

generate:
	openapi/generate.sh

schema: setup
	TXFENCE_UPDATE_SCHEMA=1 go test -count=1 -run '^TestSchemaDumpIsCurrent$$' $(PACKAGES)

verify: setup
	openapi/generate.sh --check
	$(TEST_ENV) go test -count=1 -run '^(TestSchemaDumpIsCurrent|TestDependencyListIsCurrent|TestSignerImportsNothingBanned)$$' $(PACKAGES)
	@for dir in $$(go list -m -f '{{.Dir}}'); do \
		(cd $$dir && go mod tidy -diff >/dev/null) || { echo "go.mod/go.sum not tidy in $$dir: run go mod tidy there"; exit 1; }; \
	done
	@echo "verify: generated code, schema dumps, dependency list and go.mod files are current"

bench: setup
	$(TEST_ENV) go test -run '^$$' -bench . -benchmem -benchtime 2s $(PACKAGES)

clean:
	rm -rf .build
