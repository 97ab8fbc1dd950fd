"""The secure run is what it claims: TLS with a verified certificate, as a limited user."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import redis

import durables
from durables import AccessDeniedError

from .secure import SECURE, USER
from .servers import RedisProcess

pytestmark = pytest.mark.skipif(not SECURE, reason="the DURABLES_TEST_SECURE=1 run only")


def test_the_fixture_url_is_tls_as_the_limited_user(server: RedisProcess, namespace: str) -> None:
    assert server.url.startswith(f"rediss://{USER}:")
    tls_port = urlsplit(server.url).port
    with durables.connect(server.url, namespace=namespace) as client:
        raw = client.ctx.executor.redis
        assert raw.connection_pool.connection_class is redis.SSLConnection
        client.channel("orders").publish(b"x")
        with server.client() as admin:  # the plain port, as the default user
            users = {c["user"] for c in admin.client_list() if c["laddr"].endswith(f":{tls_port}")}
        assert users == {USER}
    outside = durables.connect(server.url, namespace="outside")
    with outside, pytest.raises(AccessDeniedError, match="NOPERM"):
        outside.channel("orders").publish(b"x")
