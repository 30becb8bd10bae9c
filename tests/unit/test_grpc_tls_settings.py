"""TLS settings of the gRPC server (AUTOMEM_GRPC_TLS_CERT / _KEY / _CA; docs/clients.md):
half a configuration or an unreadable file is refused naming the setting; none is plaintext.
The handshake itself is tested against a running service in
tests/integration/test_client_sdk.py::test_tls_with_a_certificate_made_at_test_time."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from automem.common.grpc_server import client_tls, server_credentials
from automem.common.settings import Settings


def test_no_tls_settings_is_plaintext() -> None:
    assert server_credentials(Settings()) is None
    assert client_tls(Settings()) == (None, "")


@pytest.mark.parametrize(("given", "named"), [({"grpc_tls_cert": "c.pem"}, "AUTOMEM_GRPC_TLS_KEY"),
                                              ({"grpc_tls_key": "k.pem"}, "AUTOMEM_GRPC_TLS_CERT")])
def test_half_a_tls_configuration_names_the_missing_setting(given: dict, named: str) -> None:
    with pytest.raises(ValueError, match=f"^{named}: "):
        server_credentials(Settings(**given))


def test_an_unreadable_file_names_its_setting(tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    key.write_text("not read before the certificate fails")
    with pytest.raises(ValueError, match="^AUTOMEM_GRPC_TLS_CERT: cannot read"):
        server_credentials(Settings(grpc_tls_cert=str(tmp_path / "missing.pem"), grpc_tls_key=str(key)))
    with pytest.raises(ValueError, match="^AUTOMEM_GRPC_TLS_CA: cannot read"):
        client_tls(Settings(grpc_tls_cert=str(key), grpc_tls_ca=str(tmp_path / "nope.pem")))


def test_own_clients_trust_the_certificate_and_take_the_server_name(tmp_path: Path) -> None:
    cert = tmp_path / "c.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    credentials, name = client_tls(Settings(grpc_tls_cert=str(cert), grpc_tls_key=str(cert),
                                            grpc_tls_server_name="automem.internal"))
    assert isinstance(credentials, grpc.ChannelCredentials) and name == "automem.internal"
