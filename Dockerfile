# syntax=docker/dockerfile:1.7
#
# krayne: `krayne-server` (the API, `serve` by default) and the `krayne` CLI
# in one small, non-root image.
#
#   docker build -t krayne:dev --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#
# Reproducible: the toolchain comes from rust-toolchain.toml's pinned release,
# dependencies from Cargo.lock (--locked), and the build needs no protoc
# (protox is pure Rust) and nothing from the network besides crates.io.
#
# Releases pin both base images by digest and publish an SBOM and build
# provenance (docs/operations.md, "Images and supply chain"):
#
#   docker buildx build --sbom=true --provenance=mode=max --push -t <registry>/krayne:0.1.0
#     --build-arg BUILD_IMAGE=rust:1.95.0-slim-bookworm@sha256:<digest>
#     --build-arg RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot@sha256:<digest>
#     --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#
# (one command, its arguments on four lines here).
#
# (`docker buildx imagetools inspect <image:tag>` prints a tag's digest.) The
# defaults below are tags, so that updates stay readable; no digest is
# written here that was not read from a registry.

ARG RUST_VERSION=1.95.0
# The base images, by tag or (in releases) `tag@sha256:…`.
ARG BUILD_IMAGE=rust:${RUST_VERSION}-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
# Paths of the build machine stay out of the binaries.
ENV CARGO_INCREMENTAL=0 \
    CARGO_TERM_COLOR=never \
    RUSTFLAGS="--remap-path-prefix=/src=. --remap-path-prefix=/usr/local/cargo=cargo"
COPY . .
# The commit `GET /v1/version` reports.
ARG REVISION=unknown
# Cache mounts keep the registry and target/ between builds, so only what
# changed recompiles; the binaries are copied out because the cache is not
# part of the layer. The server is built without its default `sandbox`
# feature: a production image carries no simulated Kubernetes.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    KRAYNE_GIT_COMMIT="${REVISION}" cargo build --release --locked -p krayne-server --no-default-features \
    && cargo build --release --locked -p krayne-cli --bin krayne \
    && mkdir -p /out \
    && cp target/release/krayne-server target/release/krayne /out/

# distroless/cc: glibc, libgcc, CA certificates and tzdata; no shell, no
# package manager. UID/GID 65532 is its `nonroot` user.
FROM ${RUNTIME_IMAGE} AS runtime
ARG RUNTIME_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="krayne" \
      org.opencontainers.image.description="Multi-tenant control plane for Ray clusters on Kubernetes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://example.invalid/krayne" \
      org.opencontainers.image.base.name="${RUNTIME_IMAGE}"
COPY --from=build --chown=0:0 --chmod=0555 /out/krayne-server /out/krayne /usr/local/bin/
USER 65532:65532
# 8080: REST and gRPC (one port). 9090: /healthz, /readyz, /metrics.
EXPOSE 8080 9090
ENV KRAYNE_LISTEN=0.0.0.0:8080 \
    KRAYNE_OPS_LISTEN=0.0.0.0:9090 \
    KRAYNE_LOG_JSON=true
ENTRYPOINT ["krayne-server"]
CMD ["serve"]
