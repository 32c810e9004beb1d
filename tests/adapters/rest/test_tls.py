"""TLS: verification is on by default, a CA bundle can be given, and it can be turned off (a real HTTPS server)."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from tests.servers.rest_app import create_app
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, RestServer, ServerConnectionError


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key (so it is its own CA bundle)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kavalai test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The test shop over HTTPS with a self-signed certificate: its base URL and the certificate file."""
    cert_file, key_file = _self_signed(tmp_path_factory.mktemp("tls"))
    with serve(create_app(), ssl_certfile=str(cert_file), ssl_keyfile=str(key_file)) as url:
        yield url.replace("http://", "https://", 1), cert_file


async def _call(kernel: FunctionKernel, server: RestServer) -> object:
    kernel.register_rest_server(server)
    kernel.register_rest_tool(server.name, "text", "GET")
    return (await kernel.call_tool(f"rest://{server.name}.text")).result  # type: ignore[attr-defined]


async def test_an_unknown_certificate_is_refused_by_default(kernel: FunctionKernel, tls: tuple[str, Path]) -> None:
    url, _ = tls
    with pytest.raises(ServerConnectionError, match=r"rest://s\.text: the TLS certificate of REST server 's'") as info:
        await _call(kernel, RestServer(name="s", url=url))
    assert "verify='<CA bundle path>'" in str(info.value)
    assert isinstance(info.value.__cause__, aiohttp.ClientConnectorCertificateError)


async def test_a_ca_bundle_makes_the_certificate_trusted(kernel: FunctionKernel, tls: tuple[str, Path]) -> None:
    url, cert_file = tls
    assert await _call(kernel, RestServer(name="s", url=url, verify=str(cert_file))) == "plain old text"


async def test_verification_can_be_turned_off(kernel: FunctionKernel, tls: tuple[str, Path]) -> None:
    url, _ = tls
    assert await _call(kernel, RestServer(name="s", url=url, verify=False)) == "plain old text"
