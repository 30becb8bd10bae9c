"""The one store bound (automem/common/timeouts.py) and how its failure reaches callers."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from automem.common.errors import HTTP_STATUS
from automem.common.settings import Settings
from automem.common.timeouts import StoreTimeout, job_bound, store_call
from automem.gateway.errors import GatewayError, error_response


def test_a_stalled_call_raises_store_timeout_naming_the_store_and_bound() -> None:
    async def stalled() -> None:
        async with store_call("FalkorDB", 0.05):
            await asyncio.Event().wait()

    with pytest.raises(StoreTimeout) as raised:
        asyncio.run(stalled())
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert "FalkorDB did not answer within 0.05s" in raised.value.message


def test_a_job_raises_the_bound_of_its_calls() -> None:
    async def slow() -> str:
        async with store_call("NATS", 0.01) as bound:
            await asyncio.sleep(0.05)
        return f"{bound}"

    with job_bound(5.0):
        assert asyncio.run(slow()) == "5.0"


def test_unavailable_and_deadline_exceeded_answer_503_with_retry_after() -> None:
    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        error = GatewayError.from_rpc(grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), "stalled"))
        assert error.status == HTTP_STATUS[code] == 503
    response = error_response(503, "FalkorDB did not answer within 5s; retry later")
    assert int(response.headers["Retry-After"]) > 0


def test_gateway_deadline_follows_the_store_bound() -> None:
    assert Settings(store_timeout_seconds=2.0).call_deadline_seconds == 7.0
    assert Settings(store_timeout_seconds=0).call_deadline_seconds is None


def test_a_call_the_service_cancelled_answers_503_with_retry_after() -> None:
    # What a client of a replica shutting down under load got for a call that had reached
    # it but no handler yet (automem/common/grpc_server.py GrpcServer.stop).
    error = GatewayError.from_rpc(grpc.aio.AioRpcError(grpc.StatusCode.CANCELLED, grpc.aio.Metadata(),
                                                       grpc.aio.Metadata(), "Received RST_STREAM with error code 8"))
    assert error.status == 503 and error.code == grpc.StatusCode.CANCELLED
    assert int(error_response(error.status, error.message).headers["Retry-After"]) > 0
