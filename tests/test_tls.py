"""rediss:// goes through redis-py's TLS to a real TLS server (Debian's redis-server;
the embedded valkey is built without TLS)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import durables
from durables import ConnectionLostError

from .servers import RedisProcess, free_port, server_binary


def openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def make_certificates(directory: Path) -> dict[str, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1."""
    ca, ca_key = directory / "ca.crt", directory / "ca.key"
    crt, key, csr, ext = (directory / n for n in ("server.crt", "server.key", "s.csr", "san.ext"))
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=durables-test-ca", "-keyout", ca_key, "-out", ca)  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", key, "-out", csr)  # fmt: skip
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-days", "1", "-extfile", ext, "-out", crt)  # fmt: skip
    return {"ca.crt": ca, "server.crt": crt, "server.key": key}


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[RedisProcess, int, Path]]:
    if shutil.which("redis-server") is None or shutil.which("openssl") is None:
        pytest.skip("needs Debian's redis-server (built with TLS) and openssl; CI installs them")
    certs = make_certificates(tmp_path)
    tls_port = free_port()
    extra = {
        "tls-port": str(tls_port),
        "tls-cert-file": str(certs["server.crt"]),
        "tls-key-file": str(certs["server.key"]),
        "tls-ca-cert-file": str(certs["ca.crt"]),
        "tls-auth-clients": "no",
    }
    proc = RedisProcess(server_binary("redis"), tmp_path / "srv", extra=extra).start()
    try:
        yield proc, tls_port, certs["ca.crt"]
    finally:
        proc.stop()


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
        durables.connect(f"redis://127.0.0.1:{port}/0", connect_timeout_s=1, socket_timeout_s=1)
