# Releases by GoReleaser (.goreleaser.yaml). The top-level Makefile includes
# this file; it also runs alone: make -f mk/release.mk release
#
#   make release         GoReleaser builds the release artefacts of the stock worker into
#                        dist/: the static binaries and Lambda zips make dist builds, with
#                        SHA256SUMS, an SBOM of each binary and the image (amd64 and
#                        arm64, saved as dist/worker-image-<arch>.tar; built with Docker
#                        or Podman). A snapshot unless HEAD is a tag; on a tag, nothing
#                        is published. scripts/distcheck then checks the binaries, that
#                        each zip holds bootstrap alone, the sums, the SBOMs and the
#                        images.
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

# The image needs a container engine that can build: Docker with buildx, or
# Podman (no daemon; .ci/run installs it). GoReleaser runs `docker`, so with
# Podman a one-line shim in .tools/podman-docker points that name at podman.
# With neither, a snapshot says so and skips the image, unless
# EXACTLY_REQUIRE_IMAGE=1 (CI), which makes it an error.
RELEASE_ENGINE_SHIM := $(RELEASE_ROOT)/.tools/podman-docker
define release-engine
if docker info >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then engine=docker; \
elif command -v podman >/dev/null 2>&1; then engine=podman; \
	mkdir -p $(RELEASE_ENGINE_SHIM) && printf '#!/bin/sh\nexec podman "$$@"\n' >$(RELEASE_ENGINE_SHIM)/docker && \
	chmod +x $(RELEASE_ENGINE_SHIM)/docker && export PATH="$(RELEASE_ENGINE_SHIM):$$PATH"; \
else engine=; fi
endef

# A snapshot unless HEAD is a tag. The snapshot builds the image for each
# platform into the engine's store (tagged <tag>-amd64 and <tag>-arm64), and
# this target saves each as dist/worker-image-<arch>.tar for scripts/distcheck.
# (On a tag the image is built only by GoReleaser's publish step, which this
# target skips.) GoReleaser leaves the binaries in its build directories; make
# dist left them in dist/ itself, where the Terraform examples look: copied.
.PHONY: release
release: $(GORELEASER) $(CYCLONEDX_GOMOD) ## GoReleaser: binaries, Lambda zips, SHA256SUMS, SBOMs and the image (amd64, arm64) in dist/ (a snapshot unless HEAD is a tag), then scripts/distcheck
	cd $(RELEASE_ROOT) && noimage=; export EXACTLY_VERSION=$$(git describe --tags --always --dirty) \
		SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) EXACTLY_COMMIT_DATE=$$(git log -1 --format=%cI); \
	export PATH="$(RELEASE_TOOLS_BIN):$$PATH"; \
	if git describe --exact-match --tags HEAD >/dev/null 2>&1; then \
		noimage=-no-image; $(GORELEASER) release --clean --skip=publish,announce || exit 1; \
	else \
		$(release-engine); \
		if [ -z "$$engine" ]; then \
			if [ "$${EXACTLY_REQUIRE_IMAGE:-}" = 1 ]; then echo "mk/release.mk: no container engine to build the image: install podman (apt-get install podman) or Docker with buildx" >&2; exit 1; fi; \
			echo ">> NO IMAGE: neither Docker with buildx nor podman is here; the snapshot skips the image (install podman to build it)"; \
			noimage=-no-image; $(GORELEASER) release --clean --snapshot --skip=docker || exit 1; \
		else \
			echo ">> the image is built with $$engine"; \
			$(GORELEASER) release --clean --snapshot || exit 1; \
			for a in amd64 arm64; do \
				ref=$$($$engine images --filter label=org.opencontainers.image.version=$$EXACTLY_VERSION --format '{{.Repository}}:{{.Tag}}' | grep -e "-$$a\$$" | sort -u | head -n 1); \
				[ -n "$$ref" ] || { echo "mk/release.mk: the snapshot made no $$a image" >&2; exit 1; }; \
				rm -f dist/worker-image-$$a.tar && $$engine save -o dist/worker-image-$$a.tar $$ref >/dev/null && $$engine rmi $$ref >/dev/null || exit 1; \
				echo ">> dist/worker-image-$$a.tar ($$ref)"; \
			done; \
		fi; \
	fi; \
	for a in amd64 arm64; do cp dist/worker_linux_$${a}*/worker dist/worker-linux-$$a || exit 1; done; \
	$(GO) run ./scripts/distcheck $$noimage dist

endif
