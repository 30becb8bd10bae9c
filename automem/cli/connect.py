"""How the online commands (``automem keys``, ``backup``, ``import``, ``export``, ...) reach a
running service over gRPC.

The address is ``--grpc HOST:PORT``, else ``AUTOMEM_GRPC_TARGET``, else
``127.0.0.1:<AUTOMEM_GRPC_PORT>`` (the embedded default, automem/common/settings.py); the key
is ``--api-key``, else ``AUTOMEM_API_KEY``, else ``AUTOMEM_API_TOKEN``; TLS follows the
``AUTOMEM_GRPC_TLS*`` settings (automem/common/grpc_tls.py).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from automem.common.client import AutomemClient
from automem.common.grpc_tls import channel_credentials, channel_options
from automem.common.settings import Settings


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """Adds ``--grpc``, ``--api-key`` and ``--scope`` to an online subcommand's parser."""
    parser.add_argument("--grpc", default=None, metavar="HOST:PORT",
                        help="gRPC address of the running service (default: AUTOMEM_GRPC_TARGET, "
                             "else 127.0.0.1:AUTOMEM_GRPC_PORT)")
    parser.add_argument("--api-key", default=None, help="API key (default: AUTOMEM_API_KEY, else AUTOMEM_API_TOKEN)")
    parser.add_argument("--scope", default="", help="scope to act on (default: the key's default scope)")


def grpc_address(settings: Settings, args: argparse.Namespace) -> str:
    """The ``host:port`` the command talks to (see the module docstring for the order)."""
    return getattr(args, "grpc", None) or settings.grpc_target or f"127.0.0.1:{settings.grpc_port}"


def api_key(settings: Settings, args: argparse.Namespace) -> str:
    """The key sent as ``authorization: Bearer`` ("" = none)."""
    given = getattr(args, "api_key", None)
    return given if given is not None else (os.environ.get("AUTOMEM_API_KEY") or settings.api_token or "")


@asynccontextmanager
async def online_client(settings: Settings, args: argparse.Namespace,
                        call_timeout: float | None = None) -> AsyncIterator[AutomemClient]:
    """A connected :class:`AutomemClient` for ``args`` (closed on exit); ``call_timeout``:
    default deadline of each call in seconds (None = none)."""
    async with AutomemClient(grpc_address(settings, args), api_key=api_key(settings, args),
                             scope=getattr(args, "scope", "") or "", call_timeout=call_timeout,
                             credentials=channel_credentials(settings),
                             channel_options=channel_options(settings)) as client:
        yield client
