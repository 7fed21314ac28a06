# syntax=docker/dockerfile:1
# The trtguard webhook image: `trtguard serve` and the rest of the CLI, with the example policy library.
#   docker build -t registry.example.com/trtguard/trtguard:0.1.0 .
#
# Base image: python:3.11-slim-bookworm, pinned to its multi-architecture index digest. The digest was taken
# from public sources (an architecture decision record dated 2026-08-24 that re-checked it against Docker
# Hub, and a second project pinning the same digest); it could not be re-checked from the machine this file
# was written on. Re-pin both FROM lines with:  docker buildx imagetools inspect python:3.11-slim-bookworm
#
# Dependencies come only from hash-pinned lock files: requirements/runtime.lock (the main dependencies of
# pyproject.toml) and requirements/build.lock (the build backend), both `--require-hashes`, binary wheels only.

FROM python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91 AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The locks first: this layer is rebuilt only when a pinned dependency changes.
COPY requirements/runtime.lock requirements/build.lock requirements/
RUN python -m venv /opt/trtguard/venv \
 && /opt/trtguard/venv/bin/pip install --require-hashes --no-deps --only-binary=:all: \
        -r requirements/runtime.lock \
 && python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --no-deps --only-binary=:all: -r requirements/build.lock
COPY pyproject.toml README.md ./
COPY verifier verifier
COPY policies policies
COPY decisionlog decisionlog
COPY webhook webhook
COPY trtguard trtguard
# Built with the pinned backend (no build isolation, so nothing unpinned is fetched) and installed without
# dependencies: every dependency came from the lock above.
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /dist . \
 && /opt/trtguard/venv/bin/pip install --no-deps /dist/trtguard-*.whl

FROM python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91 AS runtime
LABEL org.opencontainers.image.title="trtguard" \
      org.opencontainers.image.description="Admission webhook and policy engine for TensorRT inference" \
      org.opencontainers.image.licenses="Apache-2.0"
# HOME and TMPDIR point at /tmp, the only writable place under a read-only root filesystem (the chart mounts
# an emptyDir there); bytecode was compiled at install time.
ENV PATH=/opt/trtguard/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
RUN groupadd --gid 65532 trtguard \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin trtguard \
 && mkdir -p /etc/trtguard/policies/site /var/lib/trtguard \
 && chown 65532:65532 /var/lib/trtguard
COPY --from=build /opt/trtguard/venv /opt/trtguard/venv
# The example library; the chart mounts your own policies beside it at /etc/trtguard/policies/site.
COPY policies/library /etc/trtguard/policies/library
# Numeric, so that Kubernetes can check runAsNonRoot against the image.
USER 65532:65532
WORKDIR /var/lib/trtguard
EXPOSE 8443
ENTRYPOINT ["trtguard"]
CMD ["--help"]
