"""The gRPC TLS settings (automem/common/grpc_tls.py): off by default; a missing or unreadable
file is an error naming its variable (issue 15, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from automem.common.grpc_tls import TlsSettingsError, channel_credentials, channel_options, server_credentials
from automem.common.settings import Settings
from tests.tls import TestCA


def test_tls_settings_errors_name_the_variable(tmp_path: Path) -> None:
    files = TestCA().issue(tmp_path / "tls", ["localhost"])
    base = Settings(grpc_tls=True, grpc_tls_cert_file=str(files.cert), grpc_tls_key_file=str(files.key))
    assert server_credentials(base) is not None
    assert server_credentials(Settings()) is None and channel_credentials(Settings()) is None
    cases = {
        "AUTOMEM_GRPC_TLS_KEY_FILE": base.model_copy(update={"grpc_tls_key_file": ""}),
        "AUTOMEM_GRPC_TLS_CERT_FILE": base.model_copy(update={"grpc_tls_cert_file": str(tmp_path / "missing.crt")}),
        "AUTOMEM_GRPC_TLS_CA_FILE": base.model_copy(update={"grpc_tls_client_auth": True}),
    }
    for variable, settings in cases.items():
        with pytest.raises(TlsSettingsError, match=variable):
            server_credentials(settings)
    (tmp_path / "not.pem").write_text("not a certificate")
    with pytest.raises(TlsSettingsError, match="AUTOMEM_GRPC_TLS_CA_FILE: .* is not a PEM file"):
        channel_credentials(base.model_copy(update={"grpc_tls_ca_file": str(tmp_path / "not.pem")}))


def test_the_server_name_override_is_a_channel_option() -> None:
    assert channel_options(Settings()) == []
    named = Settings(grpc_tls=True, grpc_tls_server_name="automem-grpc")
    assert channel_options(named) == [("grpc.ssl_target_name_override", "automem-grpc")]
    assert channel_options(named.model_copy(update={"grpc_tls": False})) == []
