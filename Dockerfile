# syntax=docker/dockerfile:1
#
# The worker's image for ECS (and any container host): a static binary on an
# empty base, run as a non-root user. The same binary serves Lambda, but
# Lambda takes the zip from `make dist` (provided.al2023), not this image.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t exactly-worker .
#   docker buildx build --platform linux/amd64,linux/arm64 -t exactly-worker .
#
# MAIN names the main package: the stock worker by default, or your own
# binary that registers its effects and calls worker.Main (README, "Your own
# effect"), a package of the module in the build context. It is always
# installed as /worker, so the entry point and the Terraform modules stay the
# same (make image MAIN=./examples/custom-effect does this):
#
#   docker build --build-arg MAIN=./examples/custom-effect -t email-worker .
#
# Settings come from WORKER_* variables (README, "Configure"); AWS endpoints,
# region and credentials from the SDK's standard sources (on ECS, the task
# role). /healthz, /readyz and /metrics listen on :9090.

ARG GO_VERSION=1.26

# Build on the builder's own platform and cross-compile: no emulation needed.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG MAIN=./cmd/worker
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -tags lambda.norpc \
        -ldflags "-s -w -X github.com/exactlyonce/exactly/worker.Version=${VERSION}" \
        -o /out/worker "${MAIN}"

# Nothing but the binary and the CA certificates it needs for TLS to AWS.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/worker /worker
# A numeric uid:gid (nobody in particular; scratch has no /etc/passwd), so
# that runAsNonRoot checks can see it is not root.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/worker"]
CMD ["run"]
