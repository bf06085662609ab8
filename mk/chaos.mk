# The chaos harness (tools/cmd/chaos, tools/internal/chaos, in the tools module). The top-level Makefile
# includes this file; it also runs alone: make -f mk/chaos.mk chaos N=5000
#
# make chaos starts the local stack (scripts/with-stack) unless it runs, then
# runs one chaos run per effect side by side (-effect ledger,http, both by
# default), each with its own queue, tables and three workers behind fault
# proxies (connection resets, lost responses, and bursts of 500/503,
# throttling and TransactionConflict answered by the proxy) while it kills,
# freezes, partitions and stops them, and sends N deposits with duplicates of
# both kinds and poison messages. It verifies, for the ledger effect
# (optimistic and transactional modes): every balance is the sum sent once, every key applied
# exactly once and in group order, and, through the outbox chain (the workers
# confirm each deposit through an outbox table; two `worker relay` processes
# and two second-stage workers, behind fault proxies and under the same chaos,
# carry the confirmations to a second ledger; -no-chain turns it off), the
# second ledger equal to the first, its DLQ empty and the outbox drained; for the http effect (claim mode, against a
# counting downstream the harness runs): every key called and COMPLETED, each
# group's first calls in seq order, and a repeat call only where the worker
# of the earlier call was killed, frozen, partitioned or stopped, or failed a
# heartbeat or commit of that key, between that call and its commit; for
# both: the queue empty, the DLQ exactly the poison messages, SIGTERM exits
# in time. It prints a table per effect and exits non-zero on any violation.
# The worker logs, a per-request trace and the reports stay in the directory
# it names (one subdirectory per effect). N=1000 takes 1.5 to 2 minutes on a
# 2-core machine once built. A repeat call made on a claim that won with its
# lease already over (a worker bug) fails the http run; CHAOS_ARGS=-allow-late-claims
# counts such calls without failing; CHAOS_ARGS='-effect http -slow 1' (responses
# held past the lease) reproduces that bug within a run or two.
# CHAOS_ARGS passes more flags (cd tools && go run ./cmd/chaos -h lists them), e.g.
# make chaos CHAOS_ARGS='-seed 42 -max-receive 5'.

CHAOS_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

SHELL := /bin/bash
GO ?= go
# The chaos harness and its worker (the real worker plus the chaos effect) are
# built from the tools module: bin/chaos, bin/chaos-worker.
CHAOS_VERSION ?= $(shell git -C $(CHAOS_ROOT) describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: chaos
chaos: N ?= 1000
chaos: ## chaos runs against the local stack, ledger and http effects side by side: 3 workers each killed, frozen, partitioned, stopped; resets, lost acks, 5xx/throttling/TransactionConflict bursts; verifies exactly-once (claim mode: repeat calls only when excused), order, DLQ (N=1000; make chaos N=5000)
	@cd $(CHAOS_ROOT)/tools && mkdir -p ../bin && $(GO) build -o ../bin/chaos ./cmd/chaos && \
		$(GO) build -ldflags '-X github.com/exactlyonce/exactly/worker.Version=$(CHAOS_VERSION)' -o ../bin/chaos-worker ./cmd/chaos/worker
	@cd $(CHAOS_ROOT) && scripts/with-stack bin/chaos -worker-bin bin/chaos-worker -n $(N) $(CHAOS_ARGS)
