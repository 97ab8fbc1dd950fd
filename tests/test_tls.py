"""rediss:// goes through redis-py's TLS to a real TLS server (Debian's redis-server;
the embedded valkey is built without TLS)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import durables
from durables import ConfigError, ConnectionLostError

from .conftest import Connect
from .secure import make_certificates, tls_config
from .servers import RedisProcess, free_port, server_binary

pytestmark = pytest.mark.both_clients


def _tls_server(
    tmp_path: Path, *, client_certificates: bool = False
) -> Iterator[tuple[RedisProcess, int, dict[str, Path]]]:
    if shutil.which("redis-server") is None or shutil.which("openssl") is None:
        pytest.skip("needs Debian's redis-server (built with TLS) and openssl; CI installs them")
    certs = make_certificates(tmp_path)
    tls_port = free_port()
    extra = tls_config(certs, tls_port)
    if client_certificates:
        extra["tls-auth-clients"] = "yes"
    proc = RedisProcess(server_binary("redis"), tmp_path / "srv", extra=extra).start()
    try:
        yield proc, tls_port, certs
    finally:
        proc.stop()


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[RedisProcess, int, Path]]:
    for proc, port, certs in _tls_server(tmp_path):
        yield proc, port, certs["ca.crt"]


@pytest.fixture
def mutual_tls_server(tmp_path: Path) -> Iterator[tuple[int, dict[str, Path]]]:
    """A server that also asks the client for a certificate signed by its CA."""
    for _, port, certs in _tls_server(tmp_path, client_certificates=True):
        yield port, certs


def test_rediss_url_publishes_and_consumes_over_tls(
    tls_server: tuple[RedisProcess, int, Path], namespace: str
) -> None:
    _, port, ca = tls_server
    url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}"
    with durables.connect(url, namespace=namespace) as client:
        ch = client.channel("secure")
        dur = ch.durable("reader")
        ch.publish(b"over tls")
        with dur.consumer() as c:
            assert [e.data for e in c.fetch(timeout=2)] == [b"over tls"]


def test_a_plain_redis_url_to_the_tls_port_is_refused_clearly(
    tls_server: tuple[RedisProcess, int, Path],
) -> None:
    _, port, _ = tls_server
    with pytest.raises(ConnectionLostError, match="cannot reach"):
        durables.connect(f"redis://127.0.0.1:{port}/0", connect_timeout_s=1, socket_timeout_s=2)


def _round_trip(client: durables.Client) -> list[bytes]:
    ch = client.channel("secure")
    dur = ch.durable("reader")
    ch.publish(b"over tls")
    with dur.consumer() as c:
        return [e.data for e in c.fetch(timeout=2)]


def test_the_ca_setting_verifies_the_server_and_without_it_the_connection_is_refused(
    tls_server: tuple[RedisProcess, int, Path], namespace: str, connect: Connect
) -> None:
    _, port, ca = tls_server
    url = f"rediss://127.0.0.1:{port}/0"
    with connect(url, namespace=namespace, tls_ca_file=ca) as client:
        assert _round_trip(client) == [b"over tls"]
    with pytest.raises(ConnectionLostError, match="certificate verify failed"):
        connect(url, namespace=namespace, connect_timeout_s=2)  # the system's CAs: refused


def test_a_server_asking_for_client_certificates_gets_the_configured_one(
    mutual_tls_server: tuple[int, dict[str, Path]], namespace: str, connect: Connect
) -> None:
    port, certs = mutual_tls_server
    url = f"rediss://127.0.0.1:{port}/0"
    mine = {"tls_cert_file": certs["client.crt"], "tls_key_file": certs["client.key"]}
    with connect(url, namespace=namespace, tls_ca_file=certs["ca.crt"], **mine) as client:
        assert _round_trip(client) == [b"over tls"]
    with pytest.raises(ConnectionLostError):
        connect(url, namespace=namespace, tls_ca_file=certs["ca.crt"], connect_timeout_s=2)


def test_tls_files_for_a_plain_url_or_a_certificate_without_its_key_are_config_errors(
    tmp_path: Path,
) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("-")
    with pytest.raises(ConfigError, match="not a TLS URL"):
        durables.connect("redis://127.0.0.1:1/0", tls_ca_file=pem)
    with pytest.raises(ConfigError, match="go together"):
        durables.connect("rediss://127.0.0.1:1/0", tls_cert_file=pem)
    with pytest.raises(ConfigError, match="tls_ca_file"):
        durables.connect("rediss://127.0.0.1:1/0", tls_ca_file=tmp_path / "missing.pem")
