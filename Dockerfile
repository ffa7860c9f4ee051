# The suite's three commands (harness, fake-device, fake-instance) and the example workloads in
# one small image, for load tests spread over a cluster (docs/recipes/kubernetes/fleet-job.yaml).
#   docker build -t lembas-doubles:0.2.0 .
#   docker run --rm lembas-doubles:0.2.0 fake-device --version

# Built from this checkout with the toolchain the workspace asks for (rust-version in Cargo.toml).
FROM rust:1.89-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p harness-cli -p fake-device -p fake-instance \
 && strip target/release/harness target/release/fake-device target/release/fake-instance

# A slim base: the binaries need glibc and, for https:// servers, the CA certificates.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/harness /src/target/release/fake-device /src/target/release/fake-instance /usr/local/bin/
COPY docs/recipes/workloads /workloads
# No root needed: a fleet writes only its reports and the devices' state under /tmp.
USER 65532:65532
WORKDIR /tmp
CMD ["fake-device", "--help"]
