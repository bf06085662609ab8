# The release image that GoReleaser builds (.goreleaser.yaml, dockers_v2)
# from the binaries it built: what the Dockerfile's last stage holds (the
# static binary as /worker, CA certificates, a numeric non-root user,
# :9090, `worker run`), without its build stage. The build context holds
# <os>/<arch>/worker for each platform.
# The certificate bundle is the same for every platform: built once, natively.
FROM --platform=$BUILDPLATFORM debian:bookworm-slim AS certs
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*

FROM scratch
ARG TARGETPLATFORM
COPY --from=certs /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY ${TARGETPLATFORM}/worker /worker
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/worker"]
CMD ["run"]
