# Releases by GoReleaser (.goreleaser.yaml). The top-level Makefile includes
# this file; it also runs alone: make -f mk/release.mk release
#
#   make release         GoReleaser builds the release artefacts of the stock worker into
#                        dist/: the static binaries and Lambda zips make dist builds, with
#                        SHA256SUMS and an SBOM of each binary. A snapshot (no image: no
#                        Docker engine here) unless HEAD is a tag; on a tag, everything,
#                        image included, nothing published. scripts/distcheck then checks
#                        the binaries, that each zip holds bootstrap alone, the sums and
#                        the SBOMs.
#   make release-check   goreleaser check: the configuration, image included, is valid.
#
# make dist runs make release for the stock worker into dist/; with MAIN= or
# DIST= it builds with its own rules (mk/build.mk), the same flags and names.
# The tools are pinned and built once from the Go module proxy into
# ~/.cache/exactly/tools/bin. mk/build.mk includes this file.

ifndef EXACTLY_RELEASE_MK
EXACTLY_RELEASE_MK := 1

RELEASE_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

SHELL := /bin/bash
GO ?= go

# v2.16.0: later releases need a newer Go than the one here (v2.18) or a
# module the proxy does not serve (v2.17).
GORELEASER_VERSION      := v2.16.0
CYCLONEDX_GOMOD_VERSION := v1.10.0
RELEASE_TOOLS_BIN ?= $(or $(EXACTLY_CACHE),$(HOME)/.cache/exactly)/tools/bin
GORELEASER        := $(RELEASE_TOOLS_BIN)/goreleaser-$(GORELEASER_VERSION)
CYCLONEDX_GOMOD   := $(RELEASE_TOOLS_BIN)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)

# $(call release-go-install,OUTPUT,PACKAGE@VERSION,BINARY)
define release-go-install
	@echo ">> building $(notdir $(1)) from the Go module proxy (once; cached in $(RELEASE_TOOLS_BIN))"
	@rm -rf $(1).build && mkdir -p $(1).build
	@GOBIN=$(1).build GOFLAGS= CGO_ENABLED=0 $(GO) install $(2) || { \
		rm -rf $(1).build; echo "mk/release.mk: cannot build $(2) (errors above)" >&2; exit 1; }
	@mv $(1).build/$(3) $(1) && rm -rf $(1).build
endef

$(GORELEASER):
	$(call release-go-install,$@,github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION),goreleaser)

$(CYCLONEDX_GOMOD):
	$(call release-go-install,$@,github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION),cyclonedx-gomod)

.PHONY: release-tools
release-tools: $(GORELEASER) $(CYCLONEDX_GOMOD) ## build the pinned GoReleaser and cyclonedx-gomod into ~/.cache/exactly/tools/bin (once)

.PHONY: release-check
release-check: $(GORELEASER) ## goreleaser check: .goreleaser.yaml is valid (the image's declaration too)
	cd $(RELEASE_ROOT) && $(GORELEASER) check

# The snapshot skips only the image: dockers_v2 needs a Docker engine with
# buildx, which neither this machine nor CI has.
.PHONY: release
release: $(GORELEASER) $(CYCLONEDX_GOMOD) ## GoReleaser: binaries, Lambda zips, SHA256SUMS, SBOMs in dist/ (a snapshot without the image unless HEAD is a tag), then scripts/distcheck
	cd $(RELEASE_ROOT) && export EXACTLY_VERSION=$$(git describe --tags --always --dirty) \
		SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) EXACTLY_COMMIT_DATE=$$(git log -1 --format=%cI); \
	if git describe --exact-match --tags HEAD >/dev/null 2>&1; then \
		PATH="$(RELEASE_TOOLS_BIN):$$PATH" $(GORELEASER) release --clean --skip=publish,announce; \
	else \
		PATH="$(RELEASE_TOOLS_BIN):$$PATH" $(GORELEASER) release --clean --snapshot --skip=docker; \
	fi
	@# GoReleaser uploads the binaries from its build directories; make dist
	@# left them in dist/ itself, where the Terraform examples look.
	cd $(RELEASE_ROOT) && for a in amd64 arm64; do cp dist/worker_linux_$${a}*/worker dist/worker-linux-$$a; done
	cd $(RELEASE_ROOT) && $(GO) run ./scripts/distcheck dist

endif
