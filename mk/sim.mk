# The deterministic simulation (internal/sim). The top-level Makefile includes
# this file; it also runs alone: make -f mk/sim.mk sim SEEDS=50000
#
#   make sim                 a fixed budget of seeds (SIM_SEEDS_DEFAULT and CHAIN_SEEDS, ~15 minutes on 2 idle cores; part of CI)
#   make sim SEEDS=N         N seeds (from FIRST, default 1)
#   make sim SEED=123        run one seed (once; REPEAT=N runs it up to N times, red when any run
#                            is). The seed fixes the world, workload, faults, the product's jitter
#                            and the order of calls that arrive together (internal/sim/sequencer.go)
#   make sim SEED=123 REPLAY=sim-red/seed-123.rec
#                            replay a red run: every red seed writes its recording (every step of
#                            the sequencer and every fault: internal/sim/record.go) to SIM_RECORD,
#                            and its report prints this command; the replay says "replayed the
#                            recording exactly" or names the first decision that differs, with
#                            what was recorded and what was asked. DIGEST= (from the report)
#                            checks a replay without a recording
#   make sim FAULTS=lost,partial OPS=SendMessageBatch,DeleteMessageBatch
#                            only these fault kinds / only faults on these operations
#   make sim RATE=0.08       probability that a call gets a fault (default: drawn per seed)
#   make sim SEED=123 LOGS=1 a red run also prints its processes' log lines (Debug and up)
#                            about the groups and keys its violations name
#
# Swarm testing: each seed draws the world's shape (fault rate, kinds and
# operations unless RATE/FAULTS/OPS fix them, Q1's dedup scope and
# visibility, the Workers' concurrency, receivers, in-flight bound, ack delay, retries in
# place and shutdown timeout, the group commit window, the Lambda batch size
# and FailRest, the payload fingerprint, message sizes, bursts, graceful
# stops: internal/sim/swarm.go, docs/TESTING.md). The summary counts the
# seeds per choice; a red seed prints its shape and its name seed@commit
# (SIM_COMMIT, git rev-parse --short HEAD). SIM_ARGS=-sim.swarm=false runs
# the one fixed world.
#
# Fault kinds: fail timeout lost partial conflict slow pause crash crash-after.
# Operations: ReceiveMessage DeleteMessageBatch ChangeMessageVisibilityBatch
# SendMessage SendMessageBatch PutItem UpdateItem TransactWriteItems Effect
# PublishBatch (the chain's topic worlds) and the others of internal/sim/fault.go's Ops.
# SIM_ARGS passes more flags to the test (go test ./internal/sim -args -h lists
# them, all -sim.*). The summary (runs, faults by kind, code paths reached,
# violations by class with the time to find the first) is printed at the end
# and written to $(SIM_REPORT).

SIM_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

SHELL := /bin/bash
GO ?= go
# 14000: each run ends with a healed tail (internal/sim/tail.go), which costs about 8 %
# more wall time per run (21 % more virtual time); 16000 seeds took ~13 minutes before it.
SIM_SEEDS_DEFAULT ?= 14000
SEEDS ?= $(SIM_SEEDS_DEFAULT)
# The end-to-end chain (producer, outbox, relays, two worker stages:
# internal/sim/chain.go) runs CHAIN_SEEDS seeds alongside.
CHAIN_SEEDS ?= 3000
FIRST ?= 1
SEED ?=
REPEAT ?=
DIGEST ?=
FAULTS ?=
OPS ?=
RATE ?=
LOGS ?=
SIM_ARGS ?=
REPLAY ?=
SIM_REPORT ?= $(SIM_ROOT)/sim-report.txt
# Red seeds' recordings (SIM_RECORD= : none).
SIM_RECORD ?= $(SIM_ROOT)/sim-red

SIM_COMMIT ?= $(shell git -C $(SIM_ROOT) rev-parse --short HEAD 2>/dev/null)$(shell git -C $(SIM_ROOT) diff --quiet HEAD 2>/dev/null || echo +dirty)

sim_flags = -sim.commit=$(SIM_COMMIT) -sim.seeds=$(SEEDS) -sim.chainseeds=$(CHAIN_SEEDS) -sim.first=$(FIRST) $(if $(RATE),-sim.rate=$(RATE)) -sim.report=$(SIM_REPORT) \
	$(if $(SIM_RECORD),-sim.record=$(SIM_RECORD)) $(if $(REPLAY),-sim.replay=$(abspath $(REPLAY))) \
	$(if $(SEED),-sim.seed=$(SEED) -sim.repeat=$(or $(REPEAT),1) $(if $(DIGEST),-sim.digest=$(DIGEST)),$(if $(REPEAT),-sim.repeat=$(REPEAT))) \
	$(if $(FAULTS),-sim.faults=$(FAULTS)) $(if $(OPS),-sim.ops=$(OPS)) $(if $(LOGS),-sim.logs) $(SIM_ARGS)

.PHONY: sim
sim: ## deterministic simulation: real pool/processor/ledger/Lambda/redrive on in-memory AWS with seeded faults (SEED= SEEDS= FAULTS= OPS=)
	cd $(SIM_ROOT) && $(GO) test -v -count=1 -timeout 60m -run '^(TestSim|TestChain)$$' ./internal/sim -args $(sim_flags)

# The planted bugs (internal/sim/testdata/plants/*.patch, docs/TESTING.md
# "Planted bugs, kept"): each applied to a throwaway worktree of HEAD, the
# simulation run until it is red (at most the CI budget), some of its red
# seeds replayed from their recordings. Fails if one is not found, does not
# apply, or does not replay. PLANTS="F1 hole2" runs only those.
PLANTS ?=
.PHONY: plants
plants: ## rerun every planted bug on HEAD: found within the CI budget, and replayed (PLANTS="F1 E1" for some)
	cd $(SIM_ROOT)/tools && $(GO) run ./cmd/plants -root $(SIM_ROOT) $(PLANTS)
