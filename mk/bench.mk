# Benchmarks. The top-level Makefile includes this file; it also runs alone:
# make -f mk/bench.mk bench
#
#   make bench          in-memory Go benchmarks (go test -bench ./internal/... in the root module
#                       and in tools/, with the emulator endpoints unset, so benchmark variants
#                       that need them skip), then the harness (tools/cmd/bench, built from the
#                       tools module, run from the root) through scripts/with-stack, in two regimes:
#                       the emulators at their speed, and the in-memory fakes held for AWS-like
#                       latency (bench consume processes); tables and issue 22's targets on stdout
#                       (progress on stderr), about 13 minutes on the shared 2-core machine
#   make bench-report   the same, and rewrites docs/BENCHMARKS.md, docs/bench-throughput.svg, docs/bench-budget.svg and
#                       docs/bench-results.json (the raw numbers; tools/cmd/bench -render re-renders them); the
#                       curves are not measured again but taken from docs/bench-sweep.json (make bench-sweep)
#
#   make bench-sweep    the curves alone (tools/cmd/bench -sweep-only: the aws-like regime, no emulators): one
#                       dimension at a time from today's point, each beside the hand-written consumer (the relay
#                       beside a direct producer), then each consumer point but the backlog's paced at half the
#                       slower drain for its send → effect p50/p99 (two more windows a point, about 9 s);
#                       writes docs/bench-sweep.json and re-renders docs/BENCHMARKS.md
#                       from docs/bench-results.json with the curves and their charts (docs/bench-sweep-*.svg).
#                       A plan other than the default measures its points again into docs/bench-sweep.json.
#
# BENCH_SWEEP is the plan (default: the issue's; `dim=v1,v2;...` over groups, size, queues, backlog, effect, relay, lambda, lambda-standard).
# BENCH_ARGS passes flags to tools/cmd/bench (BENCH_ARGS='-procs 1 -concurrency 16,32',
# BENCH_ARGS=-quick; `cd tools && go run ./cmd/bench -help` lists them); BENCH_GO_ARGS to go test
# (BENCH_GO_ARGS='-benchtime 3s -count 3'). Benchmarks are not part of make test or CI; the
# harness's unit tests (targets, the latency model, parsing) are, through the tools module.

BENCH_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

SHELL := /bin/bash
GO ?= go
BENCH_ARGS ?=
BENCH_GO_ARGS ?=
# The packages whose benchmarks run, in each module of BENCH_MODULES.
BENCH_PKGS ?= ./internal/...
BENCH_MODULES ?= . tools
BENCH_REPORT ?= docs/BENCHMARKS.md
BENCH_SWEEP ?= default

# $(call exactly-bench,EXTRA tools/cmd/bench FLAGS)
define exactly-bench
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cd $(BENCH_ROOT); \
	for m in $(BENCH_MODULES); do \
		echo ">> go test -run '^$$' -bench . -benchmem $(BENCH_GO_ARGS) $(BENCH_PKGS) in $$m"; \
		(cd $$m && env -u EXACTLY_REQUIRE_INTEGRATION -u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_SQS -u AWS_ENDPOINT_URL_DYNAMODB \
			$(GO) test -run '^$$' -bench . -benchmem $(BENCH_GO_ARGS) $(BENCH_PKGS)) | tee -a "$$tmp/inmem.txt"; \
	done; \
	(cd tools && $(GO) build -o "$$tmp/bench" ./cmd/bench); \
	echo ">> tools/cmd/bench $(BENCH_ARGS) (against the local emulators)"; \
	scripts/with-stack "$$tmp/bench" -inmem "$$tmp/inmem.txt" $(1) $(BENCH_ARGS)
endef

.PHONY: bench
bench: ## benchmarks as tables: in memory (go test -bench), then against the local emulators (tools/cmd/bench)
	$(call exactly-bench,)

.PHONY: bench-report
bench-report: ## make bench, and rewrite docs/BENCHMARKS.md, its chart and docs/bench-results.json with the results
	@mkdir -p $(dir $(BENCH_ROOT)/$(BENCH_REPORT))
	$(call exactly-bench,-report $(BENCH_REPORT) -json $(dir $(BENCH_REPORT))bench-results.json $(if $(wildcard $(BENCH_ROOT)/$(dir $(BENCH_REPORT))bench-sweep.json),-sweep-from $(dir $(BENCH_REPORT))bench-sweep.json) -command "make bench-report$(if $(strip $(BENCH_ARGS)), BENCH_ARGS='$(BENCH_ARGS)')$(if $(strip $(BENCH_GO_ARGS)), BENCH_GO_ARGS='$(BENCH_GO_ARGS)')")

.PHONY: bench-sweep
bench-sweep: ## the curves alone (aws-like latency, no emulators): docs/bench-sweep.json, then re-render docs/BENCHMARKS.md with them
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cd $(BENCH_ROOT); out=$(dir $(BENCH_REPORT))bench-sweep.json; \
	(cd tools && $(GO) build -o "$$tmp/bench" ./cmd/bench); \
	"$$tmp/bench" -sweep-only -sweep '$(BENCH_SWEEP)' -json "$$tmp/sweep.json" $(BENCH_ARGS) \
		-command "make bench-sweep$(if $(filter-out default,$(BENCH_SWEEP)), BENCH_SWEEP='$(BENCH_SWEEP)')$(if $(strip $(BENCH_ARGS)), BENCH_ARGS='$(BENCH_ARGS)')"; \
	if [ '$(BENCH_SWEEP)' != default ] && [ -f "$$out" ]; then \
		"$$tmp/bench" -render "$$out" -sweep-from "$$out,$$tmp/sweep.json" -json "$$tmp/merged.json" > /dev/null; mv "$$tmp/merged.json" "$$out"; \
	else mv "$$tmp/sweep.json" "$$out"; fi; \
	"$$tmp/bench" -render $(dir $(BENCH_REPORT))bench-results.json -sweep-from "$$out" -report $(BENCH_REPORT) > /dev/null
