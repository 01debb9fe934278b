# syntax=docker/dockerfile:1
#
# hermes in a container: `docker build -t hermes .`, then see docker-compose.yml.
#
# * builder: the pinned toolchain (rust-version in Cargo.toml) on the same Debian release as the
#   runtime, because the binary is linked against that release's glibc (build.rs packs its
#   relocations for glibc >= 2.36). Dependencies are fetched in their own layer, keyed on the
#   manifests and Cargo.lock only, and compiled artefacts live in BuildKit cache mounts, so a
#   change to hermes' own code rebuilds hermes, not its ~600 dependencies.
# * runtime: Debian slim with CA certificates (every platform and provider is HTTPS), a non-root
#   user, HERMES_HOME=/data as a volume. Run it with an init as PID 1 (`docker run --init`,
#   `init: true` in compose): the agent's shell commands leave grandchildren that only an init
#   reaps. No secret is baked in: .env and config.yaml live in /data or
#   come from the environment (env_file in docker-compose.yml).
#
# Exit codes the restart policy must respect: 78 = invalid configuration (do not restart; fix
# it), 75 = restart requested (/restart), anything else = crash.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=trixie

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS builder
WORKDIR /src
ENV CARGO_TERM_COLOR=never \
    CARGO_NET_RETRY=5

# 1. Dependencies: only the manifests and the lock file, so this layer survives code changes.
#    Each workspace member needs a target for cargo to read its manifest; empty ones do.
COPY Cargo.toml Cargo.lock build.rs ./
COPY adapters/core/Cargo.toml adapters/core/
COPY adapters/http-guard/Cargo.toml adapters/http-guard/
COPY adapters/api-server/Cargo.toml adapters/api-server/
COPY adapters/webhook/Cargo.toml adapters/webhook/
COPY adapters/telegram/Cargo.toml adapters/telegram/
COPY adapters/discord/Cargo.toml adapters/discord/
COPY adapters/slack/Cargo.toml adapters/slack/
COPY adapters/matrix/Cargo.toml adapters/matrix/
COPY adapters/email/Cargo.toml adapters/email/
COPY guard/Cargo.toml guard/
COPY tests/fakes/Cargo.toml tests/fakes/
RUN for member in . adapters/core adapters/http-guard adapters/api-server adapters/webhook adapters/telegram \
        adapters/discord adapters/slack adapters/matrix adapters/email guard tests/fakes; do \
        mkdir -p "$member/src" && touch "$member/src/lib.rs"; \
    done \
 && echo 'fn main() {}' > src/main.rs
RUN --mount=type=cache,id=hermes-cargo-registry,target=/usr/local/cargo/registry,sharing=locked \
    cargo fetch --locked

# 2. hermes itself. The real sources replace the placeholders; target/ is a cache mount, so the
#    dependencies compiled by the previous build are reused.
COPY . .
RUN --mount=type=cache,id=hermes-cargo-registry,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,id=hermes-target,target=/src/target,sharing=locked \
    cargo build --release --locked --bin hermes \
 && install -D -m 0755 target/release/hermes /out/hermes

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# Versions are left to the release's security updates (pinning them would hold those back).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 hermes \
 && useradd --system --uid 10001 --gid hermes --home-dir /data --shell /usr/sbin/nologin hermes \
 && install -d -m 0700 -o hermes -g hermes /data

COPY --from=builder /out/hermes /usr/local/bin/hermes

# The admin listener is on by default, on loopback inside the container (gateway.admin_host's
# default), so the HEALTHCHECK below really asks the gateway for /health.
ENV HERMES_HOME=/data \
    GATEWAY_ADMIN_PORT=8643 \
    RUST_LOG=info
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001

# hermes itself asks the admin listener (GATEWAY_ADMIN_PORT above) for /health: no curl needed.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["hermes", "doctor", "--health"]

# SIGTERM starts the drain; leave it time (docker stop -t / stop_grace_period).
STOPSIGNAL SIGTERM
ENTRYPOINT ["hermes", "gateway", "run"]
