"""automem: long-term memory for AI agents (gRPC services over NATS JetStream, FalkorDB, Qdrant).

Packages: ``automem.v1`` (generated protobuf code), ``automem.common`` (the domain core and
the stores), one package per service (``ingest``, ``recall``, ``enrich``, ``consolidate``) and
``automem.gateway`` (REST and MCP).
"""
