# Terraform and LocalStack targets. The top-level Makefile includes this file;
# it also runs alone: make -f mk/terraform.mk tf-check
#
# tf-check runs offline, on infra/terraform, localstack/terraform and the
# Terraform root of examples/custom-effect. It needs no AWS provider (which
# cannot be downloaded where CI runs; tf-validate and tf-apply-local below
# build it from source): it runs terraform
# fmt, tflint with its bundled rules, tfsec, Go tests that parse the .tf files
# (tools/infratest/terraform, in the tools module) and the LocalStack static checks. The
# tools are pinned and built once from the Go module proxy into ~/.cache/exactly/tools/bin (EXACTLY_CACHE); a
# version bump builds the new one. See infra/terraform/README.md.

EXACTLY_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

SHELL := /bin/bash
GO ?= go

# Pinned tools. terraform v1.5.7 is the last MPL-licensed release.
TERRAFORM_VERSION  := v1.5.7
TFLINT_VERSION     := v0.64.0
TFSEC_VERSION      := v1.26.0
COMPOSE_GO_VERSION := v2.16.2

EXACTLY_TOOLS_BIN ?= $(or $(EXACTLY_CACHE),$(HOME)/.cache/exactly)/tools/bin
TERRAFORM         := $(EXACTLY_TOOLS_BIN)/terraform-$(TERRAFORM_VERSION)
TFLINT            := $(EXACTLY_TOOLS_BIN)/tflint-$(TFLINT_VERSION)
TFSEC             := $(EXACTLY_TOOLS_BIN)/tfsec-$(TFSEC_VERSION)
COMPOSE_SPEC      := $(EXACTLY_TOOLS_BIN)/compose-spec-$(COMPOSE_GO_VERSION)
SHELLCHECK        ?= shellcheck

