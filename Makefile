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

.PHONY: test
test: ## run every unit and integration test with the race detector (starts the local stack if needed)
	@EXACTLY_REQUIRE_INTEGRATION=1 scripts/with-stack $(GO) test -race -count=1 -timeout 20m ./...

.PHONY: test-short
test-short: ## unit tests only, no emulators
	$(GO) test -race -short ./...

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
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(HOME)/.cache/exactly/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck
lint: ## gofmt, go vet, staticcheck (pinned, installed once) and go mod tidy
	@files=$$(git ls-files '*.go' | xargs gofmt -l); test -z "$$files" || { echo "$$files"; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	@test -x $(STATICCHECK) || GOBIN=$(dir $(STATICCHECK)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(STATICCHECK) ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

-include mk/*.mk
