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
#   make bench-report   the same with the curves (the sweep below, -sweep $(BENCH_SWEEP)) in the same run, and rewrites
#                       docs/BENCHMARKS.md, its charts (docs/bench-*.svg) and docs/bench-results.json (the raw
#                       numbers; tools/cmd/bench -render re-renders them): about 15 minutes on 2 cores
#
#   make bench-sweep    the curves alone (tools/cmd/bench -sweep-only: the aws-like regime, no emulators): one
#                       dimension at a time from today's point, each beside the hand-written consumer (the relay
#                       beside a direct producer), then each consumer point but the backlog's paced at half the
#                       slower drain for its send → effect p50/p99; the points of the plan replace theirs in
#                       docs/bench-results.json and docs/BENCHMARKS.md is re-rendered from it.
#
# BENCH_SWEEP is the plan (default: the issue's; `dim=v1,v2;...` over groups, size, queues, backlog, effect, relay, lambda,
# lambda-standard; empty: no curves).
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
	echo "started: $$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$$tmp/inmem.txt"; \
	for m in $(BENCH_MODULES); do \
		echo ">> go test -run '^$$' -bench . -benchmem $(BENCH_GO_ARGS) in $$m, one package of $(BENCH_PKGS) at a time"; \
		for p in $$(cd $$m && $(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' $(BENCH_PKGS)); do \
			grep -qs '^func Benchmark' $$(cd $$m && $(GO) list -f '{{range .TestGoFiles}}{{$$.Dir}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$.Dir}}/{{.}} {{end}}' $$p) || continue; \
			echo "load: $$(cat /proc/loadavg)" | tee -a "$$tmp/inmem.txt"; \
			(cd $$m && env -u EXACTLY_REQUIRE_INTEGRATION -u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_SQS -u AWS_ENDPOINT_URL_DYNAMODB \
				$(GO) test -run '^$$' -bench . -benchmem $(BENCH_GO_ARGS) $$p) | tee -a "$$tmp/inmem.txt"; \
		done; \
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
	$(call exactly-bench,-report $(BENCH_REPORT) -json $(dir $(BENCH_REPORT))bench-results.json -sweep '$(BENCH_SWEEP)' -command "make bench-report$(if $(filter-out default,$(BENCH_SWEEP)), BENCH_SWEEP='$(BENCH_SWEEP)')$(if $(strip $(BENCH_ARGS)), BENCH_ARGS='$(BENCH_ARGS)')$(if $(strip $(BENCH_GO_ARGS)), BENCH_GO_ARGS='$(BENCH_GO_ARGS)')")

.PHONY: bench-sweep
bench-sweep: ## the curves alone (aws-like latency, no emulators): their points replace theirs in docs/bench-results.json, then docs/BENCHMARKS.md is re-rendered
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cd $(BENCH_ROOT); out=$(dir $(BENCH_REPORT))bench-results.json; \
	(cd tools && $(GO) build -o "$$tmp/bench" ./cmd/bench); \
	"$$tmp/bench" -sweep-only -sweep '$(BENCH_SWEEP)' -json "$$tmp/sweep.json" $(BENCH_ARGS) \
		-command "make bench-sweep$(if $(filter-out default,$(BENCH_SWEEP)), BENCH_SWEEP='$(BENCH_SWEEP)')$(if $(strip $(BENCH_ARGS)), BENCH_ARGS='$(BENCH_ARGS)')"; \
	from="$$tmp/sweep.json"; if [ '$(BENCH_SWEEP)' != default ]; then from="$$out,$$from"; fi; \
	"$$tmp/bench" -render "$$out" -sweep-from "$$from" -json "$$tmp/merged.json" -report $(BENCH_REPORT) > /dev/null; \
	mv "$$tmp/merged.json" "$$out"
