"""A small typed Python client over the gRPC API (used by the gateway, the CLI and tests).

Example::

    async with AutomemClient.connect("127.0.0.1:50051", api_key="...") as client:
        memory = await client.create_memory("Use Postgres", tags=["db"])
        hits = await client.search("database", limit=5)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Self

import grpc
from google.protobuf import field_mask_pb2
from grpc_health.v1 import health_pb2_grpc

from automem.common.enums import enum_value
from automem.common.model import parse_time, ts
from automem.v1 import (
    admin_service_pb2_grpc,
    consolidate_service_pb2_grpc,
    enrich_service_pb2_grpc,
    ingest_service_pb2,
    ingest_service_pb2_grpc,
    memory_pb2,
    recall_service_pb2,
    recall_service_pb2_grpc,
    review_service_pb2_grpc,
)


class AutomemClient:
    """Stubs for the services plus typed helpers.

    Args:
        ingest, recall, enrich, consolidate: ``host:port`` of each target (one address
            serves all in the single-binary mode). The ingest target also serves
            ReviewService (:attr:`review`) and AdminService (:attr:`admin`).
        api_key: sent as ``authorization: Bearer``; ``scope`` as ``x-automem-scope``;
            ``admin_token`` as ``x-admin-token`` (when not empty).
        interceptors: ``grpc.aio`` client interceptors for every channel (the gateway passes
            the OpenTelemetry ones).
        call_timeout: the deadline (seconds) callers give a call that names none (the
            gateway passes ``Settings.call_deadline_seconds``; None = no deadline).
        lb_policy: ``round_robin`` (default) or ``pick_first``: with a target that resolves
            to several addresses (``dns:///`` of a headless Service, ``ipv4:a:1,b:2``),
            round_robin spreads the calls over all of them (``Settings.grpc_lb_policy``).
        credentials: TLS channel credentials (automem/common/grpc_tls.py
            ``channel_credentials``); None = plaintext.
        channel_options: more channel options (``grpc_tls.channel_options``: the TLS server
            name override).
    """

    def __init__(self, ingest: str, recall: str | None = None, enrich: str | None = None,
                 consolidate: str | None = None, api_key: str = "", scope: str = "", admin_token: str = "",
                 interceptors: Sequence[Any] | None = None, call_timeout: float | None = None,
                 lb_policy: str = "round_robin", credentials: grpc.ChannelCredentials | None = None,
                 channel_options: Sequence[tuple[str, Any]] = ()) -> None:
        self.call_timeout = call_timeout
        addrs = {"ingest": ingest, "recall": recall or ingest, "enrich": enrich or ingest,
                 "consolidate": consolidate or ingest}
        self._channels: dict[str, grpc.aio.Channel] = {}
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024),
                   # A restarted service is reachable again within seconds, not minutes.
                   ("grpc.initial_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 2000),
                   # Spread calls over every address the target resolves to.
                   ("grpc.lb_policy_name", lb_policy), *channel_options]
        for addr in set(addrs.values()):
            chosen = list(interceptors) if interceptors else None
            if credentials is None:
                self._channels[addr] = grpc.aio.insecure_channel(addr, options=options, interceptors=chosen)
            else:
                self._channels[addr] = grpc.aio.secure_channel(addr, credentials, options=options,
                                                               interceptors=chosen)
        self.ingest = ingest_service_pb2_grpc.IngestServiceStub(self._channels[addrs["ingest"]])
        self.review = review_service_pb2_grpc.ReviewServiceStub(self._channels[addrs["ingest"]])
        self.admin = admin_service_pb2_grpc.AdminServiceStub(self._channels[addrs["ingest"]])
        self.recall = recall_service_pb2_grpc.RecallServiceStub(self._channels[addrs["recall"]])
        self.enrich = enrich_service_pb2_grpc.EnrichServiceStub(self._channels[addrs["enrich"]])
        self.consolidate = consolidate_service_pb2_grpc.ConsolidateServiceStub(self._channels[addrs["consolidate"]])
        #: grpc.health.v1 stubs on the channel of each service (ingest, recall, enrich, consolidate).
        self.health = {name: health_pb2_grpc.HealthStub(self._channels[addr]) for name, addr in addrs.items()}
        self.api_key = api_key
        self.scope = scope
        self.admin_token = admin_token

    @classmethod
    def connect(cls, address: str, **kwargs: Any) -> AutomemClient:
        """A client for a single-binary server at ``address``."""
        return cls(address, **kwargs)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every channel."""
        for channel in self._channels.values():
            await channel.close()

    def metadata(self) -> list[tuple[str, str]]:
        """Call metadata carrying the key and scope."""
        md: list[tuple[str, str]] = []
        if self.api_key:
            md.append(("authorization", f"Bearer {self.api_key}"))
        if self.scope:
            md.append(("x-automem-scope", self.scope))
        if self.admin_token:
            md.append(("x-admin-token", self.admin_token))
        return md

    # --- typed helpers -------------------------------------------------------------

    async def create_memory(self, content: str, *, tags: Sequence[str] = (), importance: float | None = None,
                            type: str = "", metadata: dict[str, Any] | None = None, timestamp: str = "",
                            t_valid: str = "", t_invalid: str = "", scope: str = "",
                            idempotency_key: str = "") -> memory_pb2.Memory:
        """Store one memory; returns it. Times are ISO 8601 (naive = UTC; empty = default).
        Raises InvalidArgument for an unparseable time, grpc.aio.AioRpcError (INVALID_ARGUMENT...)
        from the service."""
        item = ingest_service_pb2.MemoryInput(content=content, tags=list(tags), type=type)
        set_input_times(item, {"timestamp": timestamp, "t_valid": t_valid, "t_invalid": t_invalid})
        if importance is not None:
            item.importance = importance
        if metadata is not None:
            item.metadata_json = json.dumps(metadata)
            item.metadata_set = True
        response = await self.ingest.CreateMemory(
            ingest_service_pb2.CreateMemoryRequest(memory=item, scope=scope or self.scope,
                                                   idempotency_key=idempotency_key),
            metadata=self.metadata())
        return response.memory

    async def get_memory(self, memory_id: str, *, scope: str = "") -> recall_service_pb2.GetMemoryResponse:
        """One memory through the state pass (with ``is_current`` and ``current_id``)."""
        return await self.recall.GetMemory(
            recall_service_pb2.GetMemoryRequest(id=memory_id, scope=scope or self.scope),
            metadata=self.metadata())

    async def update_memory(self, memory_id: str, *, etag: int = 0, scope: str = "", **fields: Any) -> memory_pb2.Memory:
        """Update the given fields (content, tags, importance, type, confidence, timestamp,
        t_valid, t_invalid, metadata; times as ISO 8601, ``t_invalid=""`` opens the window).
        ABORTED on a stale ``etag``."""
        item = ingest_service_pb2.MemoryInput()
        paths = []
        for name, value in fields.items():
            paths.append(TIME_FIELDS.get(name, name))
            if name == "metadata":
                item.metadata_json = json.dumps(value)
                item.metadata_set = True
            elif name == "tags":
                item.tags.extend(value)
            elif name in TIME_FIELDS:
                set_input_times(item, {name: value})
            else:
                setattr(item, name, value)
        request = ingest_service_pb2.UpdateMemoryRequest(
            id=memory_id, scope=scope or self.scope, memory=item, etag=etag,
            update_mask=field_mask_pb2.FieldMask(paths=paths))
        return (await self.ingest.UpdateMemory(request, metadata=self.metadata())).memory

    async def delete_memory(self, memory_id: str, *, scope: str = "", purge: bool = False) -> memory_pb2.Memory:
        """Tombstone (or purge) a memory."""
        return (await self.ingest.DeleteMemory(
            ingest_service_pb2.DeleteMemoryRequest(id=memory_id, scope=scope or self.scope, purge=purge),
            metadata=self.metadata())).memory

    async def search(self, query: str = "", *, limit: int = 10, tags: Sequence[str] = (), scope: str = "",
                     **options: Any) -> recall_service_pb2.SearchMemoriesResponse:
        """Ranked recall (SearchMemories) with any request field as a keyword option; the
        enum options (sort, tag_mode, tag_match, recency_bias) also take AutoMem's words
        ("time_desc", "exact"...). InvalidArgument for a word the enum does not define."""
        for name, enum in _SEARCH_ENUMS.items():
            if isinstance(options.get(name), str):
                options[name] = enum_value(enum, options[name], name)
        request = recall_service_pb2.SearchMemoriesRequest(query=query, limit=limit, tags=list(tags),
                                                           scope=scope or self.scope, **options)
        return await self.recall.SearchMemories(request, metadata=self.metadata())


#: SearchMemoriesRequest's enum fields, by name.
_SEARCH_ENUMS = {"sort": recall_service_pb2.SortOrder, "tag_mode": recall_service_pb2.TagMode,
                 "tag_match": recall_service_pb2.TagMatch, "recency_bias": recall_service_pb2.RecencyBias}

#: AutoMem's time field names -> the MemoryInput Timestamp fields.
TIME_FIELDS = {"timestamp": "event_time", "t_valid": "valid_from", "t_invalid": "valid_to"}


def set_input_times(item: ingest_service_pb2.MemoryInput, given: dict[str, str | None],
                    field_prefix: str = "") -> None:
    """Set the Timestamp fields of ``item`` from ISO 8601 texts under AutoMem's names
    (``timestamp``, ``t_valid``, ``t_invalid``; naive = UTC; empty or None = unset).
    InvalidArgument naming ``field_prefix + name`` for a text that is not a time
    (automem.common.model.parse_time)."""
    for name, text in given.items():
        if text and text.strip():
            getattr(item, TIME_FIELDS[name]).CopyFrom(ts(parse_time(text, field=field_prefix + name)))
