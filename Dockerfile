# informerd's image for people who build with Docker (or podman, buildah, kaniko): the same image
# `make image` writes without a daemon (tools/cmd/image) — the static musl binary at
# /usr/local/bin/informerd in an empty (scratch) image, run as the numeric non-root user 65532,
# the socket directory /run/informerd owned by it. `make image` is the tested build; this file
# cannot be built in the project's CI (no container engine there); tools/cmd/image's
# dockerfile_test.go holds its user, entrypoint, command and socket directory to make image's.
#
#   docker build --build-arg VERSION=0.1.0 -t informerd:0.1.0 .
#   docker run --rm -v "$PWD/examples/informerd.yaml:/etc/informerd/config.yaml:ro" informerd:0.1.0

# --- a statically linked informerd: Rust for x86_64-unknown-linux-musl, musl-gcc for the C parts
FROM rust:1.95 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
ENV CC_x86_64_unknown_linux_musl=musl-gcc
RUN cargo build --release --locked --target x86_64-unknown-linux-musl --bin informerd \
 && mkdir -p /out/usr/local/bin /out/run/informerd \
 && strip --strip-debug -o /out/usr/local/bin/informerd target/x86_64-unknown-linux-musl/release/informerd \
 && chown 65532:65532 /out/run/informerd

# --- the image: the binary and the socket directory, nothing else
FROM scratch
ARG VERSION
COPY --from=build /out/usr /usr
COPY --from=build --chown=65532:65532 /out/run/informerd /run/informerd
USER 65532:65532
ENV PATH=/usr/local/bin
ENTRYPOINT ["/usr/local/bin/informerd"]
CMD ["serve", "--config", "/etc/informerd/config.yaml"]
LABEL org.opencontainers.image.title="informerd" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.description="A sidecar that keeps one filtered, field-stripped cache of Kubernetes objects and serves it over gRPC"
