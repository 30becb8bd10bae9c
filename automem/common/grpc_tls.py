"""TLS for gRPC between automem components (issue 15, item 4).

Off unless ``AUTOMEM_GRPC_TLS`` is true. Then every gRPC server (automem/common/grpc_server.py)
listens with the PEM certificate and key of ``AUTOMEM_GRPC_TLS_CERT_FILE`` /
``AUTOMEM_GRPC_TLS_KEY_FILE`` and every client channel (automem/common/client.py) verifies the
server against ``AUTOMEM_GRPC_TLS_CA_FILE`` (the system roots when empty). With
``AUTOMEM_GRPC_TLS_CLIENT_AUTH`` the servers also require a client certificate signed by that CA,
and clients present their own cert and key (mutual TLS). The files are the keys ``tls.crt``,
``tls.key`` and ``ca.crt`` of a ``kubernetes.io/tls`` Secret as cert-manager writes it; the
chart mounts one (deploy/helm/automem, ``grpc.tls``).

The credential objects are grpc's own (``grpc.ssl_server_credentials``,
``grpc.ssl_channel_credentials``); nothing here parses certificates.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from automem.common.settings import Settings


class TlsSettingsError(ValueError):
    """A TLS setting is missing or names a file that cannot be read; the message names the
    variable (:attr:`variable`; :attr:`reason` is the rest)."""

    def __init__(self, variable: str, reason: str, message: str = "") -> None:
        super().__init__(message or f"{variable}: {reason}")
        self.variable, self.reason = variable, reason


def _read(variable: str, path: str) -> bytes:
    """The bytes of the PEM file ``path`` named by the setting ``variable``. Raises
    TlsSettingsError naming ``variable`` when it is empty, unreadable or not PEM."""
    if not path:
        raise TlsSettingsError(variable, "required when AUTOMEM_GRPC_TLS is true",
                               f"{variable} is required when AUTOMEM_GRPC_TLS is true")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TlsSettingsError(variable, f"cannot read {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise TlsSettingsError(variable, f"{path} is not a PEM file")
    return data


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """Credentials for ``server.add_secure_port``, or None when ``grpc_tls`` is off.

    Raises TlsSettingsError naming the variable: the cert or key file missing or unreadable,
    or client auth asked for without ``AUTOMEM_GRPC_TLS_CA_FILE``."""
    if not settings.grpc_tls:
        return None
    cert = _read("AUTOMEM_GRPC_TLS_CERT_FILE", settings.grpc_tls_cert_file)
    key = _read("AUTOMEM_GRPC_TLS_KEY_FILE", settings.grpc_tls_key_file)
    roots = None
    if settings.grpc_tls_client_auth:
        roots = _read("AUTOMEM_GRPC_TLS_CA_FILE", settings.grpc_tls_ca_file)
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=roots,
                                       require_client_auth=settings.grpc_tls_client_auth)


def channel_credentials(settings: Settings) -> grpc.ChannelCredentials | None:
    """Credentials for ``grpc.aio.secure_channel``, or None (plaintext) when ``grpc_tls`` is
    off. With client auth the channel presents the process's cert and key.

    Raises TlsSettingsError naming the variable of a file that cannot be read."""
    if not settings.grpc_tls:
        return None
    roots = _read("AUTOMEM_GRPC_TLS_CA_FILE", settings.grpc_tls_ca_file) if settings.grpc_tls_ca_file else None
    if settings.grpc_tls_client_auth:
        return grpc.ssl_channel_credentials(
            root_certificates=roots,
            private_key=_read("AUTOMEM_GRPC_TLS_KEY_FILE", settings.grpc_tls_key_file),
            certificate_chain=_read("AUTOMEM_GRPC_TLS_CERT_FILE", settings.grpc_tls_cert_file))
    return grpc.ssl_channel_credentials(root_certificates=roots)


def channel_options(settings: Settings) -> list[tuple[str, str]]:
    """Extra channel options: the host name the server certificate is checked against
    (``grpc.ssl_target_name_override``) when ``AUTOMEM_GRPC_TLS_SERVER_NAME`` is set."""
    if settings.grpc_tls and settings.grpc_tls_server_name:
        return [("grpc.ssl_target_name_override", settings.grpc_tls_server_name)]
    return []
