# The chaos harness (cmd/chaos, internal/chaos). The top-level Makefile
# includes this file; it also runs alone: make -f mk/chaos.mk chaos N=5000
#
# make chaos starts the local stack (scripts/with-stack) unless it runs, then
# runs three workers behind fault proxies while it kills, freezes, partitions
# and stops them, sends N deposits with duplicates of both kinds and poison messages,
# and verifies: every balance is the sum sent once, every key applied exactly
# once and in group order, the queue empty, the DLQ exactly the poison
# messages. It prints a table and exits non-zero on any violation. The worker
# logs, a per-request trace and the report stay in the directory it names.
# CHAOS_ARGS passes more flags (go run ./cmd/chaos -h lists them), e.g.
# make chaos CHAOS_ARGS='-seed 42 -max-receive 5'.

CHAOS_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

SHELL := /bin/bash
GO ?= go

.PHONY: chaos
chaos: N ?= 1000
chaos: ## chaos run against the local stack: 3 workers killed, frozen, partitioned, stopped; lost acks; verifies exactly-once, order, DLQ (N=1000; make chaos N=5000)
	@cd $(CHAOS_ROOT) && mkdir -p bin && $(GO) build -o bin/chaos ./cmd/chaos
	@cd $(CHAOS_ROOT) && scripts/with-stack bin/chaos -n $(N) $(CHAOS_ARGS)
