"""Certificates made at test time (``cryptography``, in requirements.txt for the console's session cookie): a CA, and
leaf certificates it signs for the gRPC TLS tests (tests/integration/test_grpc_tls.py,
tests/integration/test_rendered_chart.py). Nothing is shipped or reused between runs."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class TlsFiles:
    """PEM files as a ``kubernetes.io/tls`` Secret holds them: ``tls.crt``, ``tls.key``, ``ca.crt``."""

    cert: Path
    key: Path
    ca: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class TestCA:
    """A self-signed EC P-256 CA valid for one day."""

    __test__ = False  # not a pytest class

    def __init__(self, common_name: str = "automem test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(_name(common_name))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .sign(self.key, hashes.SHA256()))

    def issue(self, directory: Path, names: list[str], common_name: str = "automem") -> TlsFiles:
        """Write ``tls.crt``, ``tls.key`` and ``ca.crt`` into ``directory`` for a leaf with the
        DNS / IP subject alternative ``names``, usable as server and as client certificate."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        sans: list[x509.GeneralName] = []
        for name in names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        cert = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(self.cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(self.key, hashes.SHA256()))
        directory.mkdir(parents=True, exist_ok=True)
        files = TlsFiles(directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files.key.write_bytes(_pem_key(key))
        files.ca.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return files
