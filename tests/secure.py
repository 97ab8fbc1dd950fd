"""The suite over TLS as a least-privilege ACL user: `DURABLES_TEST_SECURE=1`.

The server then also listens with TLS (certificates made here, for 127.0.0.1, checked by
the client against a throwaway CA) and knows a user limited to the test namespaces'
keys, with the README's ACL line. `server.url` is `rediss://` as that user, so every
test that connects through the fixtures' URL runs encrypted and unprivileged; the
fixtures themselves keep the plain port as the default user, for setting up and
inspecting. Debian's `redis-server` has TLS; the embedded valkey does not.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from durables.permissions import acl_rules

from .servers import HOST, RedisProcess, free_port

SECURE = os.environ.get("DURABLES_TEST_SECURE") == "1"
USER, PASSWORD = "app", "s3cret-app"
KEYS = "~t* ~m:*"
"""The test namespaces: fixtures make `t<hex>`; a few tests name `m`."""
INSPECTION = "+keys +type +zscore"
"""What the tests themselves ask as that user to look at what is stored (never durables)."""
RULES = f"{acl_rules().split(' ', 2)[2]} {INSPECTION}"
"""The documented least-privilege rules (docs/operations.md), but for the key patterns,
and the tests' own inspection."""


def openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def make_certificates(directory: Path) -> dict[str, Path]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.crt", directory / "ca.key"
    crt, key, csr, ext = (directory / n for n in ("server.crt", "server.key", "s.csr", "san.ext"))
    client_crt, client_key, client_csr = (
        directory / n for n in ("client.crt", "client.key", "c.csr")
    )
    made = {
        "ca.crt": ca,
        "server.crt": crt,
        "server.key": key,
        "client.crt": client_crt,
        "client.key": client_key,
    }
    if client_crt.exists():
        return made
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=durables-test-ca",
        "-keyout",
        ca_key,
        "-out",
        ca,
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        key,
        "-out",
        csr,
    )
    openssl(
        "x509",
        "-req",
        "-in",
        csr,
        "-CA",
        ca,
        "-CAkey",
        ca_key,
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        ext,
        "-out",
        crt,
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=durables-test-client",
        "-keyout",
        client_key,
        "-out",
        client_csr,
    )
    openssl(
        "x509",
        "-req",
        "-in",
        client_csr,
        "-CA",
        ca,
        "-CAkey",
        ca_key,
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        client_crt,
    )
    return made


def tls_config(certs: dict[str, Path], tls_port: int) -> dict[str, str]:
    return {
        "tls-port": str(tls_port),
        "tls-cert-file": str(certs["server.crt"]),
        "tls-key-file": str(certs["server.key"]),
        "tls-ca-cert-file": str(certs["ca.crt"]),
        "tls-auth-clients": "no",
    }


def secure(proc: RedisProcess, certs_dir: Path) -> RedisProcess:
    """Make `proc` (not started yet) listen with TLS too, know the limited user, and hand
    out a `rediss://` URL as that user."""
    certs = make_certificates(certs_dir)
    tls_port = free_port()
    proc.extra.update(tls_config(certs, tls_port))
    proc.extra["user"] = f"{USER} on >{PASSWORD} {KEYS} resetchannels {RULES}"
    proc.url = (
        f"rediss://{USER}:{PASSWORD}@{HOST}:{tls_port}/0?ssl_ca_certs={certs['ca.crt']}"
        "&ssl_cert_reqs=required"
    )
    return proc
