# The release image that GoReleaser builds (.goreleaser.yaml, dockers_v2)
# from the binaries it built: the static binary as /worker, a numeric
# non-root user, :9090, `worker run`, on an empty base. Nothing is pulled,
# so it builds offline, with Docker (buildx) or Podman, for both platforms
# without emulation (no RUN step). The binary carries its own CA roots
# (golang.org/x/crypto/x509roots/fallback, linked by cmd/worker) for TLS to
# AWS. The build context holds <os>/<arch>/worker for each platform.
FROM scratch
ARG TARGETPLATFORM
COPY ${TARGETPLATFORM}/worker /worker
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/worker"]
CMD ["run"]
