"""How the online commands (``automem keys``, ``backup``, ``restore``, ``reindex``, ``sync``,
``import``, ``export``, ...) reach a running service over gRPC.

Discovery: ``automem up`` writes the addresses it serves into
``<data dir>/automem.endpoints.json`` (:data:`ENDPOINTS_FILE`: ``{"pid", "grpc", "http",
"targets"}``, ``targets`` the gRPC addresses of the targets it runs as child processes)
once it is up and removes the file when it stops (:func:`write_endpoints`,
:func:`remove_endpoints`); the CLI reads it (:func:`discover`) and believes it only while
that pid is alive.

The address is ``--grpc HOST:PORT``, else ``AUTOMEM_GRPC_TARGET``, else the discovered one,
else ``127.0.0.1:<AUTOMEM_GRPC_PORT>`` (the embedded default, automem/common/settings.py); the
key is ``--api-key``, else ``AUTOMEM_API_KEY``, else ``AUTOMEM_API_TOKEN``, with
``--admin-token``, else ``ADMIN_API_TOKEN``, as ``x-admin-token`` (the service token is an
admin only with it when the service has one); TLS follows the ``AUTOMEM_GRPC_TLS*`` settings
(automem/common/grpc_tls.py).

Online or offline (:func:`is_online`): a command that can also work on a stopped data dir
(keys, backup, restore, reindex) goes online when ``--grpc`` or ``--url`` (REST, through the
gateway) is given, ``AUTOMEM_GRPC_TARGET`` is set or a running ``automem up`` is
discovered, and offline otherwise or with ``--offline``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from automem.common.client import AutomemClient
from automem.common.embedded import pid_alive
from automem.common.grpc_tls import channel_credentials, channel_options
from automem.common.settings import Settings

#: The file ``automem up`` keeps in its data dir while it serves.
ENDPOINTS_FILE = "automem.endpoints.json"


def http_base_url(value: str) -> str:
    """``--url``'s value: an ``http://`` or ``https://`` URL with a host (argparse's error
    otherwise: ``ftp://x`` was sent and reported as a service that cannot be reached)."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"{value!r} is not an http:// or https:// URL with a host")
    return value.strip()


def add_connection_options(parser: argparse.ArgumentParser, offline: bool = False, scope: bool = True,
                           rest: bool = False) -> None:
    """Adds ``--grpc``, ``--api-key`` and ``--scope`` (unless not ``scope``: a command that
    acts on no scope) to an online subcommand's parser, ``--offline`` when ``offline`` (a
    command that also works on a stopped data dir) and ``--url`` when ``rest`` (a command
    that can also go through the REST gateway, automem/cli/rest.py)."""
    connection = parser.add_mutually_exclusive_group() if rest else parser
    connection.add_argument("--grpc", default=None, metavar="HOST:PORT",
                            help="gRPC address of the running service (default: AUTOMEM_GRPC_TARGET, else the "
                                 f"address `automem up` wrote to <data dir>/{ENDPOINTS_FILE}, else "
                                 "127.0.0.1:AUTOMEM_GRPC_PORT)")
    if rest:
        connection.add_argument("--url", default=None, metavar="http://HOST:PORT", type=http_base_url,
                                help="go through the REST gateway at this base URL instead of gRPC")
    parser.add_argument("--api-key", default=None, help="API key (default: AUTOMEM_API_KEY, else AUTOMEM_API_TOKEN)")
    parser.add_argument("--admin-token", default=None,
                        help="admin token sent as X-Admin-Token: with AUTOMEM_API_TOKEN as the key it makes the "
                             "call an admin's, as a service with ADMIN_API_TOKEN set requires (default: "
                             "ADMIN_API_TOKEN)")
    if scope:
        parser.add_argument("--scope", default="", help="scope to act on (default: the key's default scope)")
    if offline:
        parser.add_argument("--offline", action="store_true",
                            help="work on the stopped data dir (AUTOMEM_DATA_DIR) or the configured stores "
                                 "directly, even when a service is found")


def endpoints_path(settings: Settings) -> Path:
    """``<data dir>/automem.endpoints.json``."""
    return Path(settings.data_dir) / ENDPOINTS_FILE