TF_DIR        := $(EXACTLY_ROOT)/infra/terraform
# The Terraform root of examples/custom-effect, checked with the modules.
CUSTOM_EFFECT_TF := $(EXACTLY_ROOT)/examples/custom-effect/terraform
LOCALSTACK    := $(EXACTLY_ROOT)/localstack
TF_OVERRIDE   := $(LOCALSTACK)/terraform/localstack_override.tf
TF_STAGE      := $(EXACTLY_ROOT)/.tools/tf-localstack
INIT_SCRIPTS   = $(wildcard $(LOCALSTACK)/init/ready.d/*.sh)

# No CLI config and no version check: terraform fmt needs neither.
TERRAFORM_ENV := TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1

.PHONY: tf-check
tf-check: tf-fmt tf-lint tf-sec tf-test localstack-check ## offline checks of infra/terraform and localstack/: fmt, tflint, tfsec, hcl and compose tests, shellcheck (CI)

.PHONY: tf-tools
tf-tools: $(TERRAFORM) $(TFLINT) $(TFSEC) $(COMPOSE_SPEC) ## build the pinned terraform, tflint, tfsec and compose-spec into ~/.cache/exactly/tools/bin (once)

# $(call exactly-go-install,OUTPUT,PACKAGE@VERSION,BINARY): a failed build
# fails the target; nothing is skipped.
define exactly-go-install
	@echo ">> building $(notdir $(1)) from the Go module proxy (once; cached in $(EXACTLY_TOOLS_BIN))"
	@rm -rf $(1).build && mkdir -p $(1).build
	@start=$$(date +%s); GOBIN=$(1).build GOFLAGS= CGO_ENABLED=0 $(GO) install $(2) || { \
		rm -rf $(1).build; echo "mk/terraform.mk: cannot build $(2) (errors above); $@ is needed by the target you ran" >&2; exit 1; }; \
		echo ">> built $(notdir $(1)) in $$(( $$(date +%s) - start )) s"
	@mv $(1).build/$(3) $(1) && rm -rf $(1).build
endef

$(TERRAFORM):
	$(call exactly-go-install,$@,github.com/hashicorp/terraform@$(TERRAFORM_VERSION),terraform)

$(TFLINT):
	$(call exactly-go-install,$@,github.com/terraform-linters/tflint@$(TFLINT_VERSION),tflint)

$(TFSEC):
	$(call exactly-go-install,$@,github.com/aquasecurity/tfsec/cmd/tfsec@$(TFSEC_VERSION),tfsec)

# The loader and schema validation that Docker Compose v2 itself uses.
$(COMPOSE_SPEC):
	$(call exactly-go-install,$@,github.com/compose-spec/compose-go/v2/cmd@$(COMPOSE_GO_VERSION),cmd)

.PHONY: tf-fmt
tf-fmt: $(TERRAFORM)
	@echo ">> terraform fmt -check ($(TERRAFORM_VERSION))"
	@$(TERRAFORM_ENV) $(TERRAFORM) fmt -check -recursive -diff $(TF_DIR)
	@$(TERRAFORM_ENV) $(TERRAFORM) fmt -check -recursive -diff $(LOCALSTACK)/terraform
	@$(TERRAFORM_ENV) $(TERRAFORM) fmt -check -recursive -diff $(CUSTOM_EFFECT_TF)

# The examples are linted twice: as they are, and with the LocalStack provider
# override merged in (staged under .tools, since the override must sit beside them).
.PHONY: tf-lint
tf-lint: $(TFLINT)
	@echo ">> tflint $(TFLINT_VERSION) (bundled terraform ruleset, preset all)"
	@cd $(TF_DIR) && $(TFLINT) --recursive --config=$(TF_DIR)/.tflint.hcl --format=compact
	@cd $(CUSTOM_EFFECT_TF) && $(TFLINT) --config=$(TF_DIR)/.tflint.hcl --format=compact
	@echo ">> tflint on the examples with localstack_override.tf"
	@rm -rf $(TF_STAGE) && mkdir -p $(TF_STAGE) && cp -R $(TF_DIR)/modules $(TF_DIR)/examples $(TF_STAGE)/
	@set -e; for ex in $(TF_STAGE)/examples/*/; do \
		cp $(TF_OVERRIDE) $$ex; \
		(cd $$ex && $(TFLINT) --config=$(TF_DIR)/.tflint.hcl --format=compact); \
	done

.PHONY: tf-sec
tf-sec: $(TFSEC)
	@echo ">> tfsec $(TFSEC_VERSION), MEDIUM and above"
	@$(TFSEC) $(TF_DIR) --minimum-severity MEDIUM --no-module-downloads --no-color --concise-output
	@$(TFSEC) $(LOCALSTACK)/terraform --minimum-severity MEDIUM --no-module-downloads --no-color --concise-output
	@$(TFSEC) $(CUSTOM_EFFECT_TF) --minimum-severity MEDIUM --no-module-downloads --no-color --concise-output

.PHONY: tf-test
tf-test:
	@echo ">> go test ./infratest/terraform (tools module: references, module calls, the settings the worker relies on)"
	@cd $(EXACTLY_ROOT)/tools && $(GO) test -count=1 ./infratest/terraform/

# --- terraform validate against the real AWS provider ------------------------
# The provider cannot be downloaded here, but it is a Go module: built from
# source at a pinned commit and handed to terraform through a dev override
# (a CLI config file, TF_PROVIDER_RC), it lets terraform validate check every
# argument against its schema. The build is long (see infra/terraform/README.md
# for the figures); once built and cached, the target takes a minute or two.
AWS_PROVIDER_VERSION := v1.60.1-0.20260602190131-5f2286d6d836
AWS_PROVIDER_DIR     := $(EXACTLY_TOOLS_BIN)/aws-provider-$(AWS_PROVIDER_VERSION)
AWS_PROVIDER         := $(AWS_PROVIDER_DIR)/terraform-provider-aws
TF_PROVIDER_RC       := $(EXACTLY_ROOT)/.tools/tf-provider.tfrc
# Every Terraform root, staged with the repository's layout (the custom-effect
# example calls ../../../infra/terraform/modules).
TF_VALIDATE_STAGE    := $(EXACTLY_ROOT)/.tools/tf-validate
TF_VALIDATE_ROOTS     = $(patsubst $(EXACTLY_ROOT)/%/,%,$(wildcard $(TF_DIR)/modules/*/ $(TF_DIR)/examples/*/ $(TF_DIR)/local/)) \
                        $(patsubst $(EXACTLY_ROOT)/%,%,$(CUSTOM_EFFECT_TF))

.PHONY: tf-provider
tf-provider: $(AWS_PROVIDER) ## build the pinned AWS provider from source into ~/.cache/exactly/tools/bin (once; long)

# The same provider cut to the service packages the repository's .tf files use
# (scripts/tf-provider-min, tools/cmd/tfprovidermin): the schema of every type
# the modules name is the pinned one, and the build fits a cold CI run.
# AWS_PROVIDER_BUILD=min makes tf-validate and tf-apply-local use it.
AWS_PROVIDER_BUILD    ?= full
AWS_PROVIDER_MIN_PATH := $(EXACTLY_ROOT)/.tools/aws-provider-min.path
TF_ROOTS              := $(TF_DIR) $(CUSTOM_EFFECT_TF) $(LOCALSTACK)/terraform

.PHONY: tf-provider-min
tf-provider-min: ## build the pinned AWS provider cut to the services the modules use (once per service list; cached in ~/.cache/exactly/tools/bin)
	@mkdir -p $(dir $(AWS_PROVIDER_MIN_PATH).new)
	@GO=$(GO) $(EXACTLY_ROOT)/scripts/tf-provider-min $(AWS_PROVIDER_VERSION) $(EXACTLY_TOOLS_BIN) $(TF_ROOTS) >$(AWS_PROVIDER_MIN_PATH).new
	@mv $(AWS_PROVIDER_MIN_PATH).new $(AWS_PROVIDER_MIN_PATH)

ifeq ($(AWS_PROVIDER_BUILD),min)
TF_PROVIDER_DEP     := tf-provider-min
# Read when the recipe runs, after tf-provider-min wrote it.
TF_PROVIDER_USE_DIR  = $(shell cat $(AWS_PROVIDER_MIN_PATH))
else ifeq ($(AWS_PROVIDER_BUILD),full)
TF_PROVIDER_DEP     := $(AWS_PROVIDER)
TF_PROVIDER_USE_DIR  = $(AWS_PROVIDER_DIR)
else
$(error AWS_PROVIDER_BUILD=$(AWS_PROVIDER_BUILD): set it to full (the whole provider, make tf-provider) or min (make tf-provider-min))
endif

# Where the provider is (or would be) cached: .ci/run asks.
.PHONY: print-aws-provider
print-aws-provider:
	@echo $(AWS_PROVIDER)

# The CLI config that hands terraform the provider built above. Written on
# every run (the cache may move); its folder is created here, not by another target.
define tf-provider-rc
	@mkdir -p $(dir $(TF_PROVIDER_RC))
	@printf 'provider_installation {\n  dev_overrides {\n    "hashicorp/aws" = "%s"\n  }\n}\n' $(TF_PROVIDER_USE_DIR) >$(TF_PROVIDER_RC)
endef

$(AWS_PROVIDER):
	$(call exactly-go-install,$@,github.com/hashicorp/terraform-provider-aws@$(AWS_PROVIDER_VERSION),terraform-provider-aws)

.PHONY: tf-validate
tf-validate: $(TERRAFORM) $(TF_PROVIDER_DEP) ## terraform validate of every module and example against the AWS provider's schema (builds the provider once: long; CI when it is cached)
	$(tf-provider-rc)
	@rm -rf $(TF_VALIDATE_STAGE) && mkdir -p $(TF_VALIDATE_STAGE)/infra $(TF_VALIDATE_STAGE)/examples/custom-effect
	@cp -R $(TF_DIR) $(TF_VALIDATE_STAGE)/infra/ && cp -R $(CUSTOM_EFFECT_TF) $(TF_VALIDATE_STAGE)/examples/custom-effect/
	@find $(TF_VALIDATE_STAGE) \( -name .terraform -o -name '*.tfstate*' -o -name .terraform.lock.hcl -o -name localstack_override.tf \) -prune -exec rm -rf {} +
	@set -e; start=$$(date +%s); export TF_CLI_CONFIG_FILE=$(TF_PROVIDER_RC) CHECKPOINT_DISABLE=1; \
	validate() { \
		(cd $(TF_VALIDATE_STAGE)/$$1 && $(TERRAFORM) get >/dev/null && $(TERRAFORM) validate -no-color >validate.log 2>&1) || { cat $(TF_VALIDATE_STAGE)/$$1/validate.log; exit 1; }; \
		echo "ok  terraform validate $$1$$2"; \
	}; \
	n=0; for d in $(TF_VALIDATE_ROOTS); do validate $$d ""; n=$$((n+1)); done; \
	for d in $(TF_VALIDATE_STAGE)/infra/terraform/examples/*/; do \
		cp $(TF_OVERRIDE) $$d; d=$${d#$(TF_VALIDATE_STAGE)/}; validate $${d%/} " with localstack_override.tf"; n=$$((n+1)); \
	done; \
	echo ">> tf-validate: $$n terraform validate runs passed in $$(( $$(date +%s) - start )) s (provider $(TF_PROVIDER_USE_DIR), $(AWS_PROVIDER_BUILD) build; terraform $(TERRAFORM_VERSION))"

# --- terraform apply against the local emulators ------------------------------
# infra/terraform/local (queue, dedup-table, outbox-table) applied to fauxqs and
# DynamoDB Local (scripts/stack, on EXACTLY_SQS_PORT and EXACTLY_DYNAMODB_PORT)
# with the provider above; the worker and the relay run on what it made; plan
# must show no drift; destroy must leave nothing. See scripts/tf-apply-local.
.PHONY: tf-apply-local
tf-apply-local: $(TERRAFORM) $(TF_PROVIDER_DEP) ## apply queue, dedup-table, outbox-table to the local emulators, run worker and relay on them, plan (no drift), destroy (builds the provider once)
	$(tf-provider-rc)
	@start=$$(date +%s); cd $(EXACTLY_ROOT) && \
		TERRAFORM=$(TERRAFORM) TF_CLI_CONFIG_FILE=$(TF_PROVIDER_RC) scripts/with-stack scripts/tf-apply-local && \
		echo ">> make tf-apply-local took $$(( $$(date +%s) - start )) s (emulators' start included; provider $(TF_PROVIDER_USE_DIR), $(AWS_PROVIDER_BUILD) build; terraform $(TERRAFORM_VERSION))"

.PHONY: localstack-check
localstack-check: $(COMPOSE_SPEC) shellcheck-installed ## offline checks of localstack/: compose file, init scripts (bash -n, shellcheck, a run against a fake awslocal)
	@echo ">> compose-spec $(COMPOSE_GO_VERSION): localstack/docker-compose.yml"
	@cd $(LOCALSTACK) && env -u LOCALSTACK_SERVICES $(COMPOSE_SPEC) docker-compose.yml >/dev/null
	@echo ">> bash -n and shellcheck: localstack/init/ready.d"
	@for s in $(INIT_SCRIPTS); do bash -n $$s || exit 1; done
	@$(SHELLCHECK) --severity=style $(INIT_SCRIPTS)
	@echo ">> go test ./infratest/localstack (tools module)"
	@cd $(EXACTLY_ROOT)/tools && $(GO) test -count=1 ./infratest/localstack/

# shellcheck comes from Debian packages (no Go build of it exists).
.PHONY: shellcheck-installed
shellcheck-installed:
	@command -v $(SHELLCHECK) >/dev/null 2>&1 || { \
		echo ">> installing shellcheck (Debian package)"; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; \
	}
	@$(SHELLCHECK) --version | sed -n 2p

# --- For people with Docker: LocalStack on 127.0.0.1:4566 -------------------
# Not run here or in CI (no Docker engine); see localstack/README.md.

DOCKER_COMPOSE     ?= docker compose
LOCALSTACK_COMPOSE  = $(DOCKER_COMPOSE) -f $(LOCALSTACK)/docker-compose.yml
LOCALSTACK_URL     := http://127.0.0.1:4566

.PHONY: localstack-up
localstack-up: ## start LocalStack 4.14.0 (SQS, DynamoDB) in Docker; returns once the demo queue and tables exist
	$(LOCALSTACK_COMPOSE) up --detach --wait

.PHONY: localstack-down
localstack-down: ## stop LocalStack and drop its state
	$(LOCALSTACK_COMPOSE) down --volumes --remove-orphans

.PHONY: localstack-test
localstack-test: ## go test -race ./... of both modules (root, tools/) against LocalStack on 127.0.0.1:4566 (after make localstack-up)
	@curl -fsS --max-time 5 $(LOCALSTACK_URL)/_localstack/health >/dev/null || { \
		echo "LocalStack does not answer on $(LOCALSTACK_URL): run make localstack-up" >&2; exit 1; }
	set -e; for m in $(EXACTLY_ROOT) $(EXACTLY_ROOT)/tools; do \
		cd $$m && env -u AWS_ENDPOINT_URL_SQS -u AWS_ENDPOINT_URL_DYNAMODB -u AWS_PROFILE \
			AWS_ENDPOINT_URL=$(LOCALSTACK_URL) AWS_REGION=us-east-1 \
			AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
			EXACTLY_REQUIRE_INTEGRATION=1 $(GO) test -race -count=1 -timeout 20m ./...; \
	done
