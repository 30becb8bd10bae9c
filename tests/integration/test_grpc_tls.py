"""TLS for gRPC between components (issue 15, item 4; automem/common/grpc_tls.py).

The services (ingest, recall, enrich, consolidate) and the gateway run as two runners with
``AUTOMEM_GRPC_TLS`` and mutual TLS on, with a CA and a certificate made at test time
(tests/tls.py). A memory stored and recalled through the gateway crosses the TLS channel. A
plaintext client, a client that trusts another CA and a client without a certificate are
refused; the plaintext health port answers the probes' health checks and nothing else.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from automem.common.embedded import free_port
from automem.common.grpc_tls import channel_credentials
from automem.common.settings import Settings
from automem.v1 import recall_service_pb2, recall_service_pb2_grpc
from tests.conftest import eventually, start_service
from tests.tls import TestCA

pytestmark = pytest.mark.asyncio(loop_scope="session")

SERVICES = ["ingest", "recall", "enrich", "consolidate"]


def _tls(settings: Settings, files, **more) -> Settings:
    return settings.model_copy(update={
        "grpc_tls": True, "grpc_tls_cert_file": str(files.cert), "grpc_tls_key_file": str(files.key),
        "grpc_tls_ca_file": str(files.ca), "grpc_tls_client_auth": True, **more})


async def _health(channel: grpc.aio.Channel, service: str) -> int:
    answer = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service),
                                                             timeout=5)
    return answer.status


async def test_components_talk_over_mutual_tls(settings: Settings, tmp_path: Path) -> None:
    ca = TestCA()
    files = ca.issue(tmp_path / "tls", ["localhost", "127.0.0.1"])
    health_port = free_port()
    services = await start_service(_tls(settings, files, grpc_health_port=health_port, qdrant_url="disabled"),
                                   SERVICES)
    try:
        address = services.grpc
        gateway = await start_service(_tls(settings, files, ingest_addr=address, recall_addr=address,
                                           enrich_addr=address, consolidate_addr=address), ["gateway"])
        try:
            async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
                async def ready() -> bool:
                    return (await http.get("/readyz")).status_code == 200
                await eventually(ready, timeout=60)
                stored = await http.post("/memory", json={"content": "Spoken over TLS", "tags": ["tls"]})
                assert stored.status_code == 201, stored.text
                found = await http.get("/recall", params={"tags": "tls", "limit": 5})
                assert found.status_code == 200, found.text
                assert stored.json()["memory_id"] in [hit["id"] for hit in found.json()["results"]]

            # The right CA and a client certificate: served.
            good = channel_credentials(_tls(settings, files))
            async with grpc.aio.secure_channel(address, good) as channel:
                assert await _health(channel, "automem.v1.RecallService") == health_pb2.HealthCheckResponse.SERVING

            # Plaintext on the TLS port: refused.
            async with grpc.aio.insecure_channel(address) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as plain:
                    await _health(channel, "")
                assert plain.value.code() == grpc.StatusCode.UNAVAILABLE

            # A client that trusts another CA: the server's certificate is refused.
            stranger = TestCA("another CA").issue(tmp_path / "other", ["localhost", "127.0.0.1"])
            async with grpc.aio.secure_channel(address, channel_credentials(_tls(settings, stranger))) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as untrusted:
                    await _health(channel, "")
                assert untrusted.value.code() == grpc.StatusCode.UNAVAILABLE

            # The right CA but no client certificate: mutual TLS refuses it.
            anonymous = grpc.ssl_channel_credentials(root_certificates=files.ca.read_bytes())
            async with grpc.aio.secure_channel(address, anonymous) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as no_cert:
                    await _health(channel, "")
                assert no_cert.value.code() == grpc.StatusCode.UNAVAILABLE

            # The plaintext health port (the kubelet's grpc probes): health only.
            async with grpc.aio.insecure_channel(f"127.0.0.1:{health_port}") as channel:
                assert await _health(channel, "liveness") == health_pb2.HealthCheckResponse.SERVING
                assert await _health(channel, "automem.v1.RecallService") == health_pb2.HealthCheckResponse.SERVING
                with pytest.raises(grpc.aio.AioRpcError) as other:
                    await recall_service_pb2_grpc.RecallServiceStub(channel).SearchMemories(
                        recall_service_pb2.SearchMemoriesRequest(query="tls"), timeout=5)
                assert other.value.code() == grpc.StatusCode.UNIMPLEMENTED
        finally:
            await gateway.runner.stop()
    finally:
        await services.runner.stop()

