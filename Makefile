# exactly: exactly-once effects on SQS. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/exactlyonce/exactly/worker.Version=$(VERSION)
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
# The main package that worker, dist and image build: the stock worker, or
# your own that registers effects (make worker MAIN=./examples/custom-effect).
MAIN ?= ./cmd/worker

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: run
run: ## start the local AWS stack, send a demo burst with duplicates, run the worker (Ctrl-C stops all)
	@scripts/with-stack scripts/demo

# Two Go modules: the library at the root (what a program that imports it
# pulls), and tools/ (the bench and chaos harnesses, the demo, the Terraform
# and LocalStack tests, with their own dependencies). Every Go target below
# runs in both.
GO_MODULES := . tools
# Test and tooling dependencies that the library's go.mod must not require
# (make lint fails if it does; they belong in tools/go.mod).
ROOT_FORBIDDEN_MODULES := github.com/hashicorp/hcl github.com/zclconf/go-cty

.PHONY: test
test: ## run every unit and integration test of both modules (root, tools/) with the race detector (starts the local stack if needed)
	@EXACTLY_REQUIRE_INTEGRATION=1 scripts/with-stack bash -c 'set -e; for m in $(GO_MODULES); do echo ">> go test -race ./... in $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 20m ./...); done'

.PHONY: test-short
test-short: ## unit tests only, no emulators, both modules
	@set -e; for m in $(GO_MODULES); do echo ">> go test -race -short ./... in $$m"; (cd $$m && $(GO) test -race -short ./...); done

.PHONY: build
build: worker dist ## bin/worker for this machine, and the release artefacts in dist/ (make dist)

.PHONY: worker
worker: ## build the worker for this machine into bin/worker (MAIN=./path builds your own main package instead)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/worker $(MAIN)

.PHONY: stack-up stack-down
stack-up: ## start the local AWS stack in the background (scripts/stack up)
	@scripts/stack up
stack-down: ## stop the local AWS stack that stack-up started
	@scripts/stack down

.PHONY: lint
# golangci-lint (pinned, built once from the Go module proxy into the tools
# cache) runs the linters .golangci.yaml enables, staticcheck and go vet
# among them; about 20 minutes to build on two busy cores, once.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(or $(EXACTLY_CACHE),$(HOME)/.cache/exactly)/tools/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)
lint: ## gofmt, golangci-lint (.golangci.yaml: go vet, staticcheck, errcheck, errorlint, revive, gosec, testifylint, ...; pinned, built once) and go mod tidy, in both modules; no test tooling in the root go.mod
	@files=$$(git ls-files '*.go' | xargs gofmt -l); test -z "$$files" || { echo "$$files"; echo "gofmt: files above need formatting"; exit 1; }
	@test -x $(GOLANGCI_LINT) || { echo ">> building golangci-lint $(GOLANGCI_LINT_VERSION) from the Go module proxy (once)"; \
		mkdir -p $(dir $(GOLANGCI_LINT)) && rm -rf $(GOLANGCI_LINT).build && \
		GOBIN=$(GOLANGCI_LINT).build GOFLAGS= CGO_ENABLED=0 $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) && \
		mv $(GOLANGCI_LINT).build/golangci-lint $(GOLANGCI_LINT) && rm -rf $(GOLANGCI_LINT).build; }
	@bad=$$($(GO) mod edit -json | grep -o '"Path": "[^"]*"' | grep -F $(patsubst %,-e '"%',$(ROOT_FORBIDDEN_MODULES)) || true); \
		test -z "$$bad" || { echo "$$bad"; echo "go.mod: the library module must not require the modules above (test tooling: they belong in tools/go.mod)"; exit 1; }
	@set -e; for m in $(GO_MODULES); do \
		echo ">> golangci-lint $(GOLANGCI_LINT_VERSION), go mod tidy -diff in $$m"; \
		(cd $$m && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yaml ./...) || exit 1; \
		(cd $$m && $(GO) mod tidy -diff) || { echo "$$m: go.mod/go.sum are not tidy: run go mod tidy in $$m"; exit 1; }; \
	done

# mk/build.mk includes mk/release.mk.
-include $(filter-out mk/release.mk,$(wildcard mk/*.mk))
