# Release artefacts of the worker. The top-level Makefile includes this file;
# it also runs alone: make -f mk/build.mk dist
#
#   dist/worker-linux-amd64, dist/worker-linux-arm64   static binaries (ECS, any Linux host)
#   dist/worker-lambda-amd64.zip, ...-arm64.zip        Lambda packages: the same binary as
#                                                      bootstrap, for the provided.al2023 runtime
#
# The binaries are static (CGO_ENABLED=0), built with -trimpath and without
# VCS stamping, so that the same commit gives the same bytes; the zips are
# written by scripts/lambdazip with a fixed time stamp and mode 0755.
# lambda.norpc drops aws-lambda-go's RPC mode, which only the retired go1.x
# runtime used. DIST=dir builds elsewhere (the end-to-end test does).
#
# MAIN=./path builds another main package the same way: a binary of your own
# that registers its effects and calls worker.Main (examples/custom-effect).
# The artefacts keep their names (the Terraform modules expect them), so
# give it a DIST of its own to keep the stock worker's:
#   make dist MAIN=./examples/custom-effect DIST=dist/custom-effect
#
# make image builds the Dockerfile's image of MAIN for IMAGE_PLATFORM
# (linux/arm64, the ECS module's default ARM64), tagged IMAGE:VERSION.
# It needs a Docker engine with BuildKit (none here, nor in CI: build_test.go
# checks the command and the Dockerfile statically).

DIST_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git -C $(DIST_ROOT) describe --tags --always --dirty 2>/dev/null || echo dev)
DIST ?= $(DIST_ROOT)/dist
MAIN ?= ./cmd/worker
DIST_ARCHES := amd64 arm64
DIST_TAGS := lambda.norpc
DIST_LDFLAGS = -s -w -X github.com/exactlyonce/exactly/worker.Version=$(VERSION)

DIST_BINARIES := $(foreach a,$(DIST_ARCHES),$(DIST)/worker-linux-$(a))
DIST_ZIPS := $(foreach a,$(DIST_ARCHES),$(DIST)/worker-lambda-$(a).zip)

include $(DIST_ROOT)/mk/release.mk

# The stock worker into dist/ is a release: GoReleaser (make release, a
# snapshot unless HEAD is a tag) builds the same artefacts, with SHA256SUMS
# and SBOMs. Another MAIN or DIST is built by the rules below.
.PHONY: dist
ifeq ($(MAIN) $(DIST),./cmd/worker $(DIST_ROOT)/dist)
dist: release ## static linux/amd64 and linux/arm64 binaries and Lambda zips (bootstrap, provided.al2023) in dist/, by GoReleaser with checksums and SBOMs (MAIN=./path: your own main package)
else
dist: $(DIST_BINARIES) $(DIST_ZIPS)
	@cd $(DIST) && sha256sum $(notdir $^)
endif

# Always handed to go build, whose cache knows whether anything changed; it
# leaves an up-to-date binary untouched, so the zip is rebuilt only when the
# binary is.
.PHONY: dist-force
$(DIST)/worker-linux-%: dist-force
	@mkdir -p $(DIST)
	cd $(DIST_ROOT) && CGO_ENABLED=0 GOOS=linux GOARCH=$* GOFLAGS= $(GO) build -trimpath -buildvcs=false \
		-tags $(DIST_TAGS) -ldflags '$(DIST_LDFLAGS)' -o $@ $(MAIN)

$(DIST)/worker-lambda-%.zip: $(DIST)/worker-linux-%
	cd $(DIST_ROOT) && $(GO) run ./scripts/lambdazip -o $@ -name bootstrap $<

DOCKER ?= docker
# exactly-worker for the stock worker, exactly-<dir> for MAIN=./.../<dir>.
IMAGE ?= exactly-$(notdir $(patsubst %/,%,$(MAIN)))
IMAGE_PLATFORM ?= linux/arm64

.PHONY: image
image: ## container image of MAIN (./cmd/worker) from the Dockerfile, IMAGE:VERSION for IMAGE_PLATFORM (linux/arm64); needs Docker
	cd $(DIST_ROOT) && $(DOCKER) build --platform $(IMAGE_PLATFORM) \
		--build-arg MAIN=$(MAIN) --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) .

.PHONY: dist-clean
dist-clean: ## remove dist/
	rm -rf $(DIST)