def write_endpoints(settings: Settings, grpc: str, http: str, targets: dict[str, str] | None = None) -> Path:
    """Record the addresses this process serves (``grpc`` ``host:port``, ``http`` base URL,
    "" = none; ``targets``: target name → gRPC address of those served by child processes)
    in the data dir, atomically; returns the file."""
    path = endpoints_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"pid": os.getpid(), "grpc": grpc, "http": http, "targets": targets or {}}),
                       encoding="utf-8")
    partial.replace(path)
    return path


def remove_endpoints(settings: Settings) -> None:
    """Remove the endpoints file if it is this process's."""
    found = _read(endpoints_path(settings))
    if found is not None and found.get("pid") == os.getpid():
        with suppress(OSError):
            endpoints_path(settings).unlink()


def _read(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def discover(settings: Settings) -> dict[str, Any] | None:
    """``{"pid", "grpc", "http"}`` of the ``automem up`` serving this data dir, or None (no
    file, or its process is gone: a stale file of a killed service)."""
    found = _read(endpoints_path(settings))
    if found is None or not isinstance(found.get("pid"), int) or not pid_alive(found["pid"]):
        return None
    return found


def is_online(settings: Settings, args: argparse.Namespace) -> bool:
    """Whether the command talks to a running service (see the module docstring)."""
    if getattr(args, "offline", False):
        return False
    return bool(getattr(args, "grpc", None) or getattr(args, "url", None) or settings.grpc_target
                or discover(settings))


def grpc_address(settings: Settings, args: argparse.Namespace) -> str:
    """The ``host:port`` the command talks to (see the module docstring for the order)."""
    given = getattr(args, "grpc", None) or settings.grpc_target
    if given:
        return given
    found = discover(settings)
    return (found or {}).get("grpc") or f"127.0.0.1:{settings.grpc_port}"


def api_key(settings: Settings, args: argparse.Namespace) -> str:
    """The key sent as ``authorization: Bearer`` ("" = none)."""
    given = getattr(args, "api_key", None)
    return given if given is not None else (os.environ.get("AUTOMEM_API_KEY") or settings.api_token or "")


def admin_token(settings: Settings, args: argparse.Namespace) -> str:
    """The token sent as ``x-admin-token`` ("" = none): ``--admin-token``, else
    ``ADMIN_API_TOKEN``. A service with ``ADMIN_API_TOKEN`` set takes its API token for a
    writer without it (automem/common/grpc_server.py ``Authenticator``): ``automem keys``
    could not run against it (break-it review)."""
    given = getattr(args, "admin_token", None)
    return given if given is not None else settings.admin_token


def target_addresses(settings: Settings, args: argparse.Namespace) -> dict[str, str]:
    """The address of each service's target (``ingest``, ``recall``, ``enrich``,
    ``consolidate``; ingest also serves ReviewService and AdminService): all
    :func:`grpc_address` when ``--grpc`` is given, else ``AUTOMEM_<TARGET>_ADDR`` (the
    distributed mode), else the discovered ``automem up``'s child targets, else
    :func:`grpc_address`."""
    base = grpc_address(settings, args)
    if getattr(args, "grpc", None):
        return dict.fromkeys(("ingest", "recall", "enrich", "consolidate"), base)
    found = (discover(settings) or {}).get("targets") or {}
    return {name: getattr(settings, f"{name}_addr") or found.get(name) or base
            for name in ("ingest", "recall", "enrich", "consolidate")}


@asynccontextmanager
async def online_client(settings: Settings, args: argparse.Namespace,
                        call_timeout: float | None = None) -> AsyncIterator[AutomemClient]:
    """A connected :class:`AutomemClient` for ``args`` (each service at its
    :func:`target_addresses`; closed on exit); ``call_timeout``: default deadline of each
    call in seconds (None = none)."""
    addresses = target_addresses(settings, args)
    async with AutomemClient(addresses["ingest"], addresses["recall"], addresses["enrich"],
                             addresses["consolidate"], api_key=api_key(settings, args),
                             admin_token=admin_token(settings, args),
                             scope=getattr(args, "scope", "") or "", call_timeout=call_timeout,
                             credentials=channel_credentials(settings),
                             channel_options=channel_options(settings)) as client:
        yield client
