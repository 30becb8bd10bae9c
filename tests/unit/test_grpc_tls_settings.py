"""The gRPC TLS settings (automem/common/grpc_tls.py; docs/kubernetes.md, docs/clients.md "TLS"):
off by default (plaintext); half a configuration, or a missing, unreadable or non-PEM file, is a
TlsSettingsError (a ValueError) naming its variable (issue 15, item 4; issue 16). The handshake
itself is tested against running services in tests/integration/test_grpc_tls.py and
tests/integration/test_client_sdk.py::test_tls_with_a_certificate_made_at_test_time."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from automem.common.grpc_tls import TlsSettingsError, channel_credentials, channel_options, server_credentials
from automem.common.settings import Settings
from tests.tls import TestCA


def test_no_tls_settings_is_plaintext() -> None:
    assert server_credentials(Settings()) is None
    assert channel_credentials(Settings()) is None
    assert channel_options(Settings()) == []


def test_tls_settings_errors_name_the_variable(tmp_path: Path) -> None:
    files = TestCA().issue(tmp_path / "tls", ["localhost"])
    base = Settings(grpc_tls=True, grpc_tls_cert_file=str(files.cert), grpc_tls_key_file=str(files.key))
    assert server_credentials(base) is not None
    cases = {
        # Half a configuration: TLS on without the certificate or without the key.
        "AUTOMEM_GRPC_TLS_CERT_FILE": base.model_copy(update={"grpc_tls_cert_file": ""}),
        "AUTOMEM_GRPC_TLS_KEY_FILE": base.model_copy(update={"grpc_tls_key_file": ""}),
        # A file that cannot be read.
        "AUTOMEM_GRPC_TLS_CERT_FILE: cannot read": base.model_copy(
            update={"grpc_tls_cert_file": str(tmp_path / "missing.crt")}),
        # Client auth without the CA that verifies the clients.
        "AUTOMEM_GRPC_TLS_CA_FILE": base.model_copy(update={"grpc_tls_client_auth": True}),
    }
    for variable, settings in cases.items():
        with pytest.raises(TlsSettingsError, match=f"^{variable}"):
            server_credentials(settings)
    (tmp_path / "not.pem").write_text("not a certificate")
    with pytest.raises(TlsSettingsError, match="^AUTOMEM_GRPC_TLS_CA_FILE: .* is not a PEM file"):
        channel_credentials(base.model_copy(update={"grpc_tls_ca_file": str(tmp_path / "not.pem")}))
    with pytest.raises(ValueError, match="^AUTOMEM_GRPC_TLS_CA_FILE: cannot read"):  # a ValueError too
        channel_credentials(base.model_copy(update={"grpc_tls_ca_file": str(tmp_path / "nope.pem")}))


def test_own_clients_trust_the_ca_and_take_the_server_name(tmp_path: Path) -> None:
    files = TestCA().issue(tmp_path / "tls", ["localhost"])
    settings = Settings(grpc_tls=True, grpc_tls_ca_file=str(files.ca), grpc_tls_server_name="automem.internal")
    assert isinstance(channel_credentials(settings), grpc.ChannelCredentials)
    assert channel_options(settings) == [("grpc.ssl_target_name_override", "automem.internal")]
    assert channel_options(settings.model_copy(update={"grpc_tls": False})) == []
